"""The one verdict type every stage returns (cheap checks, GPU probes, smoke-train, lint, plan, compare,
monitor), and the one rule that turns a list of verdicts into the run's verdict and its exit code."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable

from rocmcheck.fixes import Fix


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
    fix: Fix | None = None
    area: str = ""  # grouping for the report; defaults to the id's prefix
    data: dict[str, Any] = field(default_factory=dict)  # machine-readable numbers

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if not self.area and self.id:
            self.area = self.id.split(".", 1)[0]
        if self.fix is not None and not isinstance(self.fix, Fix):
            raise TypeError(f"{self.id}: a fix is built with rocmcheck.fixes (shell, edit, note), "
                            f"not a {type(self.fix).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "fix": self.fix.to_dict() if self.fix is not None else None,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckResult":
        return cls(
            id=d["id"],
            status=Status(d["status"]),
            summary=d["summary"],
            evidence=list(d.get("evidence") or []),
            fix=Fix.from_dict(d.get("fix")),
            area=d.get("area", ""),
            data=dict(d.get("data") or {}),
        )


# The builders. Inside a registered check the id is left out: run_checks stamps the check's own id, so one
# check cannot report under another's name. Stages that judge outside the registry (probes, smoke-train,
# plan) name the id with id=.
def passed(summary: str, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.PASS, summary, evidence or [], None, data=data)


def warned(summary: str, fix: Fix, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.WARN, summary, evidence or [], fix, data=data)


def failed(summary: str, fix: Fix, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.FAIL, summary, evidence or [], fix, data=data)


def skipped(summary: str, evidence: list[str] | None = None, *, id: str = "", **data: Any) -> CheckResult:
    return CheckResult(id, Status.SKIP, summary, evidence or [], None, data=data)


def worst(results: Iterable[CheckResult]) -> Status:
    order = [Status.SKIP, Status.PASS, Status.WARN, Status.FAIL, Status.CRASH]
    return max((r.status for r in results), key=order.index, default=Status.SKIP)


# The run's verdict, for every command alike: "fail" when a verdict failed or crashed, "warn" when one warned,
# "pass" when something was judged and nothing went wrong, "not_judged" when nothing could be judged (every
# verdict a skip, or none at all): never a pass.
NOT_JUDGED = "not_judged"
EXIT_PASSED = 0  # judged, and nothing failed (warnings included)
EXIT_FAILED = 1  # a verdict failed (or a check crashed)
EXIT_BAD_INPUT = 2  # bad usage: a flag, a file, a config a person must fix (rocmcheck.errors.BadInput)
EXIT_NOT_JUDGED = 3  # nothing could be judged here (no GPU reader, no torch, every check skipped)


def verdict(results: Iterable[CheckResult]) -> str:
    w = worst(results)
    if w in (Status.FAIL, Status.CRASH):
        return "fail"
    if w is Status.WARN:
        return "warn"
    return "pass" if w is Status.PASS else NOT_JUDGED


def exit_code(results: Iterable[CheckResult]) -> int:
    """The one exit rule: 0 judged and nothing failed, 1 a verdict failed, 3 nothing could be judged."""
    v = verdict(results)
    return EXIT_FAILED if v == "fail" else EXIT_NOT_JUDGED if v == NOT_JUDGED else EXIT_PASSED
