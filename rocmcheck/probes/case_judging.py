"""One verdict from many numeric cases: a level-2 probe runs a kernel over several dtypes, shapes and variants, each
against its float64 reference, and reads as one line in the report (which path, right or wrong, the worst case).
Pure, no torch: the family judges in rocmcheck/probes/numerics_verdicts.py build the cases from the child's data.

A case that raised is a fail (the path is unusable); a case past its limit, or with any NaN/inf or unwritten
element, is a fail (the path computes wrong numbers); otherwise the verdict passes and names its worst case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocmcheck.fixes import Fix
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import fmt_err, number
from rocmcheck.result import CheckResult, failed, passed

LISTED_FAILURES = 6  # failing cases named in the evidence (the JSON data holds every case)


@dataclass(frozen=True)
class Case:
    what: str  # "fp32 addmm(beta=0.5, alpha=1.5) nt 2048x2048x2048"
    group: str  # what the summary groups failures by: a dtype ("bf16"), or a dtype and an output ("bf16 dq")
    err: float | None  # relative norm error; None when it was not finite
    limit: float
    nonfinite: int = 0
    error: str | None = None  # the kernel raised: the first line of what it said

    @classmethod
    def of(cls, what: str, group: str, rel_err: Any, limit: float, nonfinite: Any = 0,
           error: Any = None) -> "Case":
        return cls(what, group, number(rel_err), limit, int(number(nonfinite) or 0),
                   str(error) if error else None)

    @property
    def raised(self) -> bool:
        return self.error is not None

    @property
    def wrong(self) -> bool:
        return not self.raised and (self.err is None or self.nonfinite > 0 or self.err > self.limit)

    @property
    def ratio(self) -> float:
        """How close to its limit (1 = at it); infinite for NaN."""
        return float("inf") if self.err is None or self.nonfinite else self.err / self.limit

    def line(self) -> str:
        if self.raised:
            return f"RAISED {self.what}: {self.error}"
        nan = f", {self.nonfinite} NaN/inf or unwritten elements" if self.nonfinite else ""
        word = "WRONG " if self.wrong else ""
        return f"{word}{self.what}: relative error {fmt_err(self.err)} (limit {self.limit:.1e}){nan}"

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "group": self.group, "rel_err": self.err, "limit": self.limit,
                "nonfinite": self.nonfinite, "error": self.error}


def _groups(cases: list[Case], first_word: bool = False) -> str:
    """The groups the cases fall in, in order; first_word: only the dtype of groups like "bf16 dq"."""
    return ", ".join(dict.fromkeys(c.group.split()[0] if first_word else c.group for c in cases))


def worst(cases: list[Case]) -> Case | None:
    judged = [c for c in cases if not c.raised]
    return max(judged, key=lambda c: c.ratio) if judged else None


def cases_verdict(pid: str, subject: str, cases: list[Case], ctx: DeviceContext, *, wrong_fix: Fix,
                  raised_fix: Fix, evidence: list[str] | None = None, **data: Any) -> CheckResult:
    """subject: what ran, as the summary names it ("GEMM via hipBLASLt"). evidence: lines about the path (which
    library torch reports in effect, warnings it gave) that follow the cases'."""
    if not cases:
        raise ValueError(f"{pid}: no cases to judge")
    raised = [c for c in cases if c.raised]
    wrong = [c for c in cases if c.wrong]
    top = worst(cases)
    lines = [c.line() for c in (raised + sorted(wrong, key=lambda c: -c.ratio))[:LISTED_FAILURES]]
    if top is not None and not wrong:
        lines.append(f"worst: {top.line()}")
    lines += list(evidence or [])
    info = dict(cases=[c.to_dict() for c in cases], failed=len(raised) + len(wrong),
                worst=top.to_dict() if top is not None else None, **data)
    where = ctx.label()
    if raised:
        first = raised[0]
        also = f"; {len(wrong)} more gave wrong numbers" if wrong else ""
        return failed(f"{subject} raised on {where} for {_groups(raised)} ({len(raised)} of {len(cases)} cases"
                      f"{also}): {first.what}: {first.error}", raised_fix, lines, **info, id=pid)
    if wrong:
        bad = max(wrong, key=lambda c: c.ratio)
        nan = " (NaN/inf or unwritten elements)" if bad.err is None or bad.nonfinite else \
            f": relative error {bad.err:.1e} > {bad.limit:.1e}"
        return failed(f"{subject} is wrong on {where} for {_groups(wrong)} ({len(wrong)} of {len(cases)} cases); "
                      f"worst {bad.what}{nan}", wrong_fix, lines, **info, id=pid)
    assert top is not None
    return passed(f"{subject} is right on {where}: {len(cases)} cases ({_groups(cases, True)}); worst {top.what} "
                  f"{top.err:.1e} (limit {top.limit:.1e})", lines, **info, id=pid)
