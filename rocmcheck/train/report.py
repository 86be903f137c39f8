"""What a smoke-train run hands back (RunReport), the failed verdict of a run that cannot start (SetupFailed),
and the verdict of an exception that escaped a run (error_result). Plain records: no torch, no environment
changes, so the CLI, the launcher of several ranks and the doctor can build and read reports on a machine
without torch."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from rocmcheck import fixes
from rocmcheck.fixes import Fix
from rocmcheck.result import CheckResult, Status, failed

# The verdicts judged on a finished run; a run that stopped early reports each as "not judged". The bundled
# model is judged on the task; any other model on whether it overfits its one fixed batch.
JUDGED_AFTER_RUN = ("train.loss_decrease", "train.task_accuracy", "train.reload", "train.reference_curve",
                    "train.memory_leak", "train.memory", "train.throughput", "train.kernels")
JUDGED_AFTER_OWN_MODEL_RUN = ("train.learns", "train.reload", "train.memory_leak", "train.memory", "train.throughput",
                              "train.kernels")


@dataclass
class RunReport:
    results: list[CheckResult]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "results": [r.to_dict() for r in self.results], "metrics": self.metrics, "info": self.info}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunReport":
        return cls([CheckResult.from_dict(r) for r in data.get("results", [])], data.get("metrics", []),
                   data.get("info", {}))


class Timings:
    """Seconds spent in each named part of a run (info["timings_s"]): where a smoke-train's time goes. A name
    timed twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 3)


def timings_line(info: dict[str, Any]) -> str | None:
    """"time: 14.2 s: train 6.1 s, data 0.3 s, ..." from a report's info (largest part first, what no part
    covers as "other"); None when the run recorded no timings."""
    parts = info.get("timings_s")
    total = info.get("wall_s") or info.get("total_s")
    if not isinstance(parts, dict) or not parts or not isinstance(total, (int, float)):
        return None
    rest = total - sum(v for v in parts.values() if isinstance(v, (int, float)))
    shown = sorted(((k, v) for k, v in parts.items() if isinstance(v, (int, float))), key=lambda kv: -kv[1])
    if rest >= 0.05:
        shown.append(("other", rest))
    return f"time: {total:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in shown)


def step_text(loss: Any, tokens_per_s: Any) -> str:
    """A training step on the progress display: "loss 2.310  1,234 tok/s" (what is missing or not a number, left
    out). smoke-train and the doctor's train stage show their steps with it."""
    parts = []
    for value, shown in ((loss, "loss {:.3f}"), (tokens_per_s, "{:,.0f} tok/s")):
        try:
            parts.append(shown.format(float(value)))
        except (TypeError, ValueError):
            pass
    return "  ".join(parts)


class SetupFailed(Exception):
    """A run that cannot start for a reason a person can fix: carries the failed verdict."""

    def __init__(self, check_id: str, summary: str, fix: Fix | None, evidence: list[str] | None = None,
                 **data: Any) -> None:
        super().__init__(summary)
        self.result = failed(summary, fix, evidence, id=check_id, **data)

    @classmethod
    def of(cls, result: CheckResult) -> "SetupFailed":
        exc = cls(result.id, result.summary, result.fix)
        exc.result = result
        return exc


def first_line(exc: BaseException, limit: int = 200) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


# An exception that escaped a run. Texts of the GPU runtime are a verdict on the machine (its torch build lacks
# kernels for this GPU, or the GPU faulted); anything else is a bug in rocmcheck, reported with the run's JSON.
GPU_RUNTIME_MARKERS = ("HIP error", "CUDA error", "hipError", "invalid device function", "no kernel image",
                       "code object")
GPU_RUNTIME_FIX = fixes.shell("rocmcheck doctor", "checks that this torch build has kernels for this GPU arch")
TRAIN_BUG_FIX = fixes.shell("rocmcheck smoke-train --json > smoke-train.json",
                            "a rocmcheck bug: please report it with that file (add this run's flags)")


def error_result(exc: BaseException) -> CheckResult:
    """train.run for an exception that escaped the run: a failed verdict for a GPU runtime error, else a crash."""
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    name = type(exc).__name__
    if any(k in text for k in GPU_RUNTIME_MARKERS):
        return failed(f"the GPU runtime failed during training: {text}", GPU_RUNTIME_FIX, [f"{name}: {text}"],
                      id="train.run")
    return CheckResult("train.run", Status.CRASH, f"smoke-train crashed: {name}: {text}", [f"{name}: {text}"],
                       TRAIN_BUG_FIX)
