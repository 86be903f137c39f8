"""Each paste is parsed once and its facts shared: triage judges every check in a context of its own, and a pasted
rocminfo was parsed again by each check that reads it (17 times per run). Counted, not timed."""

from __future__ import annotations

from pathlib import Path

from rocmcheck.checks import context
from rocmcheck.facts.parsers import rocminfo
from rocmcheck.triage import triage
from rocmcheck.triage.inputs import read_inputs

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_pasted_rocminfo_is_parsed_once_by_the_checks(monkeypatch):
    calls = []
    real = rocminfo.parse_rocminfo

    def counted(text):
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(rocminfo, "parse_rocminfo", counted)
    context._PARSED.clear()
    t = triage(read_inputs([str(FIXTURES / "public/rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt")]))
    assert any(j.result.id == "gpu.present" for j in t.judged)
    assert len(calls) <= 2, calls  # the paste reader's, and the checks' one shared view
