"""The memory-curve judge on curves shaped like real runs (tests/monitor_curves.py)."""

from __future__ import annotations

import monitor_curves as mc
import pytest

from rocmcheck.monitor import staircase
from rocmcheck.monitor.curve import classify_curve, judge_curves
from rocmcheck.monitor.step_memory import detect_leak
from rocmcheck.result import Status
from rocmcheck.train.verdicts import check_memory_leak


@pytest.mark.parametrize("name,shape", [("flat", "flat"), ("noisy_flat", "flat"), ("sawtooth", "sawtooth"),
                                        ("staircase", "staircase"), ("step_once", "flat")])
def test_shapes(name, shape):
    t, used = getattr(mc, name)()
    assert classify_curve(t, used, mc.H200).shape == shape


def test_staircase_rate_and_time_to_oom():
    # 0.4 GiB per 3 s step = 8 GiB/min; the curve's top is ~118 GiB of 140.4 GiB at the end
    t, used = mc.staircase()
    v = classify_curve(t, used, mc.H200)
    assert 7.0 * mc.GiB < v.rise_per_min < 9.0 * mc.GiB
    assert 1.5 * 60 < v.eta_oom_s < 4 * 60
    result = judge_curves({"0": v})[0]
    assert result.status is Status.FAIL and result.id == "monitor.memory_curve"
    assert "staircase" in result.summary and "LeakWatchCallback" in result.fix.text and result.fix.kind.value == "note"


def test_staircase_that_hit_oom_drops_teardown_and_still_judges():
    t, used = mc.staircase(seconds=400, leak_per_step=0.8 * mc.GiB)
    assert used[-1] < mc.GiB  # the process died and freed its memory
    v = classify_curve(t, used, mc.H200)
    assert v.shape == "staircase" and any("freed" in n for n in v.notes)


def test_slow_leak_on_mi300x():
    t, used = mc.staircase(seconds=600, step_s=10, leak_per_step=0.15 * mc.GiB, capacity=mc.MI300X)
    v = classify_curve(t, used, mc.MI300X)
    assert v.shape == "staircase" and 0.7 * mc.GiB < v.rise_per_min < 1.1 * mc.GiB


def test_too_short_and_empty_are_skipped():
    t, used = mc.flat(seconds=50)
    assert classify_curve(t, used, mc.H200).shape == "too short"
    results = judge_curves({})
    assert [r.status for r in results] == [Status.SKIP, Status.SKIP]


def test_peak_against_capacity():
    t, used = mc.flat()
    tight = [u * 1.45 for u in used]  # 94 GiB * 1.45 = 136 GiB of 140.4 GiB: 97%
    curve, peak = judge_curves({"0": classify_curve(t, tight, mc.H200)})
    assert curve.status is Status.PASS and peak.status is Status.WARN and "97%" in peak.summary
    _, peak = judge_curves({"0": classify_curve(t, used, mc.H200)})
    assert peak.status is Status.PASS and "67%" in peak.summary
    _, peak = judge_curves({"0": classify_curve(t, used, None)})
    assert peak.status is Status.SKIP


def test_worst_gpu_decides():
    flat, stairs = classify_curve(*mc.flat(), mc.H200), classify_curve(*mc.staircase(), mc.H200)
    curve, _ = judge_curves({"0": flat, "1": stairs})
    assert curve.status is Status.FAIL and "GPU 1" in curve.summary and len(curve.evidence) == 2


def test_loading_is_measured_against_the_floor_of_its_time():
    # A floor that climbs from 14 to 140 GiB: half the *final* floor is 70 GiB, reached two minutes into the leak,
    # and every reading before it used to count as loading. Loading (20 s) is what is left out now.
    t, used = mc.kept_logits()
    v = classify_curve(t, used, mc.H200)
    assert v.shape == "staircase"
    assert v.judged_span[0] <= 20 and v.judged_samples >= 280
    assert any(n.startswith("first ") and "loading" in n for n in v.notes)
    # A flat run's loading is measured as before: 40 s of it, then the optimizer's jump.
    assert classify_curve(*mc.flat(), mc.H200).judged_span == (40, 300)


# ---- one leak rule behind train.memory_leak and monitor.memory_curve --------------------------------------------

@pytest.mark.parametrize("name", ["flat", "noisy_flat", "sawtooth", "staircase", "step_once", "kept_logits",
                                  "rising_peaks"])
def test_both_leak_verdicts_agree_on_one_curve(name):
    """The readings the monitor judges, handed to smoke-train's verdict as post-step baselines with the driver's
    tolerance: the same rule, so the same answer (fail for a staircase, pass otherwise)."""
    t, used = getattr(mc, name)()
    v = classify_curve(t, used, mc.H200)
    curve = judge_curves({"0": v})[0]
    first, last = v.judged_span
    baselines = used[first:last]
    decision = detect_leak(baselines, staircase.tolerance("gpu-driver", mc.H200), warmup=0)
    leak = check_memory_leak(decision, "gpu-driver", baselines)
    assert (curve.id, leak.id) == ("monitor.memory_curve", "train.memory_leak")
    assert curve.status is leak.status, (curve.summary, leak.summary)
    assert (curve.status is Status.FAIL) == (name in ("staircase", "kept_logits"))


def test_a_sawtooth_whose_peaks_rise_is_no_leak_for_either_verdict():
    # Medians of thirds rise by 20 GiB here (the peaks grow); the floor does not move.
    t, used = mc.rising_peaks()
    assert classify_curve(t, used, mc.H200).shape == "sawtooth"
    assert not detect_leak(used[40:], staircase.tolerance("gpu-driver", mc.H200), warmup=0).leaking


def test_too_few_points_is_the_same_limit_for_both():
    few = [float(64 * mc.GiB + i * mc.GiB) for i in range(staircase.MIN_POINTS - 1)]
    assert not detect_leak(few, 4 * mc.MiB, warmup=0).judged
    assert staircase.judge_staircase(range(len(few)), few, 4 * mc.MiB).judged is False
    assert detect_leak(few + [few[-1] + mc.GiB], 4 * mc.MiB, warmup=0).leaking
