"""The batch search: double the micro-batch until a try runs out of memory (or past the budget), then bisect
between the last good and the first bad. Torch-free: the child passes in a function that runs one try.

Prior art: Lightning's Tuner.scale_batch_size (mode "binsearch"). Unlike it, a try that runs but peaks above
the budget counts as bad, so the answer leaves the margin people asked Lightning for (#20447, #21154)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

OUTCOMES = ("ok", "over", "oom", "error")


@dataclass
class Trial:
    micro_batch: int
    outcome: str  # ok: ran within budget; over: ran, peak above budget; oom: out of memory; error: anything else
    peak_allocated: int | None = None  # torch.cuda.max_memory_allocated()
    peak_reserved: int | None = None  # torch.cuda.max_memory_reserved()
    device_peak: int | None = None  # reserved peak + memory outside PyTorch's allocator: what the budget is for
    seconds: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trial":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass
class SearchOutcome:
    best: int  # the largest micro-batch that ran within budget; 0 if none
    trials: list[Trial]
    stop: str  # why the search ended


def search_max_batch(try_batch: Callable[[int], Trial], start: int = 1, max_micro_batch: int = 1024,
                     max_trials: int = 25, on_trial: Callable[[Trial], None] | None = None) -> SearchOutcome:
    trials: list[Trial] = []
    good, bad = 0, None  # largest good, smallest bad

    def run(b: int) -> Trial:
        t = try_batch(b)
        trials.append(t)
        if on_trial:
            on_trial(t)
        return t

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
    why = "out of memory" if any(t.outcome == "oom" and t.micro_batch == bad for t in trials) else "over the budget"
    return SearchOutcome(good, trials, f"micro-batch {bad} is {why}")
