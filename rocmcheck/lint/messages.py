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
    line: int | None = None  # where key_path is written in file, when known

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def render(self) -> str:
        """file:line: key.path: error: message (did you mean 'x'?)"""
        parts = [(self.file or "<config>") + (f":{self.line}" if self.line else "")]
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
            "line": self.line,
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
            data={"file": self.file, "line": self.line, "key_path": self.key_path, "did_you_mean": self.did_you_mean},
        )


def has_errors(messages: list[LintMessage]) -> bool:
    return any(m.is_error for m in messages)


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def one_fix_per_key(messages: list[LintMessage]) -> list[LintMessage]:
    """Several findings about the same key of the same file become one message with one fix: the
    most severe (the first of equals) keeps its fix; the others' words go into its detail. Two
    fixes for one key ("auto" and 32) would contradict each other."""
    keep: dict[tuple[str | None, str], LintMessage] = {}
    out: list[LintMessage] = []
    for m in sorted(messages, key=lambda m: _RANK[m.severity]):
        if m.severity is Severity.INFO or not m.key_path or not m.fix:
            out.append(m)
            continue
        first = keep.setdefault((m.file, m.key_path), m)
        if first is m:
            out.append(m)
        else:
            first.detail.append(f"also: {m.message}")
    order = {id(m): i for i, m in enumerate(messages)}
    return sorted(out, key=lambda m: order[id(m)])
