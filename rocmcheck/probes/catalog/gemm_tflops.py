"""probe.gemm_tflops: the bf16 8192^3 matrix-product rate against AMD's validation target for the product (RVS gst,
knowledge/validation_floors.json), else against what this GPU typically reaches."""

from __future__ import annotations

from typing import Any

from rocmcheck.knowledge.floors import GEMM_BF16_TFLOPS
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number, rate_verdict, slow_gpu_fix
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.gemm_tflops"
# GEMM rate vs what this GPU typically reaches (datasheet peak x typical fraction, knowledge/gpus.json).
GEMM_PASS_OF_TYPICAL = 0.75  # run-to-run and clock spread stays well inside this
GEMM_FAIL_OF_TYPICAL = 0.50  # below half of typical something is wrong: clocks, power cap, another job, BLAS
# Without a typical fraction only the datasheet peak is known: flag only a rate far below it.
GEMM_WARN_OF_PEAK_ONLY = 0.30
# Against RVS's gst target (hipBLASLt, its own shape, a 15 s hot loop after a 5 s ramp): this probe times a shorter
# loop through torch's BLAS choice, so it passes from this share of the target, and fails as above below half of it.
GEMM_PASS_OF_RVS_TARGET = 0.90
GEMM_FAIL_OF_RVS_TARGET = 0.50
# A site's floor (--knowledge) is this probe's own measure with the site's margin already taken off it
# (`doctor --write-reference` writes 0.9 x a known-good node's rate): it passes at the floor itself.
GEMM_PASS_OF_SITE_FLOOR = 1.0


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import gemm_tflops

    return gemm_tflops(device)


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import gemm_tflops

    return gemm_tflops(device, 256, iters=3, warmup_s=0.0)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    tflops = number(data["tflops"])
    m, n, k = data["shape"]
    what = f"bf16 GEMM {m}x{n}x{k}:"
    if tflops is None or tflops <= 0:
        return failed(f"bf16 GEMM rate could not be measured on {ctx.label()}", slow_gpu_fix(ctx), tflops=None, id=ID)
    product = ctx.product()
    info = dict(tflops=round(tflops, 1), shape=[m, n, k])
    target = ctx.floor(GEMM_BF16_TFLOPS)
    if target is not None:
        named = (f"the site's floor {target.value:,.0f} for {target.product}" if target.site
                 else f"AMD's RVS target {target.value:,.0f} for {target.product}")
        verdict = rate_verdict(ID, what, tflops, "TFLOP/s", target.value, named,
                               GEMM_PASS_OF_SITE_FLOOR if target.site else GEMM_PASS_OF_RVS_TARGET,
                               GEMM_FAIL_OF_RVS_TARGET, slow_gpu_fix(ctx), ctx, target_source=target.source, **info)
        verdict.evidence.append(f"target: {target.cite()}")
        return verdict
    if product is None or not product.bf16_tflops:
        return passed(f"{what} {tflops:,.1f} TFLOP/s on {ctx.label()} (no datasheet figure for this GPU to compare)",
                      **info, id=ID)
    peak = product.bf16_tflops
    info["peak_tflops"] = peak
    if product.typical_fraction:
        typical = peak * product.typical_fraction
        return rate_verdict(ID, what, tflops, "TFLOP/s", typical,
                            f"the {typical:,.0f} typically reached ({product.typical_fraction:.0%} of the "
                            f"{peak:,.0f} datasheet peak)",
                            GEMM_PASS_OF_TYPICAL, GEMM_FAIL_OF_TYPICAL, slow_gpu_fix(ctx), ctx,
                            typical_fraction=product.typical_fraction, **info)
    ratio = tflops / peak
    text = f"{what} {tflops:,.1f} TFLOP/s on {ctx.label()} = {ratio:.0%} of the {peak:,.0f} datasheet peak"
    if ratio < GEMM_WARN_OF_PEAK_ONLY:
        return warned(text + f" (< {GEMM_WARN_OF_PEAK_ONLY:.0%})", slow_gpu_fix(ctx), ratio=round(ratio, 4), **info,
                      id=ID)
    return passed(text, ratio=round(ratio, 4), **info, id=ID)


PROBE = Probe(ID, "bf16 matrix products run at the speed this GPU should reach", 30, judge, run=run, run_cpu=run_cpu)
