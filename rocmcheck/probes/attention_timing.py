"""flash-attn against SDPA, forward + backward, causal, bf16, at one attention shape (probe.attention_speed's
runner). Imports torch: runs inside the probe child; rocmcheck/probes/catalog/attention_speed.py judges it.

SDPA runs as transformers' "sdpa" attention does: (batch, heads, seq, head_dim), the key/value heads repeated up
to the query heads when there are fewer (grouped-query attention); once with torch's own choice of backend and
once with each fused backend alone. flash-attn runs flash_attn_func in its own layout (batch, seq, heads,
head_dim), which takes fewer key/value heads as they are. Each timing is the median of several forward+backward
passes after a warm-up (device events)."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from rocmcheck.probes.measure import error_line, median_ms

FUSED_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _fwd_bwd(fn: Callable[..., torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             grad: torch.Tensor) -> Callable[[], Any]:
    def step() -> None:
        out = fn(q, k, v)
        torch.autograd.grad(out, (q, k, v), grad)
    return step


def _sdpa_fn(groups: int) -> Callable[..., torch.Tensor]:
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if groups > 1:  # transformers' repeat_kv
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return attend


def _timed(step: Callable[[], Any], device: torch.device, iters: int) -> dict[str, Any]:
    try:
        return {"ms": median_ms(step, device, iters=iters, warmup_iters=2)}
    except Exception as exc:  # a backend that does not take this shape, or runs out of memory
        return {"ms": None, "error": error_line(exc)}


def _flash_attn_import() -> tuple[Any, dict[str, Any]]:
    if importlib.util.find_spec("flash_attn") is None:
        return None, {"installed": False, "why_not": "flash-attn is not installed"}
    try:
        module = importlib.import_module("flash_attn")
        func = getattr(module, "flash_attn_func")
    except Exception as exc:  # an undefined symbol from a build against another torch
        return None, {"installed": True, "version": _version("flash-attn") or _version("flash_attn"),
                      "why_not": f"flash_attn does not import: {error_line(exc)}"}
    return func, {"installed": True, "version": getattr(module, "__version__", None) or _version("flash-attn")}


def attention_speed(device: torch.device, shape: tuple[int, int, int, int, int], iters: int = 10) -> dict[str, Any]:
    """shape: (batch, heads, kv_heads, seq, head_dim)."""
    b, h, kvh, s, d = shape
    gen = torch.Generator(device=device).manual_seed(7)

    def rand(*dims: int) -> torch.Tensor:
        return torch.randn(*dims, device=device, dtype=torch.bfloat16, generator=gen).requires_grad_()

    q, k, v = rand(b, h, s, d), rand(b, kvh, s, d), rand(b, kvh, s, d)
    grad = torch.randn(b, h, s, d, device=device, dtype=torch.bfloat16, generator=gen)
    attend = _sdpa_fn(h // kvh)
    sdpa: dict[str, dict[str, Any]] = {"default": _timed(_fwd_bwd(attend, q, k, v, grad), device, iters)}
    for name in FUSED_BACKENDS:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue

        def alone(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, backend: Any = backend) -> torch.Tensor:
            with sdpa_kernel([backend]):
                return attend(q, k, v)
        sdpa[name] = _timed(_fwd_bwd(alone, q, k, v, grad), device, iters)
    if device.type != "cuda":  # CPU test mode: the math path is the reference there
        def math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            with sdpa_kernel([SDPBackend.MATH]):
                return attend(q, k, v)
        sdpa["MATH"] = _timed(_fwd_bwd(math, q, k, v, grad), device, iters)
    func, fa = _flash_attn_import()
    if func is not None and device.type == "cuda":
        qf, kf, vf = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
        gf = grad.transpose(1, 2).contiguous()
        fa.update(_timed(_fwd_bwd(lambda q, k, v: func(q, k, v, causal=True), qf, kf, vf, gf), device, iters))
    elif func is not None:
        fa["why_not"] = "flash-attn needs a GPU"
    return {"shape": {"batch": b, "heads": h, "kv_heads": kvh, "seq": s, "head_dim": d}, "sdpa": sdpa,
            "flash_attn": fa, "transformers": _version("transformers"), "llamafactory": _version("llamafactory"),
            "torch": torch.__version__, "iters": iters}
