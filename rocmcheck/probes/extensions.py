"""Probes of compiled extensions: Triton (compile + run a kernel) and DeepSpeed's Adam ops (load or build,
then step like torch AdamW). Imports torch: runs inside the child process."""

from __future__ import annotations

import importlib.util
import os
import time
import traceback
from typing import Any, Callable

import torch

from rocmcheck.probes.attention import _first_line
from rocmcheck.probes.build_log import first_compiler_error
from rocmcheck.probes.measure import finite_or_none, relative_error, synchronize
from rocmcheck.probes.spec import ProbeSkip


def triton_probe(device: torch.device, n: int = 98_309) -> dict[str, Any]:
    if importlib.util.find_spec("triton") is None:
        raise ProbeSkip("triton is not installed (torch.compile and flash-attn's Triton backend need it)")
    if device.type != "cuda":
        raise ProbeSkip("Triton kernels need a GPU")
    import triton

    from rocmcheck.probes.triton_kernel import scaled_add

    x = torch.randn(n, device=device)
    y = torch.randn(n, device=device)
    t0 = time.perf_counter()
    out = scaled_add(x, y, 1.5)
    synchronize(device)
    compile_s = time.perf_counter() - t0
    return {"version": triton.__version__, "n": n, "compile_s": compile_s,
            "rel_err": finite_or_none(relative_error(out, x * 1.5 + y))}


def adamw_step_error(make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer], device: torch.device,
                     n: int = 10_007, steps: int = 3, lr: float = 1e-3, weight_decay: float = 0.01) -> float:
    """Relative error of the parameter change after `steps` steps of an optimizer vs torch.optim.AdamW with
    the same hyper-parameters. The change, not the parameters: a wrong update hides in p + tiny delta.
    Several steps with fresh gradients: after one step Adam's update is ~lr*sign(g) whatever the betas."""
    p0 = torch.randn(n, device=device)
    grads = [torch.randn(n, device=device) for _ in range(steps)]

    def run(factory) -> torch.Tensor:
        p = torch.nn.Parameter(p0.clone())
        opt = factory([p])
        for g in grads:
            p.grad = g.clone()
            opt.step()
        return p.detach() - p0

    reference = run(lambda ps: torch.optim.AdamW(ps, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay))
    return relative_error(run(make_optimizer), reference)


def _jit_cached(name: str) -> bool:
    try:
        from torch.utils.cpp_extension import _get_build_directory

        return os.path.exists(os.path.join(_get_build_directory(name, verbose=False), f"{name}.so"))
    except Exception:
        return False


def _op_report(builder, installed_ops: dict[str, Any], allow_build: bool,
               make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
               device: torch.device) -> dict[str, Any]:
    name = builder.name
    report: dict[str, Any] = {"installed": bool(installed_ops.get(name)), "jit_cached": _jit_cached(name)}
    if not builder.is_compatible(False):
        log = builder.error_log
        text = " ".join(log or []) if isinstance(log, list) else str(log or "")
        report.update(state="incompatible", error_line=text[:300] or None)
        return report
    if not (report["installed"] or report["jit_cached"] or allow_build):
        report["state"] = "not_built"
        return report
    t0 = time.perf_counter()
    try:
        builder.load(verbose=False)  # verbose=False: the ninja log ends up in the exception text
    except Exception as exc:
        text = f"{exc}\n{traceback.format_exc()}"
        report.update(state="build_failed", error_line=first_compiler_error(text) or _first_line(exc))
        return report
    report["load_s"] = time.perf_counter() - t0
    try:
        report["rel_err"] = finite_or_none(adamw_step_error(make_optimizer, device))
        report["state"] = "ok"
    except Exception as exc:
        report.update(state="error", error_line=_first_line(exc))
    return report


def deepspeed_ops(device: torch.device, allow_build: bool = False) -> dict[str, Any]:
    """FusedAdam (GPU) and DeepSpeedCPUAdam: prebuilt or JIT-cached ones are loaded; a JIT build runs only
    when allow_build (it takes minutes, too long for doctor's GPU stage)."""
    if importlib.util.find_spec("deepspeed") is None:
        raise ProbeSkip("deepspeed is not installed (optional; needed for ZeRO / CPU offload)")
    import deepspeed
    from deepspeed.git_version_info import installed_ops
    from deepspeed.ops.op_builder import CPUAdamBuilder, FusedAdamBuilder

    ops: dict[str, Any] = {}
    if device.type == "cuda":
        from deepspeed.ops.adam import FusedAdam

        ops["fused_adam"] = _op_report(FusedAdamBuilder(), installed_ops, allow_build,
                                       lambda ps: FusedAdam(ps, lr=1e-3, weight_decay=0.01, adam_w_mode=True), device)
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    ops["cpu_adam"] = _op_report(CPUAdamBuilder(), installed_ops, allow_build,
                                 lambda ps: DeepSpeedCPUAdam(ps, lr=1e-3, weight_decay=0.01, adamw_mode=True),
                                 torch.device("cpu"))
    return {"version": deepspeed.__version__, "ops": ops}
