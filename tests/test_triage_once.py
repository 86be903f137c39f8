"""Each paste is parsed once and its facts shared: triage judges every check in a context of its own, and a pasted
rocminfo was parsed again by each check that reads it (17 times per run), then once by the paste reader and once
for the checks. Counted, not timed."""

from __future__ import annotations

from pathlib import Path

from rocmcheck.facts.parsers import rocminfo
from rocmcheck.triage import triage
from rocmcheck.triage.inputs import read_inputs
from rocmcheck.triage.readers import paste_read

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_pasted_rocminfo_is_parsed_once_per_run(monkeypatch):
    """The paste reader's parse is the one the checks' views use; a second run parses its own paste again (no
    store outlives a run)."""
    calls = []
    real = rocminfo.parse_rocminfo

    def counted(text):
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(rocminfo, "parse_rocminfo", counted)
    monkeypatch.setattr(paste_read, "parse_rocminfo", counted)
    pastes = read_inputs([str(FIXTURES / "public/rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt")])
    t = triage(pastes)
    assert any(j.result.id == "gpu.present" and j.result.status.value == "pass" for j in t.judged)
    assert len(calls) == 1, calls
    triage(pastes)
    assert len(calls) == 2, calls
