"""probe.flash_attn: flash-attn's forward and backward against an fp32 SDPA reference, and which backend ran
(on ROCm: CK or Triton). Skips where flash-attn is not installed (it is optional) and in CPU test mode."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import flash_attn_rebuild, shell
from rocmcheck.probes.catalog.attention import ATTENTION_MAX_REL_ERR
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import fmt_err, number
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed

ID = "probe.flash_attn"
# Gradients through attention accumulate more rounding (flash-attn's own tests compare against 2x the error of a
# bf16 PyTorch reference); 5e-2 still catches a wrong kernel, which is off by O(1).
ATTENTION_GRAD_MAX_REL_ERR = 5e-2
ERRORS = ("out_rel_err", "dq_rel_err", "dk_rel_err", "dv_rel_err")
LIMITS = {"out_rel_err": ATTENTION_MAX_REL_ERR}  # the gradients: ATTENTION_GRAD_MAX_REL_ERR


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention import flash_attn

    return flash_attn(device)


def _fix(ctx: DeviceContext):
    if ctx.vendor == "amd":
        return shell("pip uninstall -y flash-attn && FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE pip install "
                     "--no-build-isolation flash-attn",
                     f"flash-attn's Triton backend; or rebuild its CK kernels with GPU_ARCHS={ctx.arch or 'gfx942'}")
    return flash_attn_rebuild([ctx.arch] if ctx.arch else [])


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    errs = {k: data.get(k) for k in ERRORS}
    backend = data.get("backend") or "unknown"
    evidence = [f"{k}: {fmt_err(v)}" for k, v in errs.items()] + [
        f"backend evidence: {data.get('backend_evidence', '')}"]
    info = dict(backend=backend, version=data.get("version"), **{k: number(v) for k, v in errs.items()})
    bad = [k for k, v in errs.items() if number(v) is None or number(v) > LIMITS.get(k, ATTENTION_GRAD_MAX_REL_ERR)]
    if bad:
        return failed(f"flash-attn {data.get('version', '')} ({backend}) gives wrong results: {', '.join(bad)} over "
                      "the limit", _fix(ctx), evidence, **info, id=ID)
    return passed(f"flash-attn {data.get('version', '')} forward+backward matches SDPA on {ctx.label()} "
                  f"(backend: {backend})", evidence, **info, id=ID)


PROBE = Probe(ID, "flash-attn forward and backward run and match the reference", 60, judge, run=run, run_cpu=run)
