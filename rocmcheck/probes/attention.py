"""Attention probes: which SDPA backend really runs (and is it right and fast), and flash-attn fwd+bwd.
Imports torch: runs inside the child process; probes/catalog/attention.py and flash_attn.py judge the numbers."""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from rocmcheck.probes.measure import finite_or_none, median_ms, relative_error
from rocmcheck.probes.spec import ProbeSkip

# LLaMA-7B attention: 32 heads of 128, 2048 tokens.
LLAMA_SHAPE = (1, 32, 2048, 128)
BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def _backend_names() -> dict[int, str]:
    return {int(member): name for name, member in SDPBackend.__members__.items()}


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def sdpa(device: torch.device, shape: tuple[int, int, int, int] = LLAMA_SHAPE, iters: int = 10) -> dict[str, Any]:
    """Each backend alone (sdpa_kernel with one backend): does it run, how fast, how right vs an fp32 math
    reference. Then what the dispatcher picks by default (torch._fused_sdp_choice) and its timing."""
    q, k, v = (torch.randn(*shape, device=device, dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel([SDPBackend.MATH]):
        ref = _sdpa(q.float(), k.float(), v.float())
    seen_warnings: list[str] = []
    backends: dict[str, dict[str, Any]] = {}
    for name in BACKENDS:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel([backend]):
                    out = _sdpa(q, k, v)
                    ms = median_ms(lambda: _sdpa(q, k, v), device, iters=iters)
                backends[name] = {"usable": True, "ms": ms, "rel_err": finite_or_none(relative_error(out, ref))}
            except RuntimeError as exc:
                backends[name] = {"usable": False, "why_not": _first_line(exc)}
        for w in caught:
            text = " ".join(str(w.message).split())[:400]
            if text not in seen_warnings:
                seen_warnings.append(text)
    choice = int(torch._fused_sdp_choice(q, k, v, None, 0.0, True))
    default = _backend_names().get(choice, str(choice))
    out = _sdpa(q, k, v)
    default_ms = median_ms(lambda: _sdpa(q, k, v), device, iters=iters)
    return {
        "shape": list(shape),
        "backends": backends,
        "default_backend": default,
        "default_ms": default_ms,
        "math_ms": backends.get("MATH", {}).get("ms"),
        "default_rel_err": finite_or_none(relative_error(out, ref)),
        "warnings": seen_warnings,
        "aotriton_experimental_env": os.environ.get("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"),
    }


def flash_attn_backend() -> tuple[str, str]:
    """(backend, evidence). On ROCm flash-attn runs CK (flash_attn_2_cuda) or Triton kernels (aiter);
    FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE selects Triton, and a missing CK extension falls back to it."""
    if not torch.version.hip:
        return "cuda", "CUDA build of torch"
    env = os.environ.get("FLASH_ATTENTION_TRITON_AMD_ENABLE", "")
    try:
        importlib.import_module("flash_attn_2_cuda")
        ck = "flash_attn_2_cuda imports"
    except Exception as exc:  # ImportError or an undefined symbol from a mismatched build
        ck = f"flash_attn_2_cuda does not import ({_first_line(exc)})"
    interface = importlib.import_module("flash_attn.flash_attn_interface")
    gpu_mod = getattr(interface, "flash_attn_gpu", None)
    where = str(getattr(gpu_mod, "__file__", None) or getattr(gpu_mod, "__name__", "") or "")
    backend = "triton" if "triton" in where.lower() else "ck"
    return backend, f"FLASH_ATTENTION_TRITON_AMD_ENABLE={env or '(unset)'}; {ck}; kernels from {where or 'unknown'}"


def flash_attn(device: torch.device, shape: tuple[int, int, int, int] = (1, 1024, 16, 128)) -> dict[str, Any]:
    """flash_attn_func forward and backward vs an fp32 SDPA math reference (flash-attn layout: b, s, h, d)."""
    if importlib.util.find_spec("flash_attn") is None:
        raise ProbeSkip("flash-attn is not installed (optional; SDPA is probed by probe.attention)")
    if device.type != "cuda":
        raise ProbeSkip("flash-attn needs a GPU")
    import flash_attn as fa
    from flash_attn import flash_attn_func

    backend, evidence = flash_attn_backend()
    q, k, v = (torch.randn(*shape, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(*shape, device=device, dtype=torch.bfloat16)
    out = flash_attn_func(q, k, v, causal=True)
    out.backward(grad_out)
    # Reference in fp32 through the math path, in SDPA's (b, h, s, d) layout.
    qf, kf, vf = (t.detach().float().transpose(1, 2).requires_grad_() for t in (q, k, v))
    with sdpa_kernel([SDPBackend.MATH]):
        ref = _sdpa(qf, kf, vf)
    ref.backward(grad_out.float().transpose(1, 2))
    t = lambda x: x.transpose(1, 2)  # noqa: E731 - back to flash-attn's layout
    return {
        "version": getattr(fa, "__version__", "?"),
        "backend": backend,
        "backend_evidence": evidence,
        "shape": list(shape),
        "out_rel_err": finite_or_none(relative_error(out, t(ref))),
        "dq_rel_err": finite_or_none(relative_error(q.grad, t(qf.grad))),
        "dk_rel_err": finite_or_none(relative_error(k.grad, t(kf.grad))),
        "dv_rel_err": finite_or_none(relative_error(v.grad, t(vf.grad))),
    }
