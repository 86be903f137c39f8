"""The fp8 GEMM as an fp8 fine-tune runs it (torch._scaled_mm, per-tensor scales, bf16 output), in the arch's fp8
formats (rocmcheck/probes/fp8_formats.py): its numbers against float64 and its rate against bf16 on the same GPU.
Imports torch: runs inside the probe child; rocmcheck/probes/catalog/fp8_gemm.py judges what it returns.

Each operand is scaled as fp8 recipes do (per-tensor, amax to the format's largest value), cast to fp8 on the
device, and multiplied with its scale handed to _scaled_mm (torch's convention: the scales multiply the fp8 values
back). Two references, both in float64: the product of the fp8 values times their scales, dequantized on the CPU
(the kernel's own error), and the product of the operands before the cast (the cast's error on top)."""

from __future__ import annotations

from typing import Any

import torch

from rocmcheck.probes.fp8_formats import Fp8Formats, fp8_formats, no_fp8_reason
from rocmcheck.probes.measure import (
    error_line,
    finite_or_none,
    median_ms,
    nonfinite_count,
    relative_error,
    seeded_normal,
    synchronize,
)
from rocmcheck.probes.spec import ProbeSkip

# (m, n, k): K long enough that the accumulation matters, every dimension a multiple of 16 (cuBLASLt's fp8 rule).
GPU_SHAPE = (2048, 2048, 4096)
RATE_SIZE = 8192  # the square shape probe.gemm_tflops times in bf16
CPU_SHAPE = (64, 48, 256)
CPU_RATE_SIZE = 256
SEED = 8
# name -> (the A operand's format, the B operand's, use_fast_accum): a linear layer's forward (activations x
# weights, in e4m3; with and without cuBLASLt's fast accumulation, which fp8 recipes use for the forward) and its
# backward (the gradient in e5m2 x the weights in e4m3).
CASES = {"forward": ("e4m3", "e4m3", False), "forward_fast_accum": ("e4m3", "e4m3", True),
         "backward": ("e5m2", "e4m3", False)}


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _quantize(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor scaling: x / scale cast to fp8, scale = amax(x) / the format's largest value (a float32 scalar on
    x's device, as _scaled_mm wants it)."""
    scale = (x.abs().amax().float() / torch.finfo(dtype).max).clamp(min=1e-12)
    return (x / scale).to(dtype), scale


def _dequantized(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp8 values times their scale in float64, converted on the CPU (the reference's own conversion)."""
    return q.cpu().to(torch.float64) * scale.cpu().to(torch.float64)


def _case(device: torch.device, formats: Fp8Formats, a_fmt: str, b_fmt: str, fast: bool,
          shape: tuple[int, int, int], seed: int) -> dict[str, Any]:
    m, n, k = shape
    a_name, b_name = getattr(formats, a_fmt), getattr(formats, b_fmt)
    out: dict[str, Any] = {"a": a_name, "b": b_name, "fast_accum": fast}
    a32, w32 = seeded_normal((m, k), seed), seeded_normal((n, k), seed + 1)  # w: (n, k), a linear layer's weight
    try:
        a_q, a_scale = _quantize(a32.to(device), _dtype(a_name))
        w_q, w_scale = _quantize(w32.to(device), _dtype(b_name))
        # A row-major, B = W.T column-major: the layout _scaled_mm requires (and a linear layer's x @ W.T).
        result = torch._scaled_mm(a_q, w_q.t(), scale_a=a_scale, scale_b=w_scale, out_dtype=torch.bfloat16,
                                  use_fast_accum=fast)
        synchronize(device)
        product = (_dequantized(a_q, a_scale).to(device) @ _dequantized(w_q, w_scale).to(device).t())
        original = a32.to(torch.float64).to(device) @ w32.to(torch.float64).to(device).t()
        out.update(rel_err=finite_or_none(relative_error(result, product)),
                   quantized_rel_err=finite_or_none(relative_error(result, original)),
                   nonfinite=nonfinite_count(result), out_dtype=str(result.dtype).removeprefix("torch."))
    except Exception as exc:  # a format this build refuses, a missing hipBLASLt/cuBLASLt kernel
        out["error"] = error_line(exc)
    return out


def _rate(device: torch.device, formats: Fp8Formats, size: int, iters: int, warmup_s: float) -> dict[str, Any]:
    """fp8 (e4m3 x e4m3, fast accumulation: the forward's fastest form) and bf16 size^3 products on the same random
    operands, timed alike (device events, median), so their ratio compares the two paths on this GPU now."""
    a32, w32 = seeded_normal((size, size), SEED + 2), seeded_normal((size, size), SEED + 3)
    a16, w16 = a32.to(device, torch.bfloat16), w32.to(device, torch.bfloat16)
    del a32, w32
    out16 = torch.empty(size, size, device=device, dtype=torch.bfloat16)
    bf16_ms = median_ms(lambda: torch.matmul(a16, w16.t(), out=out16), device, iters=iters, warmup_s=warmup_s,
                        warmup_iters=3)
    a_q, a_scale = _quantize(a16, _dtype(formats.e4m3))
    w_q, w_scale = _quantize(w16, _dtype(formats.e4m3))
    b_q = w_q.t()
    try:
        fp8_ms = median_ms(lambda: torch._scaled_mm(a_q, b_q, scale_a=a_scale, scale_b=w_scale,
                                                    out_dtype=torch.bfloat16, use_fast_accum=True),
                           device, iters=iters, warmup_s=warmup_s, warmup_iters=3)
    except Exception as exc:
        return {"shape": [size] * 3, "bf16_ms": bf16_ms, "error": error_line(exc)}
    flop = 2 * size ** 3
    return {"shape": [size] * 3, "iters": iters, "bf16_ms": bf16_ms, "fp8_ms": fp8_ms,
            "bf16_tflops": flop / (bf16_ms * 1e-3) / 1e12, "fp8_tflops": flop / (fp8_ms * 1e-3) / 1e12}


def fp8_gemm(device: torch.device, arch: str, formats: Fp8Formats | None = None,
             shape: tuple[int, int, int] = GPU_SHAPE, rate_size: int = RATE_SIZE, iters: int = 20,
             warmup_s: float = 0.5) -> dict[str, Any]:
    """Every case in CASES and the rate. formats: the arch's own (fp8_formats) unless given (CPU test mode, where
    torch's CPU kernels take either family). Raises ProbeSkip where the arch or this torch has no fp8 GEMM."""
    if not callable(getattr(torch, "_scaled_mm", None)):
        raise ProbeSkip(f"torch {torch.__version__} has no torch._scaled_mm (fp8 GEMM): torch 2.1 and newer have it")
    formats = formats or fp8_formats(arch)
    if formats is None:
        raise ProbeSkip(no_fp8_reason(arch))
    missing = [n for n in (formats.e4m3, formats.e5m2) if not isinstance(getattr(torch, n, None), torch.dtype)]
    if missing:
        raise ProbeSkip(f"torch {torch.__version__} has no {', '.join(missing)} (the fp8 formats of {arch or 'this'} "
                        "GPU)")
    cases = {name: _case(device, formats, a, b, fast, shape, SEED + 10 * i)
             for i, (name, (a, b, fast)) in enumerate(CASES.items())}
    return {"arch": arch, "family": formats.family, "e4m3": formats.e4m3, "e5m2": formats.e5m2,
            "shape": list(shape), "cases": cases, "rate": _rate(device, formats, rate_size, iters, warmup_s),
            "torch": torch.__version__, "hip": torch.version.hip}
