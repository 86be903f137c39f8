"""Numerics and timing helpers for the probes. Imports torch: used only inside the child process (and tests)."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import torch


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN when out has any NaN/inf (so NaN can never pass)."""
    out64, ref64 = out.detach().to(torch.float64), ref.detach().to(torch.float64)
    if not bool(torch.isfinite(out64).all()):
        return math.nan
    denom = torch.linalg.vector_norm(ref64).item()
    return torch.linalg.vector_norm(out64 - ref64).item() / (denom if denom > 0 else 1.0)


def nonfinite_count(t: torch.Tensor) -> int:
    return int((~torch.isfinite(t)).sum().item())


def finite_or_none(x: float | None) -> float | None:
    """JSON has no NaN: report a non-finite number as null."""
    return x if x is not None and math.isfinite(x) else None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(fn: Callable[[], Any], device: torch.device, min_seconds: float = 0.0, min_iters: int = 2) -> None:
    """Run fn until both limits are met: first-call costs (handles, kernel selection) and GPU clock ramp-up
    stay out of the timed runs."""
    start, n = time.perf_counter(), 0
    while n < min_iters or time.perf_counter() - start < min_seconds:
        fn()
        n += 1
        if n % 4 == 0 or n >= min_iters:
            synchronize(device)
    synchronize(device)


def time_ms(fn: Callable[[], Any], device: torch.device, iters: int = 10) -> list[float]:
    """Per-call times in ms: device events on a GPU (device work is asynchronous), wall clock on the CPU."""
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for s, e in zip(starts, ends):
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize(device)
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def median_ms(fn: Callable[[], Any], device: torch.device, iters: int = 10, warmup_s: float = 0.0,
              warmup_iters: int = 2) -> float:
    warm_up(fn, device, warmup_s, warmup_iters)
    return statistics.median(time_ms(fn, device, iters))


def seeded_normal(shape: tuple[int, ...], seed: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    """N(shift, scale^2) fp32 values on the CPU from their own generator: the same numbers in every run and every
    probe (the numerics probes share one operand set and its float64 reference between paths)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * scale + shift


def error_line(exc: BaseException) -> str:
    """An exception as one short line: "RuntimeError: CUDA error: HIPBLAS_STATUS_NOT_SUPPORTED ..."."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"
