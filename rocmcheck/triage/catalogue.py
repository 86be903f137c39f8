"""The catalogue of error signatures (rocmcheck/knowledge/signatures.json): what a pasted line says -> the causes it
points at, each with its fix, what to paste next and its sources. A signature is a regular expression searched in
each line, or a sign (`"fact"`): a finding of the paste readers that no single line spells out
(rocmcheck/triage/signs.py). Loaded once and checked whole: a signature that names an unknown cause or sign, a
regular expression that does not compile or a condition nobody reads is a bug in the shipped data (ValueError),
found by the tests."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rocmcheck.package_data import read_json
from rocmcheck.triage.platform import PLATFORMS
from rocmcheck.triage.signs import SIGNS

CATALOGUE_FILE = "signatures.json"
WEIGHTS = (1, 2, 3)  # 1: a hint; 2: the usual cause of that text; 3: the text names the cause
# What a signature's condition may look at (rocmcheck/triage/match.py computes each).
LIBRARY_WORDS = ("torch", "other", "none")  # or a package the failing frame or .so is in ("flash_attn")
PASTE_FLAGS = ("container", "amd", "nvidia", "wsl", "windows", "macos")  # the last two: the paste's platform
CONDITION_KEYS = ("library", "paste", "not_paste", "env", "with", "without")
FIX_KEYS = ("shell", "note", "edit", "use")


@dataclass(frozen=True)
class Rule:
    cause: str
    weight: int
    when: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Signature:
    id: str
    literals: tuple[str, ...]  # lower-case: a line holding none of them is not searched (empty for a sign)
    regex: re.Pattern[str] | None  # None for a sign
    rules: tuple[Rule, ...]
    sources: tuple[str, ...]
    examples: tuple[str, ...]
    support_only: bool = False  # its causes count only beside other evidence of them (a command run with sudo)
    fact: str | None = None  # a sign of rocmcheck/triage/signs.py in place of a regular expression


@dataclass(frozen=True)
class Cause:
    id: str
    title: str
    text: str  # the one sentence
    check: str | None  # the doctor check this cause is, when there is one
    checks: tuple[str, ...]  # doctor checks whose failure or warning corroborates it
    fix: dict[str, Any]
    ask: dict[str, Any] | None
    sources: tuple[str, ...]
    fix_container: dict[str, Any] | None = None
    order: int = 0  # its place in the catalogue: the tie-break between equal scores
    platforms: tuple[str, ...] = PLATFORMS  # where the cause, its fix and its ask hold (rocmcheck.triage.platform)
    text_if: str | None = None  # the sentence when the paste does not show the fact it states ("If ... is set")


@dataclass(frozen=True)
class Catalogue:
    causes: dict[str, Cause]
    signatures: tuple[Signature, ...]


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    return parse_catalogue(read_json("rocmcheck.knowledge", CATALOGUE_FILE))


def parse_catalogue(doc: dict[str, Any]) -> Catalogue:
    causes: dict[str, Cause] = {}
    for order, (cid, c) in enumerate(doc["causes"].items()):
        _fix_shape(cid, c["fix"])
        if c.get("fix_container") is not None:
            _fix_shape(cid, c["fix_container"])
        if c.get("ask") is not None:
            _fix_shape(cid, c["ask"])
        if not c.get("sources"):
            raise ValueError(f"cause {cid}: no sources")
        platforms = tuple(c.get("platforms") or ())
        if not platforms or set(platforms) - set(PLATFORMS):
            raise ValueError(f"cause {cid}: platforms must be a non-empty list of {PLATFORMS}")
        causes[cid] = Cause(cid, c["title"], c["cause"], c.get("check"), tuple(c.get("checks") or ()), c["fix"],
                            c.get("ask"), tuple(c["sources"]), c.get("fix_container"), order, platforms,
                            c.get("cause_if"))
    signatures = []
    seen: set[str] = set()
    for s in doc["signatures"]:
        sid = s["id"]
        if sid in seen:
            raise ValueError(f"signature {sid}: defined twice")
        seen.add(sid)
        fact = s.get("fact")
        if fact is not None:
            if fact not in SIGNS or "regex" in s or "literals" in s:
                raise ValueError(f"signature {sid}: a sign is one name of rocmcheck/triage/signs.py, with no regex")
            literals: tuple[str, ...] = ()
        else:
            literals = tuple(s["literals"])
            if not literals or any(not lit or lit != lit.lower() for lit in literals):
                raise ValueError(f"signature {sid}: literals must be non-empty and lower-case")
        rules = []
        for r in s["causes"]:
            if r["cause"] not in causes:
                raise ValueError(f"signature {sid}: unknown cause {r['cause']}")
            if r["weight"] not in WEIGHTS:
                raise ValueError(f"signature {sid}: weight {r['weight']} is not one of {WEIGHTS}")
            when = {k: tuple(v) for k, v in (r.get("when") or {}).items()}
            if set(when) - set(CONDITION_KEYS):
                raise ValueError(f"signature {sid}: unknown condition {sorted(set(when) - set(CONDITION_KEYS))}")
            for flag in when.get("paste", ()) + when.get("not_paste", ()):
                if flag not in PASTE_FLAGS:
                    raise ValueError(f"signature {sid}: unknown paste flag {flag}")
            rules.append(Rule(r["cause"], r["weight"], when))
        if not s.get("sources"):
            raise ValueError(f"signature {sid}: no sources")
        signatures.append(Signature(sid, literals, None if fact else re.compile(s["regex"]), tuple(rules),
                                    tuple(s["sources"]), tuple(s.get("examples") or ()), bool(s.get("support_only")),
                                    fact))
    ids = {s.id for s in signatures}
    for s in signatures:
        for r in s.rules:
            for key in ("with", "without"):
                missing = set(r.when.get(key, ())) - ids
                if missing:
                    raise ValueError(f"signature {s.id}: `{key}` names unknown signatures {sorted(missing)}")
    return Catalogue(causes, tuple(signatures))


def _fix_shape(cid: str, fix: dict[str, Any]) -> None:
    kinds = [k for k in FIX_KEYS if k in fix]
    if len(kinds) != 1:
        raise ValueError(f"cause {cid}: a fix is exactly one of {FIX_KEYS}, not {sorted(fix)}")
