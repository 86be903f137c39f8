"""Signature matches and the checks' verdicts, merged by the cause (the check) they belong to and ranked.

A cause's score is the weight of its strongest signature (3 names the cause, 2 is its usual cause, 1 a hint),
plus half a point for each other signature that points at it (at most one point), plus what the doctor's own
check of it said on the pasted facts (fail +3, warn +2, pass -2: the paste shows the check's facts and they are
fine), plus one point when another check that corroborates it failed or warned. A failed or warned check that no
cause claims is a cause of its own. Equal scores keep the catalogue's order. The evidence is thin, and the cause
comes with what to paste next, when no check judged it and no signature names it outright.

The paste's platform (rocmcheck/triage/platform.py) comes first: a cause that does not hold on it is not named, and
a fix whose words hold on another platform only is replaced by what to paste next (or a note saying why the usual
fix does not apply).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocmcheck import fixes
from rocmcheck.fixes import Fix
from rocmcheck.result import CheckResult, Status
from rocmcheck.triage.catalogue import Catalogue, Cause
from rocmcheck.triage.judge import Judged
from rocmcheck.triage.match import Hit, Scene, holds
from rocmcheck.triage.pasted import Pasted, Quote
from rocmcheck.triage.platform import ASK_PLATFORM, PLATFORMS, check_platforms, foreign
from rocmcheck.triage.remedy import build
from rocmcheck.triage.summary import NO_FIX

CHECK_SCORE = {Status.FAIL: 3.0, Status.WARN: 2.0, Status.PASS: -2.0}
OTHER_SIGNATURE = 0.5
MAX_OTHER_SIGNATURES = 2
CORROBORATION = 1.0
DECISIVE_WEIGHT = 3
MAX_QUOTES = 5


@dataclass
class Finding:
    """One likely cause, with everything that points at it."""

    id: str
    title: str
    text: str
    cause: Cause | None  # None: a failed or warned check the catalogue has no cause for
    weight: int = 0
    signatures: list[str] = field(default_factory=list)
    quotes: list[Quote] = field(default_factory=list)
    verdict: CheckResult | None = None  # the doctor's own check of this cause, judged on the pasted facts
    corroborating: list[CheckResult] = field(default_factory=list)
    score: float = 0.0
    fix: Fix | None = None
    ask: Fix | None = None
    thin: bool = False
    order: int = 0

    @property
    def status(self) -> Status:
        if self.weight >= 2 or (self.verdict is not None and self.verdict.status is Status.FAIL):
            return Status.FAIL
        return Status.WARN

    @property
    def undecided(self) -> str | None:
        """What the check that would decide it lacked: "not in the paste: torch's arch list"."""
        if self.verdict is not None and self.verdict.status is Status.SKIP and self.verdict.data.get("not_known"):
            return self.verdict.summary
        return None


def rank(pasted: Pasted, cat: Catalogue, hits: list[Hit], scene: Scene, judged: list[Judged]) -> list[Finding]:
    findings: dict[str, Finding] = {}
    by_check = {c.check: cid for cid, c in cat.causes.items() if c.check}

    def finding(cid: str) -> Finding:
        if cid not in findings:
            c = cat.causes[cid]
            findings[cid] = Finding(cid, c.title, c.text, c, order=c.order)
        return findings[cid]

    supported: set[str] = set()  # causes with evidence of their own, which support_only signatures may add to
    for hit in hits:
        if not hit.signature.support_only:
            supported |= {r.cause for r in hit.signature.rules if holds(r, hit, scene)}
    supported |= {by for j in judged if j.result.status in (Status.FAIL, Status.WARN)
                  for by in [c.id for c in cat.causes.values() if c.check == j.result.id]}
    for hit in hits:
        weights: dict[str, int] = {}
        for rule in hit.signature.rules:
            if holds(rule, hit, scene) and (not hit.signature.support_only or rule.cause in supported):
                weights[rule.cause] = max(weights.get(rule.cause, 0), rule.weight)
        for cid, weight in weights.items():
            f = finding(cid)
            f.weight = max(f.weight, weight)
            if hit.signature.id not in f.signatures:
                f.signatures.append(hit.signature.id)
            if hit.quote not in f.quotes and len(f.quotes) < MAX_QUOTES:
                f.quotes.append(hit.quote)
    for j in judged:
        r = j.result
        problem = r.status in (Status.FAIL, Status.WARN)
        own = by_check.get(r.id)
        if own is not None and (own in findings or problem):
            f = finding(own)
            f.verdict = r
            for q in j.quotes:
                if q not in f.quotes and len(f.quotes) < MAX_QUOTES:
                    f.quotes.append(q)
        if not problem:
            continue
        claimed = [f for f in findings.values()
                   if f.cause is not None and r.id in f.cause.checks and f.signatures and f.id != own]
        for f in claimed:
            f.corroborating.append(r)
        if not claimed and own is None:
            findings[r.id] = Finding(r.id, r.summary, r.summary, None, verdict=r, quotes=list(j.quotes[:MAX_QUOTES]),
                                     order=len(cat.causes) + len(findings))
    out = [f for f in findings.values() if f.signatures or (f.verdict is not None and f.verdict.status in
                                                            (Status.FAIL, Status.WARN))]
    where = scene.platform.name
    if where is not None:
        out = [f for f in out if where in (f.cause.platforms if f.cause is not None else check_platforms(f.id))]
    for f in out:
        _score(f)
        if f.thin and f.cause is not None and f.cause.text_if:
            f.text = f.cause.text_if  # the paste does not show the fact the cause states: say "if"
        _remedy(f, pasted, scene)
    out.sort(key=lambda f: (-f.score, f.order))
    return [f for f in out if f.score > 0]


def _score(f: Finding) -> None:
    others = min(MAX_OTHER_SIGNATURES, max(0, len(f.signatures) - 1))
    f.score = f.weight + OTHER_SIGNATURE * others
    if f.verdict is not None:
        f.score += CHECK_SCORE.get(f.verdict.status, 0.0)
    if f.corroborating:
        f.score += CORROBORATION
    judged = f.verdict is not None and f.verdict.status in (Status.FAIL, Status.WARN)
    f.thin = not judged and f.weight < DECISIVE_WEIGHT


def _remedy(f: Finding, pasted: Pasted, scene: Scene) -> None:
    own = f.verdict is not None and f.verdict.fix is not None and f.verdict.fix != NO_FIX
    if own and f.verdict.status in (Status.FAIL, Status.WARN):
        f.fix = f.verdict.fix  # the check's own fix, made from the pasted facts
    elif f.cause is not None:  # also for a pasted verdict: the catalogue's fix, never the paste's
        data = f.cause.fix_container if ("container" in scene.flags and f.cause.fix_container) else f.cause.fix
        f.fix = build(data, pasted, scene.flags, scene.platform)
    elif f.verdict is not None and f.verdict.fix == NO_FIX and f.verdict.status in (Status.FAIL, Status.WARN):
        f.fix = NO_FIX  # a pasted verdict no check of rocmcheck's judged here: rocmcheck's own word
    if f.thin and f.cause is not None and f.cause.ask is not None:
        f.ask = build(f.cause.ask, pasted, scene.flags, scene.platform)
    where = scene.platform.name
    if f.ask is not None and foreign(_words(f.ask), where):
        f.ask = None
    if f.fix is not None and foreign(_words(f.fix), where):
        f.fix = f.ask or fixes.note(f"the usual fix of this cause is for another platform than this paste's ({where}): "
                                    "use the equivalent step of your platform's install guide")
    elif where is None and f.fix is not None and f.cause is not None and _narrow(f.cause.platforms, _words(f.fix)):
        # The fix holds on some platforms only and the paste does not show which one it is: say so, and ask.
        f.fix = fixes.note(f"if this machine runs {' or '.join(f.cause.platforms)}: {_words(f.fix).strip()}; the "
                           f"paste does not show its platform: paste the output of {ASK_PLATFORM} and uname -a")


def _narrow(platforms: tuple[str, ...], text: str) -> bool:
    """The fix's words hold on some platforms only, and the cause is not for every platform."""
    return set(platforms) != set(PLATFORMS) and any(foreign(text, p) for p in PLATFORMS if p not in platforms)


def _words(fix: Fix) -> str:
    return " ".join((fix.text, fix.why, fix.file))
