"""LintMessage: one finding in a config file, with the file, the key path and (for typos) a suggestion."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.result import CheckResult, Status


class Severity(str, enum.Enum):
    ERROR = "error"  # the run will fail, or silently do something else than written
    WARNING = "warning"  # works, but probably not what was meant, or slower
    INFO = "info"  # what lint could not check, and why


_STATUS = {Severity.ERROR: Status.FAIL, Severity.WARNING: Status.WARN, Severity.INFO: Status.SKIP}


@dataclass
class LintMessage:
    severity: Severity
    code: str  # stable dotted id, e.g. "lint.deepspeed.unknown_key"
    file: str | None  # None for a dict linted in memory
    key_path: str  # "zero_optimization.stage3_parition_grads"; "" for the whole file
    message: str  # what is wrong, one sentence
    did_you_mean: str | None = None
    hint: str | None = None  # shown after the suggestion, e.g. why the suggested key does not exist either
    fix: str | None = None  # one concrete thing to do
    detail: list[str] = field(default_factory=list)  # evidence, e.g. DeepSpeed's own error text

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def render(self) -> str:
        """file: key.path: error: message (did you mean 'x'?)"""
        parts = [self.file or "<config>"]
        if self.key_path:
            parts.append(self.key_path)
        text = f"{': '.join(parts)}: {self.severity.value}: {self.message}"
        if self.did_you_mean:
            text += f" (did you mean '{self.did_you_mean}'?" + (f" {self.hint})" if self.hint else ")")
        elif self.hint:
            text += f" ({self.hint})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity.value,
            "code": self.code,
            "file": self.file,
            "key_path": self.key_path,
            "message": self.message,
            "did_you_mean": self.did_you_mean,
            "hint": self.hint,
            "fix": self.fix,
            "detail": list(self.detail),
        }

    def to_check_result(self) -> CheckResult:
        return CheckResult(
            id=self.code,
            status=_STATUS[self.severity],
            summary=self.render(),
            evidence=list(self.detail),
            fix=self.fix if self.severity is not Severity.INFO else None,
            area="lint",
            data={"file": self.file, "key_path": self.key_path, "did_you_mean": self.did_you_mean},
        )


def has_errors(messages: list[LintMessage]) -> bool:
    return any(m.is_error for m in messages)
