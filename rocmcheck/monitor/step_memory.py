"""Memory per step and the leak detector.

On a GPU the numbers are the caching allocator's own counters (torch.cuda.memory_allocated /
memory_reserved / max_memory_allocated; ROCm builds answer the same calls). The baseline that matters
is `allocated` right after optimizer.step() + zero_grad(): weights, optimizer state and nothing else.
A healthy run reaches it after the first step (AdamW creates its state there) and stays flat; the
staircase of a leak (tensors that keep their graph alive) shows as a baseline that rises
every step.

On CPU torch keeps no allocator statistics. What we chose, and why: the process's resident memory,
sampled at the same point. Counting live tensors through gc would miss exactly the leak that matters: a
kept loss holds its autograd graph, whose saved activations are C++ objects gc never sees. RSS does see
them. glibc keeps the heap pages a step freed for the next step, so after the first steps RSS is one
step's high-water mark and a clean run is flat (the bundled model here: +0.3 MiB over 398 steps, single
samples within 17 MiB of each other), while a kept graph adds its activations every step. It is noisier
than the allocator, so the CPU tolerance is wider. The leak finder (monitor/leak.py) asks for trim=True:
freed pages go back to the OS first (glibc malloc_trim), for tighter numbers, at a cost the smoke-train
does not pay (on the bundled model's CPU step, 57 -> 79 ms: the next step faults the pages in again;
benchmarks/RESULTS.md, section 17).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from dataclasses import dataclass

from rocmcheck.monitor import staircase
from rocmcheck.units import GIB as GiB  # noqa: F401 (re-exported: the train package spells them so)
from rocmcheck.units import MIB as MiB


@dataclass
class MemorySample:
    allocated: int  # bytes in use after the step (GPU: allocator; CPU: RSS, after malloc_trim with trim=True)
    reserved: int  # bytes held (GPU: allocator cache; CPU: RSS before any trim)
    peak: int  # GPU: peak allocated during this step; CPU: process peak RSS so far


class MemorySampler:
    """Reads memory at the post-step point. `kind` names what the numbers mean."""

    def __init__(self, device, trim: bool = False) -> None:
        import torch

        self._torch = torch
        self.device = device
        self.is_gpu = device.type == "cuda"
        self.kind = "gpu-allocator" if self.is_gpu else "cpu-rss"
        self._trim = _malloc_trim() if trim and not self.is_gpu else None

    def start_step(self) -> None:
        if self.is_gpu:
            self._torch.cuda.reset_peak_memory_stats(self.device)

    def sample(self) -> MemorySample:
        if self.is_gpu:
            # One read of the allocator's counters: memory_allocated, memory_reserved and max_memory_allocated
            # each flatten the whole nested dict again (0.66 ms a step for the three on one H200, 3% of the
            # bundled model's step; benchmarks/bench_step_parts.py, RESULTS.md section 18).
            stats = self._torch.cuda.memory_stats_as_nested_dict(self.device)
            allocated, reserved = stats.get("allocated_bytes", {}).get("all", {}), \
                stats.get("reserved_bytes", {}).get("all", {})
            return MemorySample(allocated.get("current", 0), reserved.get("current", 0), allocated.get("peak", 0))
        before = _rss_bytes()
        if self._trim is None:
            return MemorySample(before, before, peak_rss_bytes())
        self._trim(0)
        return MemorySample(_rss_bytes(), before, peak_rss_bytes())

    def tolerance_bytes(self, baseline: int) -> float:
        """How much the post-step baseline may grow over a run before it counts as a leak: the allocator's or
        resident memory's tolerance in the one leak rule (monitor/staircase.py, TOLERANCES, with the
        measurements behind them)."""
        return staircase.tolerance(self.kind, baseline)


def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc.malloc_trim if libc is not None and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@dataclass
class LeakDecision:
    leaking: bool
    growth_bytes: float  # floor of the last third minus floor of the first third (after warmup)
    per_step_bytes: float  # the floor's slope per step (Theil-Sen)
    rising_fraction: float  # share of steps whose baseline rose
    tolerance_bytes: float
    steps_judged: int
    reason: str
    judged: bool = True  # enough steps after warmup for the rule (staircase.MIN_POINTS)


def detect_leak(baselines: list[int | float], tolerance_bytes: float, warmup: int = 2) -> LeakDecision:
    """Decide whether post-step baselines climb over the run (the staircase) beyond `tolerance_bytes`: the one
    leak rule (monitor/staircase.py), also behind `monitor.memory_curve`, over one point per step.

    The first `warmup` steps are left out: the optimizer allocates its state at step 1 and allocators
    grow their caches once. A one-off step up (a lazily created workspace, the profiler) that then stays flat is
    not a leak."""
    values = [float(v) for v in baselines[warmup:]]
    n = len(values)
    rule = staircase.judge_staircase(range(n), values, tolerance_bytes)
    if not rule.judged:
        return LeakDecision(False, 0.0, 0.0, 0.0, tolerance_bytes, n,
                            f"too few steps to judge ({n} after warmup; need {staircase.MIN_POINTS})", judged=False)
    reason = (f"baseline rose {rule.growth_bytes / MiB:.1f} MiB over {n} steps ({rule.slope / MiB:.2f} MiB/step, "
              f"{rule.rising_fraction:.0%} of steps rising{'; a one-off step, then flat' if rule.one_step else ''}); "
              f"tolerance {tolerance_bytes / MiB:.1f} MiB")
    return LeakDecision(rule.rising, rule.growth_bytes, rule.slope, rule.rising_fraction, tolerance_bytes, n, reason)
