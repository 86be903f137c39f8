"""Recorded threads whose paste reads like this one: the cause each thread accepted and its fix, as that thread's answer
(never judged on this paste).

The catalogue's signatures and the doctor's checks name a cause only where the paste shows its mark; many pastes show
none they know. Real issue threads that ended with an accepted cause are data too: the recorded threads
(tests/fixtures/triage_threads/tune/, each with its URL, the cause its people accepted and the fix) are kept as an
inverted index of the terms of their pastes and accepted causes (rocmcheck/knowledge/threads.json, written by
scripts/make_thread_index.py), and a new paste is compared with each by cosine similarity of TF-IDF weights. After the
causes come the nearest thread, then the cause families whose threads taken together read most like the paste (the
cosine with the sum of a family's unit vectors: a family of several threads that each share part of the paste outranks
one thread that shares a little more than any of them), each shown by its nearest thread, with the terms it shares with
the paste, so a reader sees why it was picked. No family the causes above them name is shown again
(rocmcheck/knowledge/cause_families.json maps a cause to its family). Chosen on the tuning threads, each left out in
turn (scripts/triage_score.py; benchmarks/RESULTS.md, section 39).

The terms are the paste's words as a person would search for them: lowercased, numbers as 0 (`libcudart.so.12` and
`.so.11` are one term), hex as `hex`, dotted and slashed names also split into their parts, and each pair of
neighbouring words. A thread from another platform than the paste's (its platform is recorded from its own paste), or
whose fix holds only on another platform (rocmcheck.triage.platform.foreign), is never shown.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Sequence

from rocmcheck.package_data import read_json
from rocmcheck.triage.platform import PLATFORMS, foreign

# Similar threads named after the causes, each of another cause family.
SHOWN = 3
# Below this cosine similarity a thread shares only common words with the paste. Chosen by leave-one-out on the
# recorded threads (scripts/triage_score.py prints the figure): 0.0-0.1 scored alike there, 0.2 lost a tenth of
# the hits; 0.05 keeps a thread that shares one rare term and little else out.
MIN_SIMILARITY = 0.05
# Shared terms printed with a thread: the heaviest few tell why it was picked.
SHARED_TERMS_SHOWN = 4
# Terms per paste, at most (the first words of a huge paste decide; a big log's tail adds nothing but cost).
MAX_TERMS_TEXT = 200_000

_WORD = re.compile(r"[a-z_][a-z0-9_.+-]*[a-z0-9_]|[a-z]")
_HEX = re.compile(r"0x[0-9a-f]+")
_DIGITS = re.compile(r"\d+")
_PARTS = re.compile(r"[./]")
_STOP = frozenset("the a an to of in and or is it for on at be this that with as by from not no was were are i you "
                  "we".split())


def terms(text: str) -> Counter[str]:
    """The paste's terms and how often each occurs (pure; never raises)."""
    text = _DIGITS.sub("0", _HEX.sub("hex", text[:MAX_TERMS_TEXT].lower()))
    words = [w for w in _WORD.findall(text) if len(w) > 1 and w not in _STOP]
    parts = [p for w in words if "." in w or "/" in w for p in _PARTS.split(w) if len(p) > 1]
    pairs = [f"{a} {b}" for a, b in zip(words, words[1:])]
    return Counter(words + parts + pairs)


@dataclass(frozen=True)
class Thread:
    """One recorded thread, as the index keeps it."""

    url: str
    title: str
    platform: str  # from the thread's own paste: rocm-linux, cuda-linux, wsl, windows, macos, cpu, unknown
    family: str
    cause: str  # the cause the thread accepted
    fix: str  # the fix it accepted


@dataclass
class Similar:
    thread: Thread
    similarity: float
    shared: list[str] = field(default_factory=list)  # the heaviest terms it shares with the paste

    def to_dict(self) -> dict[str, Any]:
        t = self.thread
        return {"url": t.url, "title": t.title, "platform": t.platform, "family": t.family, "cause": t.cause,
                "fix": t.fix, "similarity": round(self.similarity, 3), "shared": list(self.shared)}


def _idf(live: int, df: int) -> float:
    """A term's weight: rarer terms weigh more (smoothed, so a term of every thread still weighs 1)."""
    return math.log((live + 1) / (df + 1)) + 1


def _tf(n: int) -> float:
    return 1 + math.log(n)


class Index:
    """An inverted index of the recorded threads' terms: term -> [(thread, count)]."""

    def __init__(self, threads: list[Thread], postings: dict[str, list[Sequence[int]]]):
        self.threads = threads
        self.postings = postings
        self.left_out: frozenset[int] = frozenset()
        self.idf = {t: _idf(len(threads), len(p)) for t, p in postings.items()}
        # Per thread, the sums of tf^2 * idf^k (k = 0, 1, 2) over its terms: k = 2 is its norm squared, and the three
        # give a thread's norm after every idf moved by the same amount (without(), below).
        self._sums = [[0.0, 0.0, 0.0] for _ in threads]
        for t, p in postings.items():
            idf = self.idf[t]
            for d, n in p:
                tf2 = _tf(n) ** 2
                row = self._sums[d]
                row[0] += tf2
                row[1] += tf2 * idf
                row[2] += tf2 * idf * idf
        self.norms = [math.sqrt(row[2]) or 1.0 for row in self._sums]
        self._terms_of: dict[int, list[str]] | None = None
        self._family_norms: dict[str, float] | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any], leave_out_urls: Iterable[str] = ()) -> "Index":
        threads = [Thread(**{k: str(t.get(k) or "") for k in ("url", "title", "platform", "family", "cause",
                                                                "fix")}) for t in data.get("threads") or []]
        postings = data.get("terms") or {}  # as read: [thread, count] pairs, never changed here
        full = cls(threads, postings)
        drop = set(leave_out_urls)
        return full.without(drop) if drop else full

    def without(self, urls: Iterable[str]) -> "Index":
        """This index as if the threads of `urls` had never been recorded (the same weights and norms as an index
        made without them), sharing this one's postings. Every other term's idf moves by the same amount when the
        number of threads falls, so a thread's norm follows from its sums; only the terms the left-out threads hold
        are weighed again."""
        wanted = set(urls)
        drop = {i for i, t in enumerate(self.threads) if t.url in wanted} | set(self.left_out)
        out = object.__new__(Index)
        out.threads, out.postings, out.left_out, out._sums, out._terms_of = self.threads, self.postings, \
            frozenset(drop), self._sums, None
        live = len(self.threads) - len(drop)
        shift = math.log((len(self.threads) + 1) / (live + 1))  # every untouched term's idf falls by this
        touched = {t for d in drop for t in self._terms(d)}
        out.idf = {t: w - shift for t, w in self.idf.items() if t not in touched}
        squares = [row[2] - 2 * shift * row[1] + shift * shift * row[0] for row in self._sums]
        for t in touched:
            kept = [(d, n) for d, n in self.postings[t] if d not in drop]
            if not kept:
                continue
            old, new = self.idf[t] - shift, _idf(live, len(kept))
            out.idf[t] = new
            for d, n in kept:
                squares[d] += _tf(n) ** 2 * (new * new - old * old)
        out.norms = [math.sqrt(max(x, 0.0)) or 1.0 for x in squares]
        # The families' norms less the dropped threads' vectors, on this index's weights: only the dropped threads'
        # terms change a family's sum.
        family_squares = {f: x * x for f, x in self.family_norms().items()}
        for t in touched:
            before = self._family_sums(t, self.postings[t], self.left_out)
            after = self._family_sums(t, self.postings[t], out.left_out)
            for family, x in before.items():
                family_squares[family] += after.get(family, 0.0) ** 2 - x * x
        out._family_norms = {f: math.sqrt(max(x, 0.0)) for f, x in family_squares.items()}
        return out

    def _terms(self, d: int) -> list[str]:
        if self._terms_of is None:
            self._terms_of = {}
            for t, p in self.postings.items():
                for doc, _ in p:
                    self._terms_of.setdefault(doc, []).append(t)
        return self._terms_of.get(d, [])

    def family_norms(self) -> dict[str, float]:
        """Each cause family's norm: the length of the sum of its threads' unit vectors (its centroid, unscaled).
        Made on first use; a view made by without() takes its parent's and leaves the dropped threads' vectors out,
        on the parent's weights (every other weight of a view differs from its parent's by under 0.1%)."""
        if self._family_norms is None:
            squares: dict[str, float] = {}
            for t, p in self.postings.items():
                for family, x in self._family_sums(t, p).items():
                    squares[family] = squares.get(family, 0.0) + x * x
            self._family_norms = {f: math.sqrt(x) for f, x in squares.items()}
        return self._family_norms

    def _family_sums(self, term: str, postings: Iterable[Sequence[int]], skip: frozenset[int] = frozenset()
                     ) -> dict[str, float]:
        idf = self.idf[term]
        sums: dict[str, float] = {}
        for d, n in postings:
            if d not in skip:
                family = self.threads[d].family
                sums[family] = sums.get(family, 0.0) + _tf(n) * idf / self.norms[d]
        return sums

    def nearest(self, text: str, platform: str | None = None, named: Iterable[str] = ()) -> list[Similar]:
        """The threads most like `text`, at most SHOWN, each of another cause family and of none in `named` (the
        families the causes shown above them already name), none from another platform: first the single nearest
        thread, then the families whose threads, taken together, read most like the paste (the cosine of the paste
        with the sum of a family's unit vectors), each shown by its nearest thread."""
        query = {t: _tf(n) * self.idf[t] for t, n in terms(text).items() if t in self.idf}
        qnorm = math.sqrt(sum(w * w for w in query.values())) or 1.0
        scores: dict[int, float] = {}
        weights: dict[int, list[tuple[float, str]]] = {}
        for term, qw in query.items():
            for d, n in self.postings[term]:
                if d in self.left_out:
                    continue
                w = qw * _tf(n) * self.idf[term]
                scores[d] = scores.get(d, 0.0) + w
                weights.setdefault(d, []).append((w, term))
        cosine = {d: s / (qnorm * self.norms[d]) for d, s in scores.items()}
        # Each family's nearest thread that may be shown, in the order of their similarity.
        shown_by: dict[str, int] = {}
        for d in sorted(cosine, key=lambda d: (-cosine[d], d)):
            if cosine[d] < MIN_SIMILARITY:
                break
            if fits(self.threads[d], platform):
                shown_by.setdefault(self.threads[d].family, d)
        together: dict[str, float] = {}
        for d, c in cosine.items():
            together[self.threads[d].family] = together.get(self.threads[d].family, 0.0) + c
        norms = self.family_norms()
        by_family = sorted(shown_by, key=lambda f: (-together[f] / (norms.get(f) or 1.0), f))
        named = set(named)
        out: list[Similar] = []
        for family in dict.fromkeys(f for f in list(shown_by)[:1] + by_family if f not in named):
            if len(out) >= SHOWN:
                break
            d = shown_by[family]
            shared = [term for _, term in sorted(weights[d], key=lambda x: (-x[0], x[1]))][:SHARED_TERMS_SHOWN]
            out.append(Similar(self.threads[d], cosine[d], shared))
        return out


def fits(thread: Thread, platform: str | None) -> bool:
    """A thread is shown for a paste of the same platform, or where either side's platform is not known, and never
    when its fix holds only on another platform than the paste's. Where the paste does not show its platform, only
    a thread whose fix holds on every GPU platform is shown: a fix for one vendor's stack would be a guess."""
    if platform and thread.platform not in ("unknown", "", platform):
        return False
    if not platform:
        return not any(foreign(thread.fix, p) for p in PLATFORMS)
    return not foreign(thread.fix, platform)


@lru_cache(maxsize=1)
def cause_families() -> dict[str, str | None]:
    """Each cause id triage ranks -> the cause family the recorded threads file it under (None: no family)."""
    return dict(read_json("rocmcheck.knowledge", "cause_families.json").get("families") or {})


@lru_cache(maxsize=1)
def index() -> Index:
    return Index.from_data(read_json("rocmcheck.knowledge", "threads.json"))


def build(records: list[dict[str, Any]], about: str) -> dict[str, Any]:
    """The shipped index from recorded threads (url, title, platform, cause_family, accepted_cause, accepted_fix,
    paste), sorted by URL so the file is the same whatever order they were read in. A thread's terms are its paste's
    and its accepted cause's: the cause names in plain words what its paste shows (the library, the error, the
    version), and a new paste often shares those words where it shares little of the old one's log."""
    records = sorted(records, key=lambda r: r["url"])
    postings: dict[str, list[list[int]]] = {}
    for d, r in enumerate(records):
        for term, n in sorted((terms(r["paste"]) + terms(r["accepted_cause"])).items()):
            postings.setdefault(term, []).append([d, n])
    return {"about": about,
            "threads": [{"url": r["url"], "title": r["title"], "platform": r["platform"], "family": r["cause_family"],
                         "cause": r["accepted_cause"], "fix": r["accepted_fix"]} for r in records],
            "terms": dict(sorted(postings.items()))}
