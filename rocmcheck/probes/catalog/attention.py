"""probe.attention: which SDPA backend really runs for a bf16 causal LLaMA shape, and is it right and fast."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import shell, with_why
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import fmt_err, number, wheel_fix
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.attention"
# Attention adds a softmax in low precision: flash kernels vs an fp32 reference sit near 3e-3; allow 2e-2.
ATTENTION_MAX_REL_ERR = 2e-2
# A fused attention backend that is not clearly faster than the math path is not really running.
ATTENTION_MIN_SPEEDUP = 1.2
AOTRITON_SWITCH = "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"

_AOTRITON_FIX = shell("export TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1", "AOTriton treats this GPU as experimental")
_TIMINGS_FIX = shell("rocmcheck probe attention --json",
                     "compare the per-backend timings; a fused kernel should be several times faster")


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention import sdpa

    return sdpa(device)


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention import sdpa

    return sdpa(device, (1, 4, 128, 64), iters=2)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    backends: dict[str, dict[str, Any]] = data["backends"]
    default = data["default_backend"]
    b, h, s, d = data["shape"]
    shape = f"bf16 causal attention {b}x{h}x{s}x{d}"
    evidence = []
    for name, info in backends.items():
        if info.get("usable"):
            evidence.append(f"{name}: runs, {info.get('ms', 0):.3f} ms, rel err {fmt_err(info.get('rel_err'))}")
        else:
            evidence.append(f"{name}: not usable: {info.get('why_not') or 'no reason given'}")
    evidence += [f"torch warning: {w}" for w in data.get("warnings", [])[:5]]
    fused = [n for n, i in backends.items() if n != "MATH" and i.get("usable")]
    info = dict(default_backend=default, usable=fused, shape=[b, h, s, d], default_ms=data.get("default_ms"),
                math_ms=data.get("math_ms"))
    if default == "MATH" or not fused:
        reason_text = " ".join(data.get("warnings", [])) + " " + " ".join(
            str(i.get("why_not") or "") for i in backends.values())
        if ctx.vendor == "amd" and "experimental" in reason_text.lower() and not ctx.env.get(AOTRITON_SWITCH):
            fix = _AOTRITON_FIX
            why = f"AOTriton's flash/efficient kernels are experimental on {ctx.arch} and {AOTRITON_SWITCH} is unset"
        else:
            fix = with_why(wheel_fix(ctx), "a build with flash/memory-efficient attention for this GPU")
            why = "no fused backend (flash / memory-efficient / cuDNN) runs here"
        return failed(f"SDPA silently falls back to the slow math path for {shape} on {ctx.label()}: {why}",
                      fix, evidence, **info, id=ID)
    err = number(data.get("default_rel_err"))
    if err is None or err > ATTENTION_MAX_REL_ERR:
        return failed(f"SDPA backend {default} gives wrong results for {shape}: relative error {fmt_err(err)} vs "
                      "the math path", wheel_fix(ctx), evidence, rel_err=err, **info, id=ID)
    speedup = None
    if number(data.get("default_ms")) and number(data.get("math_ms")):
        speedup = data["math_ms"] / data["default_ms"]
    info.update(rel_err=err, speedup_vs_math=speedup)
    if speedup is not None and speedup < ATTENTION_MIN_SPEEDUP:
        return warned(f"SDPA picks {default} for {shape} but it is only {speedup:.1f}x faster than math",
                      _TIMINGS_FIX, evidence, **info, id=ID)
    faster = f", {speedup:.1f}x faster than math" if speedup else ""
    return passed(f"SDPA runs {default} for {shape}{faster}, relative error {err:.1e}", evidence, **info, id=ID)


PROBE = Probe(ID, "torch's fused attention (SDPA) runs for a bf16 causal LLaMA shape and is right", 30, judge,
              run=run, run_cpu=run_cpu)
