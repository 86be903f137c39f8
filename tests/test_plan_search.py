"""The planner-first batch search on simulated memory curves: its answer is the exhaustive search's, and it
takes few tries when the planner is right.

A curve is what a GPU shows: device peak = fixed + slope x micro-batch; a try whose peak passes the device's
total memory is an out-of-memory (no peak reported), one between the budget (95%) and the total runs "over"
with its peak. The planner's curve is the real one with its fixed part and slope off by given factors."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rocmcheck.plan.search import Trial, search_from_estimate

TOTAL = 100.0
BUDGET = 0.95 * TOTAL
FIXED = (5, 20, 50, 80)  # model states as a share of the GPU: 5% (1.1B) ... 80% (a model that barely fits)
SLOPE = (0.04, 0.3, 1.0, 2.2, 3.7, 9.0, 20.0, 40.0)  # per-sample memory: answers from 1 to 1000
FIXED_ERR = (0.9, 1.0, 1.1)  # the planner's fixed part (states, context) within 10%


def simulate(fixed: float, slope: float, fixed_err: float, slope_err: float):
    def real(b: int) -> float:
        return fixed + slope * b

    def try_batch(b: int) -> Trial:
        peak = real(b)
        if peak > TOTAL:
            return Trial(b, "oom", error="OutOfMemoryError: CUDA out of memory.")
        return Trial(b, "ok" if peak <= BUDGET else "over", device_peak=int(peak * 1000) / 1000)

    def predict(b: int) -> float:
        return fixed * fixed_err + slope * slope_err * b

    exhaustive = 0  # every size from 1 up until the first that does not fit
    while exhaustive < 1024 and try_batch(exhaustive + 1).outcome == "ok":
        exhaustive += 1
    guess = 0  # the planner's answer: its largest size within the budget
    while guess < 1024 and predict(guess + 1) <= BUDGET:
        guess += 1
    out = search_from_estimate(try_batch, guess, predict, BUDGET, total=TOTAL)
    return guess, exhaustive, out


def log_bound(answer: int) -> int:
    """ceil(log2(answer)) + 2; at least 3: with a wrong guess, answer 1 needs 1 to fit and 2 not, after the guess."""
    return max(3, math.ceil(math.log2(max(answer, 1))) + 2)


def cases(slope_errors):
    return list(itertools.product(FIXED, SLOPE, FIXED_ERR, slope_errors))


NEAR = (0.7, 0.8, 0.9, 0.95, 1.0, 1.03, 1.1, 1.2, 1.3, 1.5)
FAR = (0.25, 0.4, 0.5, 0.6, 2.0, 3.0, 4.0)


def test_answer_equals_exhaustive_search_on_the_whole_grid():
    """Every curve of the grid (model states 5-80% of the GPU, answers 1-1000, the planner off by 0.25-4x), in one
    test: a failure names the case."""
    for case in cases(NEAR + FAR):
        _answer_equals_exhaustive(*case)


@settings(max_examples=200, deadline=None)
@given(fixed=st.floats(1, 90), slope=st.floats(0.02, 60), fixed_err=st.floats(0.8, 1.2),
       slope_err=st.floats(0.2, 5.0))
def test_answer_equals_exhaustive_search_on_any_curve(fixed, slope, fixed_err, slope_err):
    _answer_equals_exhaustive(fixed, slope, fixed_err, slope_err)


def _answer_equals_exhaustive(fixed, slope, fixed_err, slope_err):
    guess, exhaustive, out = simulate(fixed, slope, fixed_err, slope_err)
    assert out.best == exhaustive, ((fixed, slope, fixed_err, slope_err), [(t.micro_batch, t.outcome)
                                                                           for t in out.trials])
    tried = {t.micro_batch: t.outcome for t in out.trials}
    if exhaustive < 1024:  # the answer is proven: it fitted, and the next size did not
        assert tried.get(exhaustive + 1) in ("over", "oom") or exhaustive + 1 in tried
        assert exhaustive == 0 or tried[exhaustive] == "ok"


def test_at_most_three_tries_when_the_planner_is_right():
    """Right: the planner's answer within one of the real one, its per-sample memory within 30%."""
    right = [c for c in cases(tuple(e for e in NEAR if 0.7 <= e <= 1.3))
             if abs(simulate(*c)[0] - simulate(*c)[1]) <= 1]
    assert len(right) > 300
    for c in right:
        guess, exhaustive, out = simulate(*c)
        assert len(out.trials) <= 3, (c, guess, exhaustive, [(t.micro_batch, t.outcome) for t in out.trials])


def test_exactly_right_takes_two_tries():
    for c in cases((1.0,)):
        guess, exhaustive, out = simulate(*c)
        if guess == exhaustive and 0 < exhaustive < 1024:
            assert [t.micro_batch for t in out.trials] == [guess, guess + 1]


def test_planner_off_by_up_to_half_stays_within_log_bound():
    """Per-sample memory 0.7x-1.5x the real one: at most ceil(log2(answer)) + 2 tries, but for one case in
    the grid that takes one more (a model using 80% of the GPU for its states, whose planner fixed part is 10%
    low and slope 30% low: the first peaks mislead by two samples). Recorded, not hidden."""
    over = []
    for c in cases(NEAR):
        guess, exhaustive, out = simulate(*c)
        if len(out.trials) > log_bound(exhaustive):
            over.append((c, len(out.trials) - log_bound(exhaustive)))
    assert len(over) <= 1 and all(extra <= 1 for _, extra in over), over


def test_planner_far_off_still_beats_doubling():
    """Per-sample memory 4x too low or too high: the exhaustive answer, within ceil(log2(answer)) + 4 tries
    (doubling from 1 then bisecting takes about 2 log2(answer))."""
    for c in cases(FAR):
        guess, exhaustive, out = simulate(*c)
        assert len(out.trials) <= log_bound(exhaustive) + 2, (c, [(t.micro_batch, t.outcome) for t in out.trials])


def test_the_two_h200_cases():
    """Full fine-tunes on an H200, in % of its memory: the 1.1B at seq 2048 (states ~4%, ~6 GiB = 4.3% per
    sample, answer 21) and the 7B at seq 4096 with checkpointing (states ~74%, ~2% per sample, answer 10):
    the planner's slope 3% off either way, at most 3 tries."""
    for fixed, slope, answer in ((4.3, 4.3, 21), (74.0, 2.0, 10)):
        for err in (0.97, 1.0, 1.03):
            guess, exhaustive, out = simulate(fixed, slope, 1.0, err)
            assert exhaustive == answer and out.best == answer
            assert len(out.trials) <= 3


def test_stops_on_an_error_and_at_the_cap():
    def broken(b: int) -> Trial:
        return Trial(b, "error", error="RuntimeError: HIP error: invalid device function")
    out = search_from_estimate(broken, 8, lambda b: 10 + b, 95, total=100)
    assert out.best == 0 and "invalid device function" in out.stop

    def roomy(b: int) -> Trial:
        return Trial(b, "ok", device_peak=1 + 0.001 * b)
    out = search_from_estimate(roomy, 30, lambda b: 1 + 0.01 * b, 95, total=100, max_micro_batch=64)
    assert out.best == 64 and out.stop == "reached the cap of 64"
    out = search_from_estimate(roomy, 30, lambda b: 1 + 0.5 * b, 95, total=100, max_trials=2)
    assert out.stop == "stopped after 2 tries"
