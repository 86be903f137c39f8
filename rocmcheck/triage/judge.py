"""The doctor's own checks, run on the pasted facts: a check whose facts are not in the paste skips ("not in the
paste: rocminfo output"); one that fails or warns quotes the pasted lines of the facts it read."""

from __future__ import annotations

from dataclasses import dataclass, field

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.facts.collect import Facts
from rocmcheck.result import CheckResult, Status
from rocmcheck.triage.context import TriageContext, facts_for_checks
from rocmcheck.triage.known import Ledger
from rocmcheck.triage.pasted import Pasted, Quote


@dataclass
class Judged:
    result: CheckResult
    quotes: list[Quote] = field(default_factory=list)  # the pasted lines of the facts the verdict rests on


def judge(pasted: Pasted, expected_archs: tuple[str, ...] = ()) -> list[Judged]:
    """Every check, each in a context of its own (a view computed for one check is not reused by the next, so
    each verdict's reads are its own); their parsed tool outputs are the run's one store (context_of)."""
    ledger = Ledger()
    facts = facts_for_checks(pasted, ledger)
    out: list[Judged] = []
    for spec in select_checks():
        ledger.clear()
        ctx = context_of(pasted, facts, expected_archs)
        for result in run_checks([spec], ctx):
            quotes = evidence_quotes(pasted, ledger.reads) if result.status in (Status.FAIL, Status.WARN) else []
            out.append(Judged(result, quotes))
    return out


def context_of(pasted: Pasted, facts: Facts, expected_archs: tuple[str, ...] = ()) -> TriageContext:
    """A context over the pasted facts, whose parsed tool outputs are the run's (pasted.parsed: the paste readers'
    parses, and each the checks make, made once per run)."""
    return TriageContext(facts, expected_archs=expected_archs, pasted_gpus=pasted.gpus, pasted_rocm=pasted.rocm,
                         pasted_container=pasted.container, parsed=pasted.parsed)



def evidence_quotes(pasted: Pasted, reads: list[str]) -> list[Quote]:
    """The pasted line behind each fact read, in the order read, each line once."""
    quotes: list[Quote] = []
    for path in reads:
        quote = _where(pasted, path)
        if quote is not None and quote not in quotes:
            quotes.append(quote)
    return quotes


def _where(pasted: Pasted, path: str) -> Quote | None:
    """The quote of a fact, or of the fact it is part of ("probes/deepspeed.ops.fused_adam" -> the op table)."""
    while True:
        if path in pasted.where:
            return pasted.where[path]
        group, _, rest = path.partition("/")
        if f"{group}/*" in pasted.where and rest and "." not in rest:
            return pasted.where[f"{group}/*"]
        if "." not in rest:
            return None
        path = path.rsplit(".", 1)[0]
