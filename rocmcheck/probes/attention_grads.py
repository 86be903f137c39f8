"""SDPA forward AND backward through one backend (flash, memory-efficient, cuDNN, math), bf16 and fp16, causal,
against torch's math path in float64 on the CPU from the same operands: the output and the three input gradients.
Imports torch: runs inside the probe child; probes/numerics_verdicts.py judges the numbers.

A backend that cannot take a case (not built into this torch, not for this GPU, dtype or shape) says so by raising
"No available kernel" (CUDA/ROCm builds) or "No viable backend" (the CPU); that case is recorded as not usable
with torch's reasons. Anything else raised, forward or backward, is an error of that backend.

The inputs and their float64 references are made once per shape and dtype and kept for the next backend."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from rocmcheck.probes.measure import (
    error_line,
    finite_or_none,
    nonfinite_count,
    relative_error,
    seeded_normal,
    synchronize,
)
from rocmcheck.probes.spec import ProbeSkip

BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
            "math": "MATH"}
DTYPES = ("bf16", "fp16")
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# (batch, heads, sequence, head_dim): LLaMA's head size 128 at a 2048-token context, and a sequence length no
# tile size divides (the masked tails of the causal kernels).
GPU_SHAPES = {"llama": (1, 8, 2048, 128), "odd": (2, 4, 1001, 128)}
CPU_SHAPES = {"llama": (1, 2, 128, 64), "odd": (1, 2, 67, 64)}
NOT_USABLE = ("no available kernel", "no viable backend")
SEED = 4321

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def causal_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


_INPUTS: dict[tuple[Any, ...], tuple[torch.Tensor, ...]] = {}
_REFERENCES: dict[tuple[Any, ...], dict[str, torch.Tensor]] = {}


def _inputs(shape: tuple[int, int, int, int], seed: int) -> tuple[torch.Tensor, ...]:
    """fp32 q, k, v and the output gradient dO on the CPU."""
    key = (shape, seed)
    if key not in _INPUTS:
        _INPUTS[key] = tuple(seeded_normal(shape, seed + i) for i in range(4))
    return _INPUTS[key]


def _reference(shape: tuple[int, int, int, int], dtype: torch.dtype, seed: int) -> dict[str, torch.Tensor]:
    """The math path in float64 on the CPU, from the operands as rounded to `dtype`."""
    key = (shape, dtype, seed)
    if key not in _REFERENCES:
        q, k, v, d_out = (t.to(dtype).to(torch.float64) for t in _inputs(shape, seed))
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        with sdpa_kernel([SDPBackend.MATH]):
            out = causal_sdpa(q, k, v)
        out.backward(d_out)
        _REFERENCES[key] = {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    return _REFERENCES[key]


def _case(device: torch.device, backend: SDPBackend, dtype: str, shape: tuple[int, int, int, int],
          attend: Attend, seed: int) -> dict[str, Any]:
    tdtype = TORCH_DTYPES[dtype]
    case: dict[str, Any] = {"dtype": dtype, "bhsd": list(shape)}
    ref = _reference(shape, tdtype, seed)
    q, k, v, d_out = (t.to(device=device, dtype=tdtype, copy=True) for t in _inputs(shape, seed))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    try:
        with sdpa_kernel([backend]):
            out = attend(q, k, v)
    except Exception as exc:
        text = error_line(exc)
        if any(marker in text.lower() for marker in NOT_USABLE):
            case.update(usable=False, why_not=text)
        else:
            case["error"] = text
        return case
    try:
        with sdpa_kernel([backend]):
            out.backward(d_out)
        synchronize(device)
    except Exception as exc:
        case["error"] = "backward: " + error_line(exc)
        return case
    got = {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    case["usable"] = True
    for name, tensor in got.items():
        if tensor is None:
            case["error"] = f"backward left no gradient for {name[1]}"
            return case
    case.update({name: finite_or_none(relative_error(got[name].cpu(), ref[name])) for name in got})
    case["nonfinite"] = {name: nonfinite_count(t) for name, t in got.items()}
    return case


def sdpa_backend(device: torch.device, backend: str, shapes: Mapping[str, tuple[int, int, int, int]] = GPU_SHAPES,
                 attend: Attend = causal_sdpa, dtypes: tuple[str, ...] = DTYPES, seed: int = SEED) -> dict[str, Any]:
    """Every dtype x shape through one backend ("flash", "efficient", "cudnn", "math")."""
    member = getattr(SDPBackend, BACKENDS[backend], None)
    if member is None:
        raise ProbeSkip(f"this torch ({torch.__version__}) has no SDPBackend.{BACKENDS[backend]}")
    cases, seen = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for dtype in dtypes:
            for shape in shapes.values():
                cases.append(_case(device, member, dtype, shape, attend, seed))
    for w in caught:
        text = " ".join(str(w.message).split())[:300]
        if text not in seen:
            seen.append(text)
    where = "ROCm" if torch.version.hip else "CUDA" if device.type == "cuda" else "CPU"
    return {"backend": backend, "cases": cases, "warnings": seen[:6], "where": f"torch {torch.__version__}, {where}"}
