"""probe.fp8_gemm (level 2): torch._scaled_mm in the GPU's own fp8 formats (fnuz on MI300 / gfx942, OCP on gfx950,
RDNA4 and NVIDIA sm_89+; rocmcheck/probes/fp8_formats.py) computes the right numbers, forward (e4m3 x e4m3, with
and without fast accumulation) and backward (e5m2 x e4m3), each against float64, and runs faster than bf16 on the
same GPU. Skips where the arch or torch has no fp8 GEMM. Runner: rocmcheck/probes/fp8_gemm.py."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.fp8_formats import (
    FP8_OVER_BF16_DATASHEET,
    FP8_OVER_BF16_FLOOR,
    fp8_gemm_limit,
    fp8_quantized_limit,
)
from rocmcheck.probes.judging import fmt_err, number, slow_gpu_fix, wheel_fix
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.fp8_gemm"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    import torch

    from rocmcheck.facts.torch_devices import device_arch
    from rocmcheck.probes.fp8_gemm import fp8_gemm

    return fp8_gemm(device, device_arch(torch, torch.cuda.get_device_properties(device)))


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.fp8_formats import OCP
    from rocmcheck.probes.fp8_gemm import CPU_RATE_SIZE, CPU_SHAPE, fp8_gemm

    return fp8_gemm(device, "", OCP, CPU_SHAPE, CPU_RATE_SIZE, iters=3, warmup_s=0.0)


def _case_problem(name: str, case: dict[str, Any], k: int) -> str | None:
    pair = f"{name} ({case.get('a')} x {case.get('b')})"
    if case.get("error"):
        return f"{pair} fails: {case['error']}"
    if case.get("nonfinite") or number(case.get("rel_err")) is None:
        return f"{pair} produced NaN/inf ({case.get('nonfinite') or 0} non-finite elements)"
    err, limit = number(case["rel_err"]), fp8_gemm_limit(k)
    if err > limit:
        return f"{pair} is wrong: relative error {err:.1e} > {limit:.0e} against the float64 product of its fp8 inputs"
    quant = number(case.get("quantized_rel_err"))
    qlimit = fp8_quantized_limit(str(case.get("a")), str(case.get("b")), k)
    if quant is None or quant > qlimit:
        return (f"{pair} is wrong after the cast to fp8: relative error {fmt_err(quant)} > {qlimit:.2f} against the "
                "float64 product of the operands before the cast")
    return None


def _case_line(name: str, case: dict[str, Any], k: int) -> str:
    if case.get("error"):
        return f"{name} {case.get('a')} x {case.get('b')}: {case['error']}"
    return (f"{name} {case.get('a')} x {case.get('b')}{' fast accum' if case.get('fast_accum') else ''}: "
            f"rel err {fmt_err(case.get('rel_err'))} (limit {fp8_gemm_limit(k):.0e}), after the cast "
            f"{fmt_err(case.get('quantized_rel_err'))} "
            f"(limit {fp8_quantized_limit(str(case.get('a')), str(case.get('b')), k):.2f})")


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    m, n, k = data["shape"]
    cases: dict[str, dict[str, Any]] = data["cases"]
    family = "fnuz" if data.get("family") == "fnuz" else "OCP"
    what = f"fp8 GEMM ({family} {data.get('e4m3')} / {data.get('e5m2')}, {m}x{n}x{k})"
    evidence = [_case_line(name, c, k) for name, c in cases.items()]
    info: dict[str, Any] = dict(family=data.get("family"), e4m3=data.get("e4m3"), e5m2=data.get("e5m2"),
                                shape=[m, n, k], limit=fp8_gemm_limit(k), cases=cases)
    problems = [p for p in (_case_problem(name, c, k) for name, c in cases.items()) if p]
    if problems:
        return failed(f"{what} is wrong on {ctx.label()}: {'; '.join(problems)}", wheel_fix(ctx), evidence, **info,
                      id=ID)
    rate = data.get("rate") or {}
    fp8, bf16 = number(rate.get("fp8_tflops")), number(rate.get("bf16_tflops"))
    if rate.get("error") or not fp8 or not bf16:
        why = rate.get("error") or "no rate measured"
        return warned(f"{what} is right on {ctx.label()}, but its rate could not be measured: {why}",
                      slow_gpu_fix(ctx), evidence, **info, id=ID)
    ratio = fp8 / bf16
    size = (rate.get("shape") or ["?"])[0]
    rate_text = (f"{fp8:,.1f} TFLOP/s = {ratio:.2f}x bf16's {bf16:,.1f} at {size}^3 in the same run "
                 f"(datasheets: {FP8_OVER_BF16_DATASHEET:g}x; expected >= {FP8_OVER_BF16_FLOOR:g}x)")
    evidence.append(f"rate: {rate_text}")
    info.update(fp8_tflops=round(fp8, 1), bf16_tflops=round(bf16, 1), ratio=round(ratio, 3))
    if ctx.vendor == "cpu":  # CPU test mode: torch's CPU kernels emulate fp8; their rate says nothing
        return passed(f"{what} is right on the CPU (test mode; the rate is not judged there)", evidence, **info, id=ID)
    if ratio < FP8_OVER_BF16_FLOOR:
        return warned(f"{what} is right on {ctx.label()} but slow: {rate_text}", slow_gpu_fix(ctx), evidence,
                      **info, id=ID)
    return passed(f"{what} is right on {ctx.label()} and runs at {fp8:,.0f} TFLOP/s, {ratio:.2f}x bf16", evidence,
                  **info, id=ID)


PROBE = Probe(ID, "fp8 GEMM (torch._scaled_mm, the GPU's fp8 formats) is right and faster than bf16", 60, judge,
              run=run, run_cpu=run_cpu, level=2, budget_s=5.0)
