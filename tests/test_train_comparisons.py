"""The DeepSpeed / multi-rank verdicts as pure functions. The loss curve is the real CPU reference curve
shipped with the bundled model (the plain run's); the departures are the failure shapes each check is for."""

from __future__ import annotations

import json

import pytest

from rocmcheck.result import Status
from rocmcheck.train.comparisons import (
    OFFLOAD_ABSURD_RATIO,
    PARITY_STEP_TOL,
    check_deepspeed_parity,
    check_offload_cost,
    check_rank_agreement,
    parity_tolerance,
)
from rocmcheck.train.config import BUNDLED_MODEL

PLAIN = json.loads((BUNDLED_MODEL / "reference_curves.json").read_text())["curves"]["cpu"]["loss"]


def test_parity_tolerance_scales_with_the_first_loss():
    assert parity_tolerance(PLAIN) == pytest.approx(PARITY_STEP_TOL * PLAIN[0])
    assert parity_tolerance([0.5, 0.4]) == pytest.approx(PARITY_STEP_TOL)  # never below the tolerance x 1


def test_parity_passes_bf16_noise_and_fails_a_curve_that_stalls():
    noisy = [v + (0.08 if i % 2 else -0.08) for i, v in enumerate(PLAIN)]  # the size of the largest measured step gap
    ok = check_deepspeed_parity(noisy, PLAIN, "ZeRO-3")
    assert ok.status is Status.PASS and ok.data["max_step_diff"] == pytest.approx(0.08, abs=1e-6)
    # A run that stops learning half way (e.g. a gradient shard dropped) ends far above the plain curve.
    stalled = PLAIN[:40] + [PLAIN[40]] * (len(PLAIN) - 40)
    bad = check_deepspeed_parity(stalled, PLAIN, "ZeRO-3")
    assert bad.status is Status.FAIL and bad.fix
    assert bad.data["steps_out"] and min(bad.data["steps_out"]) >= 40
    assert any("window mean" in e for e in bad.evidence)


def test_parity_skips_when_not_comparable():
    assert check_deepspeed_parity(PLAIN, PLAIN, "ZeRO-2", why_not="own scheduler").status is Status.SKIP
    assert check_deepspeed_parity(PLAIN[:30], PLAIN, "ZeRO-2").status is Status.SKIP
    nan = check_deepspeed_parity(PLAIN[:5] + [float("nan")] + PLAIN[6:], PLAIN, "ZeRO-2")
    assert nan.status is Status.FAIL and nan.data["worst_step"] == 5


def test_offload_cost_is_a_number_and_warns_only_when_absurd():
    base = [0.5, 0.4, 0.3] + [0.100] * 20
    seed_like = check_offload_cost([0.9, 0.8, 0.7] + [0.118] * 20, base, "ZeRO-3 + offload", on_gpu=True)
    assert seed_like.status is Status.PASS and seed_like.data["cost_percent"] == pytest.approx(18.0)
    assert "+18%" in seed_like.summary
    absurd = check_offload_cost([0.9] * 3 + [0.100 * (OFFLOAD_ABSURD_RATIO + 0.5)] * 20, base, "ZeRO-3 + offload",
                                on_gpu=True)
    assert absurd.status is Status.WARN and "pin_memory" in absurd.fix.why
    cpu = check_offload_cost(base, base, "ZeRO-3 + offload", on_gpu=False)
    assert cpu.status is Status.PASS and any("host memory" in e for e in cpu.evidence)
    assert check_offload_cost([], base, "x", on_gpu=True).status is Status.SKIP


def ranks(n: int = 2, steps: int = 12) -> list[dict]:
    out = []
    for r in range(n):
        out.append({"global_loss": PLAIN[:steps], "local_loss": [v + 0.01 * (r + 1) for v in PLAIN[:steps]],
                    "grad_norm": [1.0 + i for i in range(steps)], "weights": 1234.5})
    return out


def test_rank_agreement_passes_when_ranks_agree():
    res = check_rank_agreement(ranks(), weights_checked=True)
    assert res.status is Status.PASS and "weights identical" in " ".join(res.evidence)
    assert check_rank_agreement(ranks(1), weights_checked=True).status is Status.SKIP


@pytest.mark.parametrize("break_it, words", [
    (lambda rs: rs[1]["global_loss"].__setitem__(7, rs[1]["global_loss"][7] + 1e-6),
     "global loss differs between ranks"),
    (lambda rs: rs[1]["grad_norm"].__setitem__(3, 5.0), "not synchronised"),
    (lambda rs: rs[1].__setitem__("local_loss", list(rs[0]["local_loss"])), "not sharded"),
    (lambda rs: rs[1].__setitem__("weights", 1234.6), "weights differ"),
    (lambda rs: rs[1].update(global_loss=rs[1]["global_loss"][:-1], local_loss=rs[1]["local_loss"][:-1],
                             grad_norm=rs[1]["grad_norm"][:-1]), "different numbers of steps"),
])
def test_rank_agreement_fails_on_each_kind_of_disagreement(break_it, words):
    rs = ranks()
    break_it(rs)
    res = check_rank_agreement(rs, weights_checked=True)
    assert res.status is Status.FAIL and words in " ".join(res.evidence) and res.fix


def test_rank_agreement_ignores_weights_under_zero3_and_a_missing_norm():
    rs = ranks()
    rs[1]["weights"] = None
    for r in rs:
        r["grad_norm"] = [float("nan")] * len(r["grad_norm"])
    assert check_rank_agreement(rs, weights_checked=False).status is Status.PASS
