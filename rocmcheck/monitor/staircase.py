"""The one rule that says whether memory keeps rising: the staircase of a leak. Pure; no torch, no clock.

Two verdicts use it, on two kinds of series:
- `train.memory_leak` (smoke-train): the allocator's baseline right after every optimizer step, one point per
  step (monitor/step_memory.py, detect_leak);
- `monitor.memory_curve` (`rocmcheck monitor`): the driver's memory used, one point per reading, after loading and
  before teardown (monitor/curve.py, classify_curve).
Both hand over (x, bytes) points and the tolerance of what they measure (TOLERANCES); the rule is the same, so
the two verdicts cannot disagree on one curve.

The rule. The points are cut in thirds. Each third's floor is its FLOOR_QUANTILE: a leak raises the floor (what
stays allocated between steps), a spike or one low glitch cannot move it, and it follows the troughs of a
sawtooth. growth = floor(last third) - floor(first third). The memory keeps rising when growth is above the
tolerance and the rise is present in both halves: floor(middle) - floor(first) and floor(last) - floor(middle)
each more than KEEPS_RISING_SHARE of the growth. One step up that then stays flat (a lazily created workspace, a
longer batch that grew the cache) is growth, but not a leak. The rate is a Theil-Sen slope (the median of the
slopes between every pair) over the floors of up to SLOPE_WINDOWS windows, robust to the steps themselves.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from rocmcheck.units import MIB

# Fewer points than this and a third holds a single point: its floor would be one reading.
MIN_POINTS = 6
# The floor of a third (or a window): its 10th percentile.
FLOOR_QUANTILE = 0.1
# Each half of the span must hold at least this share of the whole rise.
KEEPS_RISING_SHARE = 0.25
# Windows for the slope: enough points for a robust median slope, few enough for the pairs to be cheap (276).
SLOPE_WINDOWS = 24

# How much the floor may rise over the judged span before it counts as growth, per what is measured:
# (bytes, fraction of a reference), whichever is larger.
TOLERANCES: dict[str, tuple[int, float]] = {
    # The allocator counts exact tensor bytes and a clean run is flat to the byte after step 1; 4 MiB or 2% of
    # the baseline leaves room for lazily created buffers (cuBLAS workspaces, the profiler).
    "gpu-allocator": (4 * MIB, 0.02),
    # Resident memory moves with heap fragmentation: clean runs of the bundled model wander by < 8 MiB after
    # malloc_trim, and their thirds by < 2 MiB without it (120 and 398 steps; single samples within 17 MiB).
    "cpu-rss": (32 * MIB, 0.05),
    # The driver's "memory used" is what the caching allocator holds: it grows in whole segments (2 MiB small-pool
    # and 20 MiB+ large-pool blocks, rounded up; a new batch shape adds a few), while a leak of the field report's
    # kind adds a step's activations -- hundreds of MiB to GiB on a 7B model -- every step. The fraction is of the
    # GPU's capacity (1.4 GiB on a 141 GiB H200, 1.9 GiB on a 192 GiB MI300X).
    "gpu-driver": (512 * MIB, 0.01),
}


def tolerance(kind: str, reference: float | None) -> float:
    """The growth `kind` (a key of TOLERANCES) may show over a run: reference is the baseline (allocator, RSS) or
    the GPU's capacity (driver), None when not known."""
    floor_bytes, fraction = TOLERANCES[kind]
    return max(float(floor_bytes), fraction * float(reference or 0))


@dataclass
class Staircase:
    points: int
    judged: bool  # enough points (MIN_POINTS) to say anything
    rising: bool  # the verdict: the floor keeps rising past the tolerance
    tolerance_bytes: float
    floor_start: float = 0.0  # floor of the first third
    floor_middle: float = 0.0
    floor_end: float = 0.0  # floor of the last third
    growth_bytes: float = 0.0  # floor_end - floor_start
    slope: float = 0.0  # bytes per unit of x (per step, per second): Theil-Sen over window floors
    intercept: float = 0.0  # the floor line's value at x = 0
    rising_fraction: float = 0.0  # share of consecutive points that rose

    @property
    def one_step(self) -> bool:
        """Growth past the tolerance that did not keep rising: one step up, then flat."""
        return self.judged and not self.rising and self.growth_bytes > self.tolerance_bytes

    def floor_at(self, x: float) -> float:
        """The floor line at x (for rising series: where the floor was at an earlier moment)."""
        return self.intercept + self.slope * x


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs))
              if xs[j] != xs[i]]
    return statistics.median(slopes) if slopes else 0.0


def _floor_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the floor: Theil-Sen over the floors of up to SLOPE_WINDOWS windows."""
    n = len(ys)
    windows = min(SLOPE_WINDOWS, n)
    size = n / windows
    wx, wy = [], []
    for w in range(windows):
        lo, hi = int(w * size), max(int((w + 1) * size), int(w * size) + 1)
        wx.append(statistics.fmean(xs[lo:hi]))
        wy.append(quantile(ys[lo:hi], FLOOR_QUANTILE) if hi - lo > 2 else min(ys[lo:hi]))
    slope = theil_sen(wx, wy)
    return slope, statistics.median(y - slope * x for x, y in zip(wx, wy))


def judge_staircase(xs: Sequence[float], ys: Sequence[float], tolerance_bytes: float) -> Staircase:
    """The rule over points (xs increasing: step numbers or seconds; ys: bytes)."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    n = len(ys)
    out = Staircase(n, n >= MIN_POINTS, False, float(tolerance_bytes))
    if not out.judged:
        return out
    third = n // 3
    out.floor_start = quantile(ys[:third], FLOOR_QUANTILE)
    out.floor_middle = quantile(ys[third:n - third], FLOOR_QUANTILE)
    out.floor_end = quantile(ys[n - third:], FLOOR_QUANTILE)
    out.growth_bytes = growth = out.floor_end - out.floor_start
    out.rising_fraction = sum(b > a for a, b in zip(ys, ys[1:])) / (n - 1)
    halves = min(out.floor_middle - out.floor_start, out.floor_end - out.floor_middle)
    keeps_rising = halves > KEEPS_RISING_SHARE * growth
    out.rising = growth > out.tolerance_bytes and keeps_rising
    out.slope, out.intercept = _floor_line(xs, ys)
    if out.rising and out.slope <= 0:  # the thirds say it rises; a median slope of zero: steps too rare to fit
        span = xs[-1] - xs[0]
        out.slope = growth / span if span > 0 else growth
        out.intercept = out.floor_start - out.slope * xs[0]
    return out
