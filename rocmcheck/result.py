"""The one verdict type every stage returns (cheap checks, GPU probes, smoke-train)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    # A check that raised: a bug in rocmcheck, never a verdict on the machine.
    CRASH = "crash"

    @property
    def is_problem(self) -> bool:
        return self in (Status.FAIL, Status.CRASH)


@dataclass
class CheckResult:
    """One verdict: what was found, the evidence, and (when not pass) one fix to paste."""

    id: str  # stable, dotted: "rocm.arch", "torch.arch_list", "probe.gemm", "train.loss"
    status: Status
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None
    area: str = ""  # grouping for the report; defaults to the id's prefix
    data: dict[str, Any] = field(default_factory=dict)  # machine-readable numbers

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if not self.area and self.id:
            self.area = self.id.split(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "fix": self.fix,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckResult":
        return cls(
            id=d["id"],
            status=Status(d["status"]),
            summary=d["summary"],
            evidence=list(d.get("evidence") or []),
            fix=d.get("fix"),
            area=d.get("area", ""),
            data=dict(d.get("data") or {}),
        )


# The builders. Inside a registered check the id is left out: run_checks stamps the check's own id, so one
# check cannot report under another's name. Stages that judge outside the registry (probes, smoke-train,
# plan) name the id with id=.
def passed(summary: str, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.PASS, summary, evidence or [], None, data=data)


def warned(summary: str, fix: str, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.WARN, summary, evidence or [], fix, data=data)


def failed(summary: str, fix: str, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.FAIL, summary, evidence or [], fix, data=data)


def skipped(summary: str, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.SKIP, summary, evidence or [], None, data=data)


def worst(results: list[CheckResult]) -> Status:
    order = [Status.SKIP, Status.PASS, Status.WARN, Status.FAIL, Status.CRASH]
    return max((r.status for r in results), key=order.index, default=Status.SKIP)
