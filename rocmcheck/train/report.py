"""What a smoke-train run hands back (RunReport), and the failed verdict of a run that cannot start
(SetupFailed). Plain records: no torch, no environment changes, so the CLI, the launcher of several
ranks and the doctor can build and read reports on a machine without torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.result import CheckResult, failed

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


class SetupFailed(Exception):
    """A run that cannot start for a reason a person can fix: carries the failed verdict."""

    def __init__(self, check_id: str, summary: str, fix: str, evidence: list[str] | None = None, **data: Any) -> None:
        super().__init__(summary)
        self.result = failed(summary, fix, evidence, id=check_id, **data)

    @classmethod
    def of(cls, result: CheckResult) -> "SetupFailed":
        exc = cls(result.id, result.summary, result.fix or "")
        exc.result = result
        return exc


def first_line(exc: BaseException, limit: int = 200) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]
