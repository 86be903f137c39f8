"""`rocmcheck triage`: what people paste into an issue thread -> the likely causes, ranked, each with the pasted line
that shows it, the fix, and what to paste next when the evidence is thin.

The pastes are read by the paste readers (rocmcheck/triage/readers/paste.py) into partial Facts, where a fact
nobody pasted is not known (pasted.py); the doctor's own checks run on them and skip what the paste lacks
(judge.py); the catalogue's error signatures are searched in every line (match.py, rocmcheck/knowledge/
signatures.json); both are merged by the cause they belong to and ranked (rank.py). Everything shown is redacted:
the pastes are redacted before they are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocmcheck.facts.redact import redact_tree
from rocmcheck.fixes import Fix
from rocmcheck.result import CheckResult
from rocmcheck.triage.catalogue import catalogue
from rocmcheck.triage.judge import Judged, judge
from rocmcheck.triage.match import Hit, Scene, find
from rocmcheck.triage.pasted import Pasted, read_pastes
from rocmcheck.triage.rank import Finding, rank
from rocmcheck.triage.similar import Index, Similar, cause_families, index

MAX_ASKS = 3
SHOWN = 3  # causes a reply names


@dataclass
class Triage:
    pasted: Pasted
    findings: list[Finding]
    judged: list[Judged]
    hits: list[Hit]
    scene: Scene
    similar: list[Similar]  # recorded threads whose paste reads like this one (similar.py), after the causes

    def results(self) -> list[CheckResult]:
        """One verdict per cause (a fail when a signature or a failed check shows it), then every other check's
        verdict on the pasted facts: the verdicts the one exit rule (rocmcheck.result.exit_code) judges."""
        out = [self.result_of(i, f) for i, f in enumerate(self.findings, 1)]
        claimed = {f.id for f in self.findings}
        out += [j.result for j in self.judged if j.result.id not in claimed]
        return [CheckResult.from_dict(redact_tree(r.to_dict())) for r in out]

    @staticmethod
    def result_of(rank_: int, f: Finding) -> CheckResult:
        summary = f"{f.title}: {f.text}" if f.cause is not None else f.title
        evidence = [f"{q.source}:{q.line}: {q.text}" for q in f.quotes]
        return CheckResult(f.id, f.status, summary, evidence, f.fix, data={
            "rank": rank_, "score": f.score, "signatures": list(f.signatures), "thin": f.thin,
            **({"not_in_paste": f.undecided} if f.undecided else {})})

    def asks(self) -> list[tuple[Fix, list[str]]]:
        """What to paste next: the asks of the thin causes among those shown, each once."""
        out: list[tuple[Fix, list[str]]] = []
        for f in self.findings[:SHOWN]:
            if f.ask is None:
                continue
            for fix, ids in out:
                if fix == f.ask:
                    ids.append(f.id)
                    break
            else:
                if len(out) < MAX_ASKS:
                    out.append((f.ask, [f.id]))
        return out

    def causes_payload(self) -> list[dict[str, Any]]:
        return redact_tree([{
            "rank": i, "id": f.id, "title": f.title, "cause": f.text, "status": f.status.value,
            "score": f.score, "check": f.cause.check if f.cause else f.id,
            "signatures": list(f.signatures), "quotes": [q.to_dict() for q in f.quotes],
            "verdict": f.verdict.to_dict() if f.verdict is not None else None,
            "corroborating": [r.id for r in f.corroborating],
            "fix": f.fix.to_dict() if f.fix is not None else None,
            "thin": f.thin, "ask": f.ask.to_dict() if f.ask is not None else None,
            "sources": list(f.cause.sources) if f.cause else []} for i, f in enumerate(self.findings, 1)])

    def ask_payload(self) -> list[dict[str, Any]]:
        return redact_tree([{"for": ids, "fix": fix.to_dict()} for fix, ids in self.asks()])

    def nearest(self, threads: Index) -> list[Similar]:
        """The threads of `threads` most like the pastes, of none of the cause families the causes shown name."""
        named = {cause_families().get(f.id) for f in self.findings[:SHOWN]} - {None}
        return threads.nearest("\n".join(inp.text for inp in self.pasted.inputs), self.scene.platform.name, named)

    def similar_payload(self) -> list[dict[str, Any]]:
        return redact_tree([s.to_dict() for s in self.similar])


def triage(texts: list[tuple[str, str]], expected_archs: tuple[str, ...] = (), threads: Index | None = None) -> Triage:
    """(name, text) of each paste -> the ranked causes, then the recorded threads most like it (`threads`: the
    shipped index unless given). Never raises on what a paste holds."""
    cat = catalogue()
    pasted = read_pastes(texts)
    judged = judge(pasted, expected_archs)
    recorded = {r.id for r in pasted.recorded}
    # A pasted verdict's own fix line is a stranger's text, kept as a note (summary.py); where the check judged the
    # pasted facts itself, the fix it built here (its fields quoted) is the one shown.
    own_fix = {j.result.id: j.result.fix for j in judged if j.result.fix is not None}
    for r in pasted.recorded:
        r.fix = own_fix.get(r.id, r.fix)
    judged = [Judged(r, [pasted.where[f"recorded/{r.id}"]] if f"recorded/{r.id}" in pasted.where else [])
              for r in pasted.recorded] + [j for j in judged if j.result.id not in recorded]
    hits, scene = find(pasted, cat)
    t = Triage(pasted, rank(pasted, cat, hits, scene, judged), judged, hits, scene, [])
    t.similar = t.nearest(threads or index())
    return t
