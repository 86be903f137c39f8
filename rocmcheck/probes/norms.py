"""RMSNorm forward and backward, bf16 and fp32, against float64 on the CPU from the same operands: the output and
the gradients of the input and of the weight. Two forms, each its own probe: torch's fused
torch.nn.functional.rms_norm, and the decomposed form transformers' LlamaRMSNorm computes (written out below, so
the child needs no transformers). Imports torch: runs inside the probe child; probes/numerics_verdicts.py judges.

The weight gradient sums over every token of the batch: a kernel that accumulates it in bf16, or reduces it
wrongly, gives the "abnormally large bf16 RMSNorm weight gradients" seen on ROCm; the probe reports how large.

The inputs and their float64 references are made once per dtype and kept for the other form."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from rocmcheck.probes.measure import (
    error_line,
    finite_or_none,
    nonfinite_count,
    relative_error,
    seeded_normal,
    synchronize,
)
from rocmcheck.probes.spec import ProbeSkip

DTYPES = ("bf16", "fp32")
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
GPU_SHAPE = (8192, 4096)  # (tokens, hidden): 4 sequences of 2048 tokens, LLaMA-7B's hidden size
CPU_SHAPE = (96, 256)
EPS = 1e-6  # LLaMA's rms_norm_eps
SEED = 2468

Norm = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def llama_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm.forward: the statistics in fp32, the normalised input cast back to the input
    dtype before the weight multiplies it."""
    input_dtype = x.dtype
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + eps)
    return weight * hidden.to(input_dtype)


FORMS: dict[str, Norm] = {"torch": torch_rms_norm, "llama": llama_rms_norm}

_INPUTS: dict[tuple[Any, ...], tuple[torch.Tensor, ...]] = {}
_REFERENCES: dict[tuple[Any, ...], dict[str, torch.Tensor]] = {}


def _inputs(shape: tuple[int, int], seed: int) -> tuple[torch.Tensor, ...]:
    """fp32 x (tokens, hidden), a weight near 1 with some spread (a trained norm's is), dy."""
    key = (shape, seed)
    if key not in _INPUTS:
        _INPUTS[key] = (seeded_normal(shape, seed), seeded_normal((shape[1],), seed + 1, scale=0.2, shift=1.0),
                        seeded_normal(shape, seed + 2))
    return _INPUTS[key]


def _reference(shape: tuple[int, int], dtype: torch.dtype, seed: int) -> dict[str, torch.Tensor]:
    key = (shape, dtype, seed)
    if key not in _REFERENCES:
        x, w, dy = (t.to(dtype).to(torch.float64) for t in _inputs(shape, seed))
        x, w = x.requires_grad_(), w.requires_grad_()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
        y.backward(dy)
        _REFERENCES[key] = {"y": y.detach(), "dx": x.grad, "dw": w.grad}
    return _REFERENCES[key]


def _norm_of(t: torch.Tensor) -> float:
    return torch.linalg.vector_norm(t.detach().to(torch.float64)).item()


def rms_norm_probe(device: torch.device, form: str, shape: tuple[int, int] = GPU_SHAPE, norm: Norm | None = None,
                   dtypes: tuple[str, ...] = DTYPES, seed: int = SEED) -> dict[str, Any]:
    """Every dtype through one form ("torch" or "llama"); `norm` replaces the form's function (tests)."""
    fn = norm or FORMS[form]
    if norm is None and form == "torch" and not hasattr(F, "rms_norm"):
        raise ProbeSkip(f"torch {torch.__version__} has no torch.nn.functional.rms_norm (new in torch 2.4)")
    cases = []
    for dtype in dtypes:
        tdtype = TORCH_DTYPES[dtype]
        case: dict[str, Any] = {"dtype": dtype}
        ref = _reference(shape, tdtype, seed)
        x, w, dy = (t.to(device=device, dtype=tdtype, copy=True) for t in _inputs(shape, seed))
        x, w = x.requires_grad_(), w.requires_grad_()
        try:
            y = fn(x, w, EPS)
            y.backward(dy)
            synchronize(device)
        except Exception as exc:
            case["error"] = error_line(exc)
            cases.append(case)
            continue
        got = {"y": y.detach(), "dx": x.grad, "dw": w.grad}
        if any(t is None for t in got.values()):
            case["error"] = "backward left no gradient for " + ", ".join(n for n, t in got.items() if t is None)
            cases.append(case)
            continue
        case.update({name: finite_or_none(relative_error(got[name].cpu(), ref[name])) for name in got})
        case["nonfinite"] = {name: nonfinite_count(t) for name, t in got.items()}
        case["norm_ratio"] = {name: finite_or_none(_norm_of(got[name]) / max(_norm_of(ref[name]), 1e-300))
                              for name in got}
        cases.append(case)
    return {"form": form, "shape": list(shape), "eps": EPS, "cases": cases}
