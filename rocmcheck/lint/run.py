"""One `rocmcheck lint` run over several files, and its verdicts: every message of every file judged, a pass for
each file judged without an error or a warning, and a verdict for each file lint refused.

A refused file (it cannot be read or parsed, or it is none of the kinds lint judges) is never a pass: beside
files that were judged it is a failure (the run fails: a CI job that lints a misspelt path must not go green);
when no file at all could be judged, the refused ones are skips, so the run is NOT JUDGED (exit 3 by
rocmcheck.result.exit_code).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.errors import BadInput
from rocmcheck.fixes import note
from rocmcheck.lint.files import UnknownKind, lint_file
from rocmcheck.lint.messages import LintMessage, Severity
from rocmcheck.result import CheckResult, Status
from rocmcheck.safe.text import excerpt

UNREADABLE_FIX = note("correct the file (or its path) as the message says; lint reads JSON and YAML mappings")
UNKNOWN_KIND_FIX = note("lint judges DeepSpeed configs, LLaMA-Factory YAML and TrainingArguments files: "
                        "leave this file out, or check that it is the one meant")


@dataclass
class LintRun:
    """Files are linted one by one (lint); results() gives every verdict of the run."""

    options: dict[str, Any] = field(default_factory=dict)  # lint_file's keyword arguments
    messages: list[LintMessage] = field(default_factory=list)
    judged: list[tuple[str, list[LintMessage]]] = field(default_factory=list)  # (file, its messages)
    refused: list[tuple[str, BadInput]] = field(default_factory=list)

    def lint(self, name: str) -> None:
        try:
            found = lint_file(name, **self.options)
        except BadInput as exc:
            self.refused.append((name, exc))
            return
        self.messages.extend(found)
        self.judged.append((name, found))

    def results(self) -> list[CheckResult]:
        out = [m.to_check_result() for m in self.messages]
        for name, found in self.judged:
            if not any(m.severity in (Severity.ERROR, Severity.WARNING) for m in found):
                out.append(CheckResult("lint.file.clean", Status.PASS, f"{excerpt(name)}: no errors or warnings",
                                       area="lint", data={"file": name}))
        for name, problem in self.refused:
            out.append(refused_result(name, problem, others_judged=bool(self.judged)))
        return out

    def count(self, severity: Severity) -> int:
        return sum(m.severity is severity for m in self.messages)


def refused_result(name: str, problem: BadInput, *, others_judged: bool) -> CheckResult:
    """The verdict on a file lint could not judge: fail beside judged files, skip when nothing was judged."""
    unknown = isinstance(problem, UnknownKind)
    code = "lint.file.unknown_kind" if unknown else "lint.file.unreadable"
    summary = f"not judged: {excerpt(problem, 1000)}"
    if not others_judged:
        return CheckResult(code, Status.SKIP, summary, area="lint", data={"file": name})
    return CheckResult(code, Status.FAIL, summary, fix=UNKNOWN_KIND_FIX if unknown else UNREADABLE_FIX, area="lint",
                       data={"file": name})
