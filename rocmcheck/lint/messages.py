"""LintMessage: one finding in a config file, with the file, the key path, its code and (for typos) a suggestion;
its fix is a rocmcheck.fixes.Fix: an edit of the file named (the usual case: a key to rename, delete or set), a
shell line only for a real command, a note otherwise."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.fixes import Fix, FixKind, edit, note
from rocmcheck.result import CheckResult, Status
from rocmcheck.safe.text import excerpt


class Severity(str, enum.Enum):
    ERROR = "error"  # the run will fail, or silently do something else than written
    WARNING = "warning"  # works, but probably not what was meant, or slower
    INFO = "info"  # what lint could not check, and why


_STATUS = {Severity.ERROR: Status.FAIL, Severity.WARNING: Status.WARN, Severity.INFO: Status.SKIP}
IN_MEMORY = "<config>"  # the file name shown for a config linted from a dict
# A key path or suggestion longer than this is shown cut (safe.text.excerpt); a whole text field (the message, a
# hint, a line of detail, a fix) longer than MAX_TEXT_CHARS is cut too, whatever data was formatted into it: a
# 5 MB key is never printed whole.
MAX_TEXT_CHARS = 1000


def key_edit(file: str | None, key_path: str, change: str, why: str = "") -> Fix:
    """The edit of one key: `zero_optimization.stage3_parition_grads: delete "stage3_parition_grads"`, in the
    file named (the key path says where in it)."""
    where = f"{excerpt(key_path)}: " if key_path else ""
    return edit(file or IN_MEMORY, where + change, why)


def _capped(text: str | None) -> str | None:
    return None if text is None else excerpt(text, MAX_TEXT_CHARS)


def _capped_fix(fix: Fix) -> Fix:
    if len(fix.text) <= MAX_TEXT_CHARS and len(fix.why) <= MAX_TEXT_CHARS:
        return fix
    text, why = excerpt(fix.text, MAX_TEXT_CHARS), excerpt(fix.why, MAX_TEXT_CHARS)
    if fix.kind is FixKind.EDIT:
        return edit(fix.file, text, why)
    return note(f"{text} ({why})" if why else text)


@dataclass
class LintMessage:
    severity: Severity
    code: str  # stable dotted id, e.g. "lint.deepspeed.unknown_key" (every code is listed in docs/lint.md)
    file: str | None  # None for a dict linted in memory
    key_path: str  # "zero_optimization.stage3_parition_grads"; "" for the whole file (shown capped: excerpt)
    message: str  # what is wrong, one sentence
    did_you_mean: str | None = None
    hint: str | None = None  # shown after the suggestion, e.g. why the suggested key does not exist either
    fix: Fix | None = None  # one concrete thing to do (rocmcheck.fixes)
    detail: list[str] = field(default_factory=list)  # evidence, e.g. DeepSpeed's own error text
    line: int | None = None  # where key_path is written in file, when known
    consumer: str | None = None  # who reads the file and would stop: "the HF Trainer", "deepspeed.initialize"

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)
        if self.fix is not None and not isinstance(self.fix, Fix):
            raise TypeError(f"{self.code}: a lint fix is a rocmcheck.fixes.Fix (key_edit, edit, note, shell), "
                            f"not a {type(self.fix).__name__}")
        self.message = _capped(self.message) or ""
        self.hint = _capped(self.hint)
        self.did_you_mean = _capped(self.did_you_mean)
        self.detail = [excerpt(line, MAX_TEXT_CHARS) for line in self.detail]
        if self.fix is not None:
            self.fix = _capped_fix(self.fix)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def render(self) -> str:
        """file:line: key.path: error [lint.code] for CONSUMER: message (did you mean 'x'?), always one line."""
        parts = [excerpt(self.file or IN_MEMORY) + (f":{self.line}" if self.line else "")]
        if self.key_path:
            parts.append(excerpt(self.key_path))
        for_whom = f" for {self.consumer}" if self.consumer else ""
        text = f"{': '.join(parts)}: {self.severity.value} [{self.code}]{for_whom}: {self.message}"
        if self.did_you_mean:
            text += f" (did you mean '{excerpt(self.did_you_mean)}'?" + (f" {self.hint})" if self.hint else ")")
        elif self.hint:
            text += f" ({self.hint})"
        return excerpt(text, 4 * MAX_TEXT_CHARS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity.value,
            "code": self.code,
            "file": self.file,
            "line": self.line,
            "key_path": excerpt(self.key_path, MAX_TEXT_CHARS),
            "message": self.message,
            "did_you_mean": self.did_you_mean,
            "hint": self.hint,
            "fix": self.fix.to_dict() if self.fix is not None else None,
            "detail": list(self.detail),
            "consumer": self.consumer,
        }

    def to_check_result(self) -> CheckResult:
        return CheckResult(
            id=self.code,
            status=_STATUS[self.severity],
            summary=self.render(),
            evidence=list(self.detail),
            fix=self.fix if self.severity is not Severity.INFO else None,
            area="lint",
            data={"file": self.file, "line": self.line, "key_path": excerpt(self.key_path, MAX_TEXT_CHARS),
                  "did_you_mean": self.did_you_mean, "consumer": self.consumer},
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
