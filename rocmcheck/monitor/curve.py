"""The memory curve of a training run, judged: flat, sawtooth back to a baseline, or a staircase that ends in
out-of-memory. Pure functions over (seconds, bytes) readings; no tool, no clock, no GPU.

What the curve looks like, and why these rules. The driver's "memory used" (nvidia-smi, amd-smi, NVML) is what
PyTorch's caching allocator holds, not what tensors use: a healthy run climbs while the model loads and the
optimizer creates its state at step 1, then stays flat (the allocator keeps its cache) or, where the cache is
released between steps, saws up and back down to the same floor every step. A leak (a tensor that keeps its
autograd graph alive, as in the field report: "the curve stepped up and did not come back after the optimizer
step") raises the *floor* every step: a staircase, or a sawtooth whose baseline keeps moving up. So the judge
looks at the lower envelope (the floor) over the run, not at single readings: a noisy reading or one spike
cannot decide. Whether the floor keeps rising is the one leak rule (monitor/staircase.py), the same that judges
smoke-train's post-step baselines (train.memory_leak).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from rocmcheck.fixes import note
from rocmcheck.monitor import staircase
from rocmcheck.monitor.staircase import FLOOR_QUANTILE, MIN_POINTS, quantile
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.units import GIB, MIB, fmt_bytes

# A steady span this long is judged whatever its shape: at the default 1 s interval, half a minute of training after
# the model is loaded; a staircase of one step per second shows 30 steps. (The fewest readings: the leak rule's
# MIN_POINTS, monitor/staircase.py.)
MIN_SPAN_S = 30.0
# A shorter span is judged only for a fast climb: a leak that fills the card in seconds ends the run (or the person
# stops it) before half a minute, and "too short to judge" would then hide the one curve that most needs a
# verdict. The fit needs MIN_POINTS readings over at least this long: five intervals at the default 1 s, long
# enough that one allocation (a step's activations, the optimizer's state) cannot be the whole climb.
FAST_MIN_SPAN_S = 5.0
# ... and the climb must be steep: at its rate the top of the curve meets the card's capacity within this long.
# Once loaded, a fine-tune's floor is flat step after step, so any steady climb is a leak; a slow one in a short
# run may be the tail of loading or a cache growing for one longer batch, while one that would fill the card in
# minutes leaves the run minutes to live. Ten minutes at 80 GiB is 0.13 GiB/s, above the driver's tolerance
# (staircase.TOLERANCES, 512 MiB) over FAST_MIN_SPAN_S, so the two bounds agree on the slowest climb judged.
FAST_ETA_S = 600.0
# ... still climbing at the end: the slope of the last quarter of the span (at least FAST_TAIL_POINTS readings) is
# at least this share of the whole span's. Loading followed by a few flat steps (a short clean run) climbs in
# its first part and is flat at the end: a skip, not a fail.
FAST_TAIL_SHARE = 0.25
FAST_TAIL_POINTS = 3
# ... and the GPU busy while it climbs: where the reader gives utilisation for at least half the span's readings,
# their mean must reach this. Loading (weights copied from disk and host memory, the optimizer's state made)
# runs no kernels for most of its time, so a run that dies while loading climbs with the GPU near 0% busy; a
# training step's kernels keep it busy well above this even on a run that waits for its data. The mean, not the
# median: a reading a few times a step catches the step's kernels in some readings and the wait between steps in
# the others, so a loop busy 40% of its time can read 0% in most of its readings.
FAST_MIN_BUSY_PCT = 10.0
# A step of the staircase, counted where the readings resolve it: a rise of at least this much between two
# readings, with a flat reading (a change under it) before the next rise. The driver's jitter is a few MiB and
# the allocator's segments 2-20 MiB; a kept step of a fine-tune is hundreds of MiB.
STEP_MIN_BYTES = 64 * MIB
# Loading and the first optimizer step (AdamW allocates its state there) are climbs that happen once: a reading
# under this share of the floor the run has *at that moment* is loading. On a flat run that floor is the final
# one; on a leaking run it is the floor line of the leak, followed back to that moment -- measured against the
# final floor, the first minutes of a leak would be called loading.
WARMUP_LEVEL = 0.5
# Readings at the end under this share of the peak are the process freeing its memory as it exits (or after an
# out-of-memory error): teardown, not part of the training curve.
TEARDOWN_LEVEL = 0.5
# A sawtooth: the curve swings at least this far above its floor (p90 - p10) ...
SAWTOOTH_MIN_AMPLITUDE_BYTES = 256 * MIB
SAWTOOTH_MIN_AMPLITUDE_FRACTION = 0.02  # ... or this share of the floor, whichever is larger
# ... and comes back down near the floor (within this share of the swing) at least this many times.
SAWTOOTH_RETURN_BAND = 0.25
SAWTOOTH_MIN_RETURNS = 3
# Peak against capacity. The field report settled at about 95% (micro-batch 12 on a 192 GB MI300X) "with a little
# margin for spikes"; above 97% one longer sequence or a fragmented cache ends the run.
PEAK_TIGHT_FRACTION = 0.97
# Below this the GPU has room for a larger micro-batch (said, not warned).
PEAK_ROOMY_FRACTION = 0.5

SHAPES = ("flat", "sawtooth", "staircase", "too short")


@dataclass
class CurveVerdict:
    shape: str  # one of SHAPES
    samples: int
    judged_samples: int
    span_s: float  # duration of the judged span
    floor_start: float | None = None  # bytes: floor of the first third of the judged span
    floor_end: float | None = None  # bytes: floor of the last third
    growth_bytes: float = 0.0  # floor_end - floor_start
    rise_per_min: float = 0.0  # bytes per minute, Theil-Sen slope of the floor (0 unless staircase)
    amplitude_bytes: float = 0.0  # p90 - p10 of the judged span
    returns: int = 0  # times the curve came back down to its floor
    peak_bytes: int | None = None
    capacity_bytes: int | None = None
    eta_oom_s: float | None = None  # staircase only: seconds until the top of the curve meets capacity
    fast: bool = False  # a staircase judged on a span shorter than MIN_SPAN_S: a fast climb
    steps: int | None = None  # staircase only: the steps of the climb, where the readings resolve each one
    notes: list[str] = field(default_factory=list)
    judged_span: tuple[int, int] = (0, 0)  # [first, last) of the readings with a memory figure that were judged

    @property
    def peak_fraction(self) -> float | None:
        if self.peak_bytes is None or not self.capacity_bytes:
            return None
        return self.peak_bytes / self.capacity_bytes


def _steady_span(times: list[float], used: list[float], tolerance: float) -> tuple[int, int, list[str]]:
    """[start, end) of the readings after loading and before teardown."""
    notes = []
    end = len(used)
    peak = max(used)
    while end > 1 and used[end - 1] < TEARDOWN_LEVEL * peak:
        end -= 1
    if end < len(used):
        notes.append(f"last {len(used) - end} reading(s) left out: memory freed as the process ended")
    tail = used[max(0, end - max(3, end // 4)):end]
    final_floor = quantile(tail, FLOOR_QUANTILE)
    start = next((i for i in range(end) if used[i] >= WARMUP_LEVEL * final_floor), 0)
    rule = staircase.judge_staircase(times[start:end], used[start:end], tolerance)
    if rule.rising:  # the floor was lower earlier: measure each reading against the floor at its own time
        # Before the floor line reaches zero (followed back, a steep climb's line does within seconds) the climb
        # had not begun: memory cannot be below zero, so those readings are the run starting, not its floor.
        start = next((i for i in range(start + 1)
                      if rule.floor_at(times[i]) > 0 and used[i] >= WARMUP_LEVEL * rule.floor_at(times[i])), start)
    if start:
        notes.append(f"first {times[start] - times[0]:.0f} s left out: loading (memory under half the floor the "
                     "run had by then)")
    return start, end, notes


def _eta(used: Sequence[float], slope: float, capacity_bytes: int | None) -> float | None:
    """Seconds until the top of the curve (its last readings) meets capacity at `slope` bytes a second."""
    if not capacity_bytes or slope <= 0:
        return None
    top = max(used[-max(3, len(used) // 10):])
    return max(0.0, (capacity_bytes - top) / slope)


def _fast_climb(t: Sequence[float], u: Sequence[float], rule: staircase.Staircase, capacity_bytes: int | None,
                busy: Sequence[float | None] = ()) -> float | None:
    """A short span that climbs fast: the leak rule says rising, the card fills within FAST_ETA_S at the rate, the
    climb goes on to the end, and the GPU is busy (where told: `busy`, utilisation per reading). The seconds to
    capacity, None when it is not a fast climb (or capacity is unknown: no time to it can be told)."""
    if not rule.rising or rule.slope <= 0:
        return None
    known = [b for b in busy if b is not None]
    if len(known) * 2 >= len(u) and sum(known) / len(known) < FAST_MIN_BUSY_PCT:
        return None
    eta = _eta(u, rule.slope, capacity_bytes)
    if eta is None or eta > FAST_ETA_S:
        return None
    tail = max(FAST_TAIL_POINTS, len(u) // 4)
    if staircase.theil_sen(t[-tail:], u[-tail:]) < FAST_TAIL_SHARE * rule.slope:
        return None
    return eta


def count_steps(used: Sequence[float]) -> int | None:
    """The steps of a climb where the readings resolve them: rises of at least STEP_MIN_BYTES from a flat reading
    (a change under it), each rise between two readings alone. The climb the span starts with (the end of
    loading, the optimizer's state) rises from no flat floor and is no step. None when a step cannot be told
    from the next: two rises in a row (steps faster than the readings) or a fall of that size (a sawtooth)."""
    diffs = [b - a for a, b in zip(used, used[1:])]
    if any(d <= -STEP_MIN_BYTES for d in diffs):
        return None
    rises = [d >= STEP_MIN_BYTES for d in diffs]
    first_flat = next((i for i, r in enumerate(rises) if not r), len(rises))
    rises = rises[first_flat:]
    if any(a and b for a, b in zip(rises, rises[1:])):
        return None
    return sum(rises) or None


def classify_curve(times: Sequence[float], used: Sequence[float | int | None],
                   capacity_bytes: int | None = None, busy: Sequence[float | None] | None = None) -> CurveVerdict:
    """Judge one GPU's memory curve. `times` in seconds (increasing), `used` in bytes (None: no reading), `busy`
    the utilisation in percent per reading where the reader gives it (only a short span's fast climb reads it)."""
    busy = list(busy) if busy is not None else [None] * len(used)
    rows = [(float(t), float(u), b) for t, u, b in zip(times, used, busy) if u is not None]
    if not rows:
        return CurveVerdict("too short", 0, 0, 0.0, capacity_bytes=capacity_bytes, notes=["no memory readings"])
    ts, us, bs = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    verdict = CurveVerdict("too short", len(us), 0, 0.0, peak_bytes=int(max(us)), capacity_bytes=capacity_bytes)
    tolerance = staircase.tolerance("gpu-driver", capacity_bytes)
    start, end, verdict.notes = _steady_span(ts, us, tolerance)
    verdict.judged_span = (start, end)
    t, u = ts[start:end], us[start:end]
    verdict.judged_samples = len(u)
    verdict.span_s = (t[-1] - t[0]) if t else 0.0
    rule = staircase.judge_staircase(t, u, tolerance)
    if len(u) < MIN_POINTS or verdict.span_s < MIN_SPAN_S:
        fast = _fast_climb(t, u, rule, capacity_bytes, bs[start:end]) if verdict.span_s >= FAST_MIN_SPAN_S else None
        if fast is None:
            verdict.notes.append(f"{len(u)} readings over {verdict.span_s:.0f} s after loading; "
                                 f"need {MIN_POINTS} over {MIN_SPAN_S:.0f} s, or a climb that fills the card "
                                 f"within {fmt_duration(FAST_ETA_S)} with the GPU busy")
            return verdict
        verdict.fast = True
    verdict.floor_start, verdict.floor_end, verdict.growth_bytes = rule.floor_start, rule.floor_end, rule.growth_bytes
    p10, p90 = quantile(u, 0.1), quantile(u, 0.9)
    verdict.amplitude_bytes = amplitude = p90 - p10
    floor_band = p10 + SAWTOOTH_RETURN_BAND * amplitude
    top_band = p10 + 0.5 * amplitude
    returns, was_high = 0, False
    for value in u:
        if value > top_band:
            was_high = True
        elif value <= floor_band and was_high:
            returns += 1
            was_high = False
    verdict.returns = returns

    if rule.rising:
        verdict.shape = "staircase"
        verdict.rise_per_min = rule.slope * 60  # bytes per second -> per minute
        verdict.eta_oom_s = _eta(u, rule.slope, capacity_bytes)
        verdict.steps = count_steps(u)
        return verdict
    if rule.one_step:
        verdict.notes.append(f"the floor stepped up once by {rule.growth_bytes / GIB:.2f} GiB, then stayed flat")
    min_amplitude = max(SAWTOOTH_MIN_AMPLITUDE_BYTES, SAWTOOTH_MIN_AMPLITUDE_FRACTION * p10)
    verdict.shape = "sawtooth" if amplitude >= min_amplitude and returns >= SAWTOOTH_MIN_RETURNS else "flat"
    return verdict


# ---- verdicts ------------------------------------------------------------------------------------------------

def fmt_rate(v: CurveVerdict) -> str:
    """+GiB/s for a fast climb (a short run, or one that meets capacity within FAST_ETA_S), +GiB/min otherwise."""
    if v.fast or (v.eta_oom_s is not None and v.eta_oom_s <= FAST_ETA_S):
        return f"+{fmt_bytes(v.rise_per_min / 60, 2)}/s"
    return f"+{fmt_bytes(v.rise_per_min, 1)}/min"


def fmt_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


LEAK_FIX = note(
    "Find the tensor that survives each step: HF Trainer: `from rocmcheck.monitor.leak import LeakWatchCallback; "
    "trainer.add_callback(LeakWatchCallback())`; own loop: `from rocmcheck.monitor.leak import leak_watch` and run "
    "the loop inside `with leak_watch(optimizer):` (docs/monitor.md). The usual cause: keeping `loss` (or the "
    "model's outputs) in a list or dict across steps; keep `loss.item()`, or a copy of what you need "
    "(`.detach().clone()`, `.cpu()`, `.tolist()`): `.detach()` of a slice such as `out.logits[:, -1]` still "
    "holds the whole logits tensor.")

PEAK_FIX = note(
    "Leave headroom: lower the micro-batch (per_device_train_batch_size) or enable gradient checkpointing "
    "(model.gradient_checkpointing_enable()); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "(PYTORCH_HIP_ALLOC_CONF on ROCm) cuts fragmentation of the allocator's cache.")


def describe(gpu: str, v: CurveVerdict) -> str:
    """One evidence line per GPU."""
    cap = f" of {fmt_bytes(v.capacity_bytes, 1)}" if v.capacity_bytes else ""
    line = f"GPU {gpu}: {v.shape}, peak {fmt_bytes(v.peak_bytes, 1)}{cap}"
    if v.shape == "staircase":
        line += f", floor {fmt_bytes(v.floor_start, 1)} -> {fmt_bytes(v.floor_end, 1)}, {fmt_rate(v)}"
        if v.steps:
            line += f" over {v.steps} steps"
        if v.eta_oom_s is not None:
            line += f", out of memory in ~{fmt_duration(v.eta_oom_s)}"
    elif v.shape == "sawtooth":
        line += (f", swings {fmt_bytes(v.amplitude_bytes, 1)} and returns to {fmt_bytes(v.floor_start, 1)} "
                 f"({v.returns}x)")
    elif v.shape == "flat":
        line += f", floor {fmt_bytes(v.floor_start, 1)} -> {fmt_bytes(v.floor_end, 1)}"
    line += f"; {v.judged_samples}/{v.samples} readings over {fmt_duration(v.span_s)}"
    return line + "".join(f"; {n}" for n in v.notes)


def judge_curves(verdicts: dict[str, CurveVerdict]) -> list[CheckResult]:
    """monitor.memory_curve (shape) and monitor.memory_peak (peak vs capacity) over the watched GPUs."""
    if not verdicts:
        reason = "no GPU memory readings (no GPU found, or no tool could read it)"
        return [skipped(reason, id="monitor.memory_curve"), skipped(reason, id="monitor.memory_peak")]
    evidence = [describe(g, v) for g, v in verdicts.items()]
    data = {g: {"shape": v.shape, "rise_per_min_bytes": v.rise_per_min, "rise_per_s_bytes": v.rise_per_min / 60,
                "fast_climb": v.fast, "steps": v.steps, "eta_oom_s": v.eta_oom_s,
                "peak_bytes": v.peak_bytes, "capacity_bytes": v.capacity_bytes, "growth_bytes": v.growth_bytes,
                "judged_samples": v.judged_samples, "span_s": v.span_s} for g, v in verdicts.items()}
    stairs = {g: v for g, v in verdicts.items() if v.shape == "staircase"}
    judged = {g: v for g, v in verdicts.items() if v.shape != "too short"}
    if stairs:
        g, v = max(stairs.items(), key=lambda kv: kv[1].rise_per_min)
        when = f"; out of memory in ~{fmt_duration(v.eta_oom_s)} at this rate" if v.eta_oom_s is not None else ""
        steps = f" over {v.steps} steps" if v.steps else ""
        how = (f"climbs fast in a {fmt_duration(v.span_s)} run" if v.fast else "climbs like a staircase")
        curve = failed(f"memory {how} on GPU {', '.join(stairs)}: {fmt_rate(v)}{steps} (GPU {g}), "
                       f"{fmt_bytes(v.floor_end, 1)} of {fmt_bytes(v.capacity_bytes, 1)}{when}",
                       LEAK_FIX, evidence, id="monitor.memory_curve", gpus=data)
    elif judged:
        shapes = sorted({v.shape for v in judged.values()})
        what = " and ".join(shapes)
        back = " (back to the same floor every cycle)" if "sawtooth" in shapes else ""
        curve = passed(f"memory {what} on {len(judged)} GPU(s){back}: no leak", evidence,
                       id="monitor.memory_curve", gpus=data)
    else:
        curve = skipped("run too short to judge the memory curve after loading", evidence,
                        id="monitor.memory_curve", gpus=data)

    with_cap = {g: v for g, v in verdicts.items() if v.peak_fraction is not None}
    if not with_cap:
        peak = skipped("GPU capacity unknown: peak not compared", evidence, id="monitor.memory_peak")
    else:
        g, v = max(with_cap.items(), key=lambda kv: kv[1].peak_fraction or 0)
        frac = v.peak_fraction or 0.0
        text = f"peak {fmt_bytes(v.peak_bytes, 1)} of {fmt_bytes(v.capacity_bytes, 1)} ({frac:.0%}) on GPU {g}"
        peaks = {k: {"peak_bytes": x.peak_bytes, "capacity_bytes": x.capacity_bytes, "fraction": x.peak_fraction}
                 for k, x in with_cap.items()}
        if frac >= PEAK_TIGHT_FRACTION:
            peak = warned(f"{text}: no margin left for a longer batch", PEAK_FIX, evidence,
                          id="monitor.memory_peak", gpus=peaks)
        elif frac < PEAK_ROOMY_FRACTION:
            peak = passed(f"{text}: room for a larger micro-batch", evidence, id="monitor.memory_peak", gpus=peaks)
        else:
            peak = passed(text, evidence, id="monitor.memory_peak", gpus=peaks)
    return [curve, peak]
