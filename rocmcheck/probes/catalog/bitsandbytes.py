"""probe.bitsandbytes (level 2): bitsandbytes imports in the probe child, its 4-bit quantize -> dequantize round
trip (nf4 and fp4) stays within the quantization error of a normal weight, and bnb.matmul_4bit matches a product
with the dequantized weight. On CDNA GPUs the block size follows the CDNA rule (rocmcheck/probes/quant4.py) and
whether this build also handles the default 64 is reported. Skips where bitsandbytes is not installed."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import shell
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import fmt_err, number
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.bitsandbytes"
# 4-bit round trip of N(0, 1) weights, ||dequant(quant(w)) - w|| / ||w||: measured 0.092 (blocksize 64) and 0.096
# (128) for nf4, 0.122 and 0.128 for fp4 (bitsandbytes 0.50.2, CPU backend, a 1024x1024 weight). A broken kernel
# or a wrong block layout is off by O(1); these limits sit about 50 % above the quantization error itself.
ROUND_TRIP_MAX_REL_ERR = {"nf4": 0.15, "fp4": 0.20}
# bnb.matmul_4bit against x @ dequant(W)^T in fp32: both use the same dequantized weight, so only the bf16 output
# rounding differs (measured 1.6e-3 on the CPU backend).
MATMUL_4BIT_MAX_REL_ERR = 2e-2
CPU_ARCH = ""  # CPU test mode: no GPU arch, the default block size


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    import torch

    from rocmcheck.facts.torch_devices import device_arch
    from rocmcheck.probes.quant4 import bnb_4bit

    return bnb_4bit(device, device_arch(torch, torch.cuda.get_device_properties(device)))


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.quant4 import bnb_4bit

    return bnb_4bit(device, CPU_ARCH)


def _fix(ctx: DeviceContext, data: dict[str, Any]):
    if ctx.vendor == "amd":
        hip = data.get("torch_hip") or "this ROCm"
        return shell("pip install --upgrade bitsandbytes",
                     f"a bitsandbytes with a native library for torch's ROCm ({hip}): current releases ship ROCm "
                     "builds and load the closest one (BNB_ROCM_VERSION=72 picks libbitsandbytes_rocm72.so by "
                     "hand); for a ROCm no release covers, build ROCm's fork (github.com/ROCm/bitsandbytes) "
                     "against this ROCm")
    cuda = data.get("torch_cuda") or "this CUDA"
    return shell("pip install --upgrade bitsandbytes", f"a bitsandbytes with a native library for torch's CUDA "
                                                       f"({cuda}); BNB_CUDA_VERSION picks one by hand")


def _line(qt: str, r: dict[str, Any]) -> str:
    if r.get("error"):
        return f"{qt} blocksize {r.get('blocksize')}: {r['error']}"
    return (f"{qt} blocksize {r.get('blocksize')}: round trip rel err {fmt_err(r.get('round_trip_rel_err'))} "
            f"(limit {ROUND_TRIP_MAX_REL_ERR.get(qt, 0):.2f}), matmul_4bit rel err {fmt_err(r.get('matmul_rel_err'))}")


def _problem(qt: str, r: dict[str, Any]) -> str | None:
    if r.get("error"):
        return f"{qt} fails: {r['error']}"
    rt, mm = number(r.get("round_trip_rel_err")), number(r.get("matmul_rel_err"))
    if rt is None or rt > ROUND_TRIP_MAX_REL_ERR[qt]:
        return f"{qt} round trip is wrong (relative error {fmt_err(rt)} > {ROUND_TRIP_MAX_REL_ERR[qt]:.2f})"
    if mm is None or mm > MATMUL_4BIT_MAX_REL_ERR:
        return f"{qt} matmul_4bit is wrong (relative error {fmt_err(mm)} > {MATMUL_4BIT_MAX_REL_ERR:.0e})"
    return None


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    version = data.get("version") or "?"
    info: dict[str, Any] = dict(version=data.get("version"), backend=data.get("backend"),
                                blocksize=data.get("blocksize"), cdna=data.get("cdna"),
                                libraries=data.get("libraries"))
    if data.get("import_error"):
        return failed(f"bitsandbytes {version} does not import on {ctx.label()}: {data['import_error']}",
                      _fix(ctx, data), [f"torch ROCm {data.get('torch_hip')} / CUDA {data.get('torch_cuda')}"],
                      **info, id=ID)
    results: dict[str, dict[str, Any]] = data["results"]
    evidence = [_line(qt, r) for qt, r in results.items()]
    evidence.append(f"backend {data.get('backend')}; native libraries shipped: "
                    f"{', '.join(data.get('libraries') or []) or 'none found'}")
    info["results"] = results
    problems = [p for p in (_problem(qt, r) for qt, r in results.items()) if p]
    rule = (f"CDNA rule: blocksize 64 is unsupported on CDNA GPUs, {data.get('blocksize')} used"
            if data.get("cdna") else None)
    if rule:
        evidence.insert(0, rule)
    if problems:
        return failed(f"bitsandbytes {version} 4-bit is broken on {ctx.label()}: {'; '.join(problems)}",
                      _fix(ctx, data), evidence, **info, id=ID)
    default = data.get("default_blocksize_on_cdna")
    if isinstance(default, dict):
        evidence.append("the default blocksize 64 on this CDNA GPU: " + _line("nf4", default))
        broken = _problem("nf4", default)
        info["default_blocksize_works"] = broken is None
        if broken:
            return warned(f"bitsandbytes {version} 4-bit works on {ctx.label()} with blocksize "
                          f"{data.get('blocksize')}, but the default 64 (what BitsAndBytesConfig / PEFT use) does not: "
                          f"{broken}", _fix(ctx, data), evidence, **info, id=ID)
    where = f" (blocksize {data.get('blocksize')}, the CDNA rule)" if data.get("cdna") else ""
    return passed(f"bitsandbytes {version}: nf4 and fp4 round trips and matmul_4bit right on {ctx.label()}{where}",
                  evidence, **info, id=ID)


PROBE = Probe(ID, "bitsandbytes 4-bit (QLoRA) quantizes, dequantizes and multiplies right on this GPU", 60, judge,
              run=run, run_cpu=run_cpu, level=2, budget_s=8.0)
