"""The memory-curve judge on three real runs recorded by `rocmcheck monitor` on an H100 (tests/fixtures/monitor_h100):
a loop that keeps each step's loss climbs 2.5 GiB/s for about 20 s and fails as a fast climb, with its rate and time
to capacity, also where the process first sat 16 s at its start (the whole recording then spans 35 s); the same loop
without the leak is too short to judge and passes nothing it should not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmcheck.monitor.curve import FAST_ETA_S, MIN_SPAN_S, classify_curve, judge_curves
from rocmcheck.result import Status

FIXTURES = Path(__file__).parent / "fixtures" / "monitor_h100"
GiB = 1 << 30


def readings(name: str) -> tuple[list[float], list[int], list[float | None], int]:
    rows = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]
    return ([r["t"] for r in rows], [r["used_bytes"] for r in rows], [r["util_pct"] for r in rows],
            rows[0]["total_bytes"])


@pytest.mark.parametrize("name", ["fast-climb-keep.jsonl", "fast-climb-slow-start.jsonl"])
def test_the_recorded_fast_climb_fails_with_its_rate(name):
    t, used, busy, total = readings(name)
    v = classify_curve(t, used, total, busy)
    assert v.span_s < MIN_SPAN_S and v.shape == "staircase" and v.fast
    assert 2.0 * GiB < v.rise_per_min / 60 < 3.0 * GiB  # the loop adds about 2.5 GiB a second
    assert v.eta_oom_s is not None and v.eta_oom_s < FAST_ETA_S
    curve = judge_curves({"0": v})[0]
    assert curve.status is Status.FAIL and "climbs fast" in curve.summary and "GiB/s" in curve.summary


def test_the_recorded_clean_run_is_not_a_leak():
    t, used, busy, total = readings("short-clean.jsonl")
    v = classify_curve(t, used, total, busy)
    assert not v.fast and v.shape != "staircase"
    assert judge_curves({"0": v})[0].status is not Status.FAIL
