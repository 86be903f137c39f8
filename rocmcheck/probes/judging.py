"""What the judges of several probes share: reading a number from the child's JSON, the numerics verdict and the
rate verdict. Pure functions, no torch, so every threshold is tested on plain numbers. Each probe's own
thresholds live with its judge (rocmcheck/probes/catalog/<name>.py); their sources are in docs/probes.md."""

from __future__ import annotations

import math
from typing import Any

from rocmcheck.fixes import Fix, shell
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.hints import torch_wheel_fix
from rocmcheck.probes.spec import ID_PREFIX
from rocmcheck.result import CheckResult, failed, passed, warned


def number(value: Any) -> float | None:
    """A finite float, or None for missing / NaN / inf (NaN must never pass)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def fmt_err(value: Any) -> str:
    v = number(value)
    return "NaN/inf" if v is None else f"{v:.1e}"


def wheel_fix(ctx: DeviceContext) -> Fix:
    """A torch build with kernels for this GPU (the ROCm series the host facts name)."""
    return torch_wheel_fix(ctx.vendor, ctx.arch, ctx.rocm_version)


def judge_numerics(pid: str, what: str, rel_err: Any, limit: float, ctx: DeviceContext,
                   nonfinite: int = 0, evidence: list[str] | None = None, **data: Any) -> CheckResult:
    """NaN never passes: the output was poisoned with NaN before the run, so an unwritten element shows too."""
    err = number(rel_err)
    evidence = list(evidence or [])
    if err is None or nonfinite:
        return failed(f"{what} produced NaN/inf on {ctx.label()} ({nonfinite} non-finite or unwritten elements)",
                      shell("rocmcheck probe {name}",
                            "if it repeats, test the GPU with the vendor diagnostics (rvs / dcgmi diag)",
                            name=pid.removeprefix(ID_PREFIX)),
                      evidence, rel_err=None, nonfinite=nonfinite, limit=limit, **data, id=pid)
    if err > limit:
        return failed(f"{what} is wrong on {ctx.label()}: relative error {err:.1e} > {limit:.0e}",
                      wheel_fix(ctx), evidence, rel_err=err, limit=limit, **data, id=pid)
    return passed(f"{what} is right on {ctx.label()}: relative error {err:.1e} (limit {limit:.0e})",
                  evidence, rel_err=err, limit=limit, **data, id=pid)


def rate_verdict(pid: str, what: str, measured: float, unit: str, expected: float, expected_text: str,
                 pass_at: float, fail_below: float, fix: Fix, ctx: DeviceContext, **data: Any) -> CheckResult:
    """pass at >= pass_at x expected, fail below fail_below x expected, warn between."""
    ratio = measured / expected
    text = f"{what} {measured:,.1f} {unit} on {ctx.label()} = {ratio:.0%} of {expected_text}"
    data.update(measured=measured, expected=expected, ratio=round(ratio, 4))
    if ratio >= pass_at:
        return passed(text, **data, id=pid)
    if ratio >= fail_below:
        return warned(text + f" (expected >= {pass_at:.0%})", fix, **data, id=pid)
    return failed(text + f": far below what it should reach (< {fail_below:.0%})", fix, **data, id=pid)


# A GPU slower than it should be (GEMM rate, device copy): on ROCm the BLAS switches the AMD MI300X tuning guide
# names, then clocks, power and other jobs; on NVIDIA the throttle reasons.
_SLOW_AMD = shell("export TORCH_BLAS_PREFER_HIPBLASLT=1 PYTORCH_TUNABLEOP_ENABLED=1",
                  "then rerun; also check amd-smi metric --power --clock for a power cap or low clocks "
                  "and amd-smi process for other jobs")
_SLOW_NVIDIA = shell("nvidia-smi -q -d PERFORMANCE,CLOCK",
                     "look for throttle reasons or a power cap; "
                     "nvidia-smi --query-compute-apps=pid,used_memory --format=csv lists other jobs on the GPU")


def slow_gpu_fix(ctx: DeviceContext) -> Fix:
    return _SLOW_AMD if ctx.vendor == "amd" else _SLOW_NVIDIA
