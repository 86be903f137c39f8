"""probe.adamw_fused and probe.adamw_foreach on real CPU tensors: torch's fused and foreach AdamW match AdamW's
formula in float64; the formula itself matches torch's per-tensor AdamW run in float64; and each planted fault
fails, named by what it computes: an optimizer that skips the weight decay, Adam's coupled L2 decay, another
beta2, one that raises, one that keeps no Adam state."""

import pytest

torch = pytest.importorskip("torch")

from rocmcheck.probes import optimizer_steps  # noqa: E402
from rocmcheck.probes.catalog import adamw_foreach, adamw_fused  # noqa: E402
from rocmcheck.probes.context import DeviceContext  # noqa: E402
from rocmcheck.probes.numerics_verdicts import judge_adamw  # noqa: E402
from rocmcheck.probes.optimizer_steps import BETAS, CPU_SIZES, EPS, LR, STEPS, WEIGHT_DECAY, adamw_probe  # noqa: E402
from rocmcheck.probes.tolerance import ADAMW_CHANGE_RMS, ADAMW_MAX_REL_ERR  # noqa: E402
from rocmcheck.result import Status  # noqa: E402

CPU = torch.device("cpu")
CTX = DeviceContext(vendor="cpu", name="CPU", arch="")


def judged(make, form="fused"):
    return judge_adamw(f"probe.adamw_{form}", form, adamw_probe(CPU, form, CPU_SIZES, make=make), CTX)


def test_fused_and_foreach_pass_and_the_change_is_the_size_the_limit_assumes():
    for probe in (adamw_fused, adamw_foreach):
        data = probe.run_cpu(CPU, None)
        verdict = probe.judge(data, CTX)
        assert verdict.status is Status.PASS, verdict.summary
        assert data["change"] < ADAMW_MAX_REL_ERR / 10 and data["matches"] == []
        assert data["change_rms"] == pytest.approx(ADAMW_CHANGE_RMS, rel=0.2)  # what tolerance.py derives from


def test_the_float64_formula_is_torchs_own_adamw():
    p0 = [torch.randn(7, 5, dtype=torch.float64), torch.randn(3, dtype=torch.float64)]
    grads = [[torch.randn_like(p) for p in p0] for _ in range(STEPS)]
    params = [torch.nn.Parameter(p.clone()) for p in p0]
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, foreach=False)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = g.clone()
        opt.step()
    ref_p, ref_m, ref_v = optimizer_steps.reference_adamw(p0, grads)
    for p, rp, rm, rv in zip(params, ref_p, ref_m, ref_v):
        assert torch.allclose(p.detach(), rp, rtol=1e-12, atol=1e-14)
        assert torch.allclose(opt.state[p]["exp_avg"], rm, rtol=1e-12, atol=1e-14)
        assert torch.allclose(opt.state[p]["exp_avg_sq"], rv, rtol=1e-12, atol=1e-14)


def test_an_optimizer_that_skips_weight_decay_fails_and_is_named():
    verdict = judged(lambda ps: torch.optim.AdamW(ps, lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0, fused=True))
    assert verdict.status is Status.FAIL
    assert verdict.summary.endswith("the update is AdamW without its weight decay")
    assert verdict.fix.kind.value == "note" and "foreach" in verdict.fix.text


def test_coupled_l2_decay_is_not_adamw():
    verdict = judged(lambda ps: torch.optim.Adam(ps, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY),
                     form="foreach")
    assert verdict.status is Status.FAIL and "Adam with L2 weight decay" in verdict.summary


def test_another_beta2_fails_on_the_second_moment():
    verdict = judged(lambda ps: torch.optim.AdamW(ps, lr=LR, betas=(0.9, 0.99), eps=EPS, weight_decay=WEIGHT_DECAY))
    assert verdict.status is Status.FAIL
    wrong = {c["what"].split(" after ")[0] for c in verdict.data["cases"] if c["rel_err"] > c["limit"]}
    assert "exp_avg_sq" in wrong and "exp_avg" not in wrong


def test_an_optimizer_that_raises_or_keeps_no_adam_state_fails():
    def refuses(ps):
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")

    raised = judged(refuses)
    assert raised.status is Status.FAIL and "raised" in raised.summary and "fused=True" in raised.summary
    sgd = judged(lambda ps: torch.optim.SGD(ps, lr=LR), form="foreach")
    assert sgd.status is Status.FAIL and "no exp_avg" in sgd.summary
