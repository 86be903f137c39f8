"""The batch search: double the micro-batch until a try runs out of memory (or past the budget), then bisect
between the last good and the first bad. Torch-free: the child passes in a function that runs one try.

Prior art: Lightning's Tuner.scale_batch_size (mode "binsearch"). Unlike it, a try that runs but peaks above
the budget counts as bad, so the answer leaves the margin people asked Lightning for (#20447, #21154)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rocmcheck.record import Record

OUTCOMES = ("ok", "over", "oom", "error")


@dataclass
class Trial(Record):
    micro_batch: int
    outcome: str  # ok: ran within budget; over: ran, peak above budget; oom: out of memory; error: anything else
    peak_allocated: int | None = None  # torch.cuda.max_memory_allocated()
    peak_reserved: int | None = None  # torch.cuda.max_memory_reserved()
    device_peak: int | None = None  # reserved peak + memory outside PyTorch's allocator: what the budget is for
    seconds: float = 0.0
    error: str | None = None


@dataclass
class SearchOutcome:
    best: int  # the largest micro-batch that ran within budget; 0 if none
    trials: list[Trial]
    stop: str  # why the search ended


def _recording(try_batch: Callable[[int], Trial], trials: list[Trial],
               on_trial: Callable[[Trial], None] | None) -> Callable[[int], Trial]:
    """try_batch that also appends each trial to `trials` and reports it to on_trial."""
    def run(b: int) -> Trial:
        t = try_batch(b)
        trials.append(t)
        if on_trial:
            on_trial(t)
        return t
    return run


def search_max_batch(try_batch: Callable[[int], Trial], start: int = 1, max_micro_batch: int = 1024,
                     max_trials: int = 25, on_trial: Callable[[Trial], None] | None = None) -> SearchOutcome:
    trials: list[Trial] = []
    good, bad = 0, None  # largest good, smallest bad
    run = _recording(try_batch, trials, on_trial)
    b = max(1, min(start, max_micro_batch))
    while bad is None:  # grow
        if len(trials) >= max_trials:
            return SearchOutcome(good, trials, f"stopped after {max_trials} tries")
        t = run(b)
        if t.outcome == "error":
            return SearchOutcome(good, trials, f"micro-batch {b} failed: {t.error}")
        if t.outcome != "ok":
            bad = b
        elif b >= max_micro_batch:
            return SearchOutcome(b, trials, f"reached the cap of {max_micro_batch}")
        else:
            good, b = b, min(2 * b, max_micro_batch)
    while bad - good > 1:  # bisect
        if len(trials) >= max_trials:
            return SearchOutcome(good, trials, f"stopped after {max_trials} tries")
        mid = (good + bad) // 2
        t = run(mid)
        if t.outcome == "error":
            return SearchOutcome(good, trials, f"micro-batch {mid} failed: {t.error}")
        good, bad = (mid, bad) if t.outcome == "ok" else (good, mid)
    return SearchOutcome(good, trials, f"micro-batch {bad} is {_why(trials, bad)}")


def search_from_estimate(try_batch: Callable[[int], Trial], guess: int, predict: Callable[[int], float],
                         budget: float, total: float | None = None, max_micro_batch: int = 1024,
                         max_trials: int = 25, on_trial: Callable[[Trial], None] | None = None) -> SearchOutcome:
    """The largest micro-batch that runs within `budget`, starting from the planner's answer `guess`.

    predict(b) is the planner's device peak for micro-batch b. A try that runs (ok or over) reports its real
    peak, and the search fits memory = a + c*b to what it measured: with one point, the planner's fixed part a
    (model states, what it knows best) and the measured slope; with two or more, the line through the two
    nearest the boundary. Each next try goes where that line crosses the budget (n), or to n+1 once n is known
    to fit, always inside the bracket (largest size that fitted, smallest that did not). An out-of-memory
    reports no peak, only that it passed `total`: it bounds the slope from below (with the planner's fixed part
    while no peak is known). When the fit has called two tries in a row wrong, the next try bisects too (or doubles,
    while nothing has failed yet).

    When the planner is right (guess within one of the answer) this takes 2-3 tries: the guess, then its
    neighbour(s). The answer is the one an exhaustive search (every size from 1 up) gives, for memory that
    grows with the micro-batch."""
    trials: list[Trial] = []
    lo, hi = 0, max_micro_batch + 1  # largest size known to fit, smallest known not to
    points: dict[int, float] = {}  # measured device peaks
    ooms: list[int] = []  # sizes that ran out of memory: their peak passed `total`, by how much is unknown
    total = total if total is not None else budget
    slope0 = max(predict(2) - predict(1), 1e-9)
    fixed0 = predict(1) - slope0

    def fitted_boundary() -> float | None:
        """Where the line through the measured peaks crosses the budget; None before any peak."""
        pts = sorted(points.items())
        if not pts:  # only out-of-memory so far: the planner's fixed part, and a slope that reaches `total`
            return (budget - fixed0) / max(slope0, (total - fixed0) / min(ooms)) if ooms else None
        oks = [p for p in pts if p[1] <= budget]
        overs = [p for p in pts if p[1] > budget]
        if len(pts) == 1:
            b1, p1 = pts[0]
            # near the guess, the planner's slope places the boundary; after an out-of-memory the planner's
            # slope is known to be wrong, and its fixed part with this peak gives a better one
            c = (p1 - fixed0) / b1 if ooms and p1 > fixed0 else slope0
        else:
            pair = [oks[-1], overs[0]] if oks and overs else (oks[-2:] if len(oks) >= 2 else overs[:2])
            (b1, p1), (b2, p2) = pair
            c = (p2 - p1) / (b2 - b1) if p2 > p1 else slope0
        a = p1 - c * b1
        top_b, top_p = pts[-1]  # an out-of-memory above the highest peak: the line passes `total` before it
        above = [b for b in ooms if b > top_b]
        if above and top_p + c * (min(above) - top_b) < total:
            c = (total - top_p) / (min(above) - top_b)
            a = top_p - c * top_b
        return (budget - a) / c

    run = _recording(try_batch, trials, on_trial)
    b = max(1, min(guess, max_micro_batch))
    expect_ok = True  # what the fit said about the size being tried
    misses = 0  # tries in a row whose outcome the fit got wrong
    while hi - lo > 1:
        if len(trials) >= max_trials:
            return SearchOutcome(lo, trials, f"stopped after {max_trials} tries")
        t = run(b)
        if t.outcome == "error":
            return SearchOutcome(lo, trials, f"micro-batch {b} failed: {t.error}")
        if t.device_peak is not None and t.outcome in ("ok", "over"):
            points[b] = float(t.device_peak)
        if t.outcome == "ok":
            lo = b
        else:
            hi = b
            if t.outcome == "oom":
                ooms.append(b)
        misses = misses + 1 if (t.outcome == "ok") != expect_ok else 0
        if hi - lo <= 1:
            break
        fit = fitted_boundary()
        n = int(fit + 1e-6) if fit is not None else None
        if n is None or misses >= 2:  # no peak yet, or the fit is not closing in
            b = 2 * lo if hi > max_micro_batch else (lo + hi) // 2
            expect_ok = True
        elif n > lo:
            b, expect_ok = n, True
        else:
            b, expect_ok = lo + 1, False
        b = max(lo + 1, min(b, hi - 1))
    if lo >= max_micro_batch:
        return SearchOutcome(lo, trials, f"reached the cap of {max_micro_batch}")
    return SearchOutcome(lo, trials, f"micro-batch {hi} is {_why(trials, hi)}")


def _why(trials: list[Trial], b: int) -> str:
    return "out of memory" if any(t.outcome == "oom" and t.micro_batch == b for t in trials) else "over the budget"
