"""Sustained bf16 GEMM at full load (probe.stress_gemm's runner). Imports torch: runs inside the probe child;
rocmcheck/probes/catalog/stress_gemm.py judges what it returns.

The same product (the size of probe.gemm_tflops) runs back to back for the whole duration, cut into intervals.
Every product is compared bitwise with the first one after warm-up (same inputs, same kernel: a GPU that
computes differently from one run to the next is failing), on the device and without a sync: one comparison
kernel per product, which the interval's rate includes (benchmarks/bench_level3.py prints the bare product's
rate beside it). After each interval: its TFLOP/s (device events), how many products and elements differed, and
one telemetry sample (clocks, power, temperature, slowdown reasons) when a binding is open."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from rocmcheck.probes.measure import synchronize
from rocmcheck.probes.telemetry import Telemetry

STRESS_SIZE = 8192  # probe.gemm_tflops's product: the bare rate beside the sustained one
# Intervals: about this many over the run, each at least MIN and at most MAX seconds (a minute of stress gives
# 60 one-second points; ten minutes 60 ten-second points).
TARGET_INTERVALS = 60
MIN_INTERVAL_S, MAX_INTERVAL_S = 1.0, 30.0
WARMUP_S = 1.0  # clocks ramp up and the BLAS picks its kernel before the first interval

Matmul = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any]


def _matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    torch.matmul(a, b, out=out)


def interval_for(duration_s: float) -> float:
    return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, duration_s / TARGET_INTERVALS))


def _timed_batch(fn: Callable[[], Any], k: int, device: torch.device) -> float:
    """Seconds for k calls, on the device's clock on a GPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return time.perf_counter() - t0


def _calibrate(step: Callable[[], Any], device: torch.device, interval: float) -> int:
    """Products per interval: a batch doubled until it takes a quarter of the interval, then scaled up."""
    k = 1
    while True:
        seconds = _timed_batch(step, k, device)
        if seconds >= interval / 4 or k >= 1 << 20:
            return max(1, round(k * interval / max(seconds, 1e-9)))
        k *= 2


def sustained_gemm(device: torch.device, duration_s: float, size: int = STRESS_SIZE,
                   telemetry: Telemetry | None = None, matmul: Matmul = _matmul,
                   note: Callable[[str], None] = lambda text: None, warmup_s: float = WARMUP_S,
                   interval_s: float | None = None, min_intervals: int = 1) -> dict[str, Any]:
    """Run the product for duration_s (after warmup_s), and on for at least min_intervals intervals, and return
    every interval's figures. The batch per interval is calibrated once: on a machine that slows down after the
    calibration, fewer intervals fit in duration_s, and min_intervals keeps enough of them to judge."""
    gen = torch.Generator(device=device).manual_seed(20261130)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=gen)
    c = torch.empty(size, size, device=device, dtype=torch.bfloat16)
    flops = 2.0 * size ** 3

    def step() -> None:
        matmul(a, b, c)

    start = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - start < warmup_s:
        step()
        n += 1
        if n % 8 == 0:
            synchronize(device)
    synchronize(device)
    interval = interval_s if interval_s is not None else interval_for(duration_s)
    k = _calibrate(step, device, interval)
    step()
    synchronize(device)
    ref = c.clone().view(torch.int16)
    bits = c.view(torch.int16)
    bad_elements = torch.zeros((), dtype=torch.int64, device=device)
    bad_products = torch.zeros((), dtype=torch.int64, device=device)

    def checked() -> None:
        step()
        differing = (bits != ref).sum()
        bad_elements.add_(differing)
        bad_products.add_(differing > 0)

    intervals: list[dict[str, Any]] = []
    began = time.perf_counter()
    last_note = began
    seen_elements = seen_products = 0
    while len(intervals) < max(1, min_intervals) or time.perf_counter() - began < duration_s:
        seconds = _timed_batch(checked, k, device)
        elements, products = int(bad_elements.item()), int(bad_products.item())
        point: dict[str, Any] = {"t_s": round(time.perf_counter() - began, 3),
                                 "tflops": flops * k / seconds / 1e12 if seconds > 0 else None,
                                 "differ": products - seen_products, "differ_elements": elements - seen_elements}
        seen_elements, seen_products = elements, products
        if telemetry is not None:
            point.update(telemetry.sample())
        intervals.append(point)
        now = time.perf_counter()
        if now - last_note >= max(10.0, duration_s / 10):
            last_note = now
            rate = point["tflops"]
            note(f"{now - began:.0f} s of {duration_s:.0f} s: {rate:,.0f} TFLOP/s" if rate else
                 f"{now - began:.0f} s of {duration_s:.0f} s")
    return {"shape": [size, size, size], "duration_s": duration_s, "ran_s": round(time.perf_counter() - began, 3),
            "interval_s": interval, "gemms_per_interval": k, "checked": "every product, bitwise, against the first",
            "warmup_gemms": n, "intervals": intervals,
            "telemetry": {"source": telemetry.source if telemetry else None,
                          "matched_by": telemetry.matched_by if telemetry else None}}
