"""probe.rms_norm and probe.rms_norm_llama on real CPU tensors: both forms pass, and each planted fault fails with
the output named: abnormally large weight gradients (the bf16 RMSNorm failure, with how many times too large), a
weight gradient summed in bf16, a wrong epsilon, NaN, a kernel that raises."""

import pytest

torch = pytest.importorskip("torch")

from rocmcheck.probes.catalog import rms_norm, rms_norm_llama  # noqa: E402
from rocmcheck.probes.context import DeviceContext  # noqa: E402
from rocmcheck.probes.norms import CPU_SHAPE, llama_rms_norm, rms_norm_probe  # noqa: E402
from rocmcheck.probes.numerics_verdicts import judge_norm  # noqa: E402
from rocmcheck.result import Status  # noqa: E402

CPU = torch.device("cpu")
CTX = DeviceContext(vendor="cpu", name="CPU", arch="")


def judged(norm, form="torch"):
    return judge_norm(f"probe.rms_norm{'_llama' if form == 'llama' else ''}", form,
                      rms_norm_probe(CPU, form, CPU_SHAPE, norm=norm), CTX)


def failing_outputs(verdict):
    return {c["group"] for c in verdict.data["cases"] if c["rel_err"] is None or c["rel_err"] > c["limit"]}


def test_both_forms_pass_in_bf16_and_fp32():
    for probe in (rms_norm, rms_norm_llama):
        verdict = probe.judge(probe.run_cpu(CPU, None), CTX)
        assert verdict.status is Status.PASS, verdict.summary
        assert {c["group"] for c in verdict.data["cases"]} == {
            f"{d} {o}" for d in ("bf16", "fp32") for o in ("y", "dx", "dw")}


class LargeWeightGradient(torch.autograd.Function):
    """The weight as it is, its gradient 50 times too large."""

    @staticmethod
    def forward(ctx, w):
        return w.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 50


def test_abnormally_large_weight_gradients_fail_and_say_how_large():
    verdict = judged(lambda x, w, eps: llama_rms_norm(x, LargeWeightGradient.apply(w), eps))
    assert verdict.status is Status.FAIL
    assert failing_outputs(verdict) == {"bf16 dw", "fp32 dw"}
    assert "weight gradient is 50x the size of the float64 one" in verdict.summary
    assert verdict.fix.kind.value == "note" and "LlamaRMSNorm" in verdict.fix.text  # the decomposed workaround


class Bf16WeightGradientSum(torch.autograd.Function):
    """y = w * x_hat, whose weight gradient is summed over the tokens one at a time in bf16 (no fp32 accumulator)."""

    @staticmethod
    def forward(ctx, x_hat, w):
        ctx.save_for_backward(x_hat)
        return x_hat * w

    @staticmethod
    def backward(ctx, grad):
        (x_hat,) = ctx.saved_tensors
        terms = (grad * x_hat).to(torch.bfloat16)
        total = torch.zeros(terms.shape[-1], dtype=torch.bfloat16)
        for row in terms:
            total = total + row
        return None, total.to(grad.dtype)


def test_a_weight_gradient_accumulated_in_bf16_fails_on_dw():
    def norm(x, w, eps):
        x_hat = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        y = Bf16WeightGradientSum.apply(x_hat.to(x.dtype).detach(), w)
        return y + (x_hat.to(x.dtype) - x_hat.to(x.dtype).detach()) * w.detach()  # dx as usual

    data = rms_norm_probe(CPU, "torch", (1024, 64), norm=norm)  # a long sum over the tokens
    verdict = judge_norm("probe.rms_norm", "torch", data, CTX)
    assert verdict.status is Status.FAIL
    assert "bf16 dw" in failing_outputs(verdict) <= {"bf16 dw", "fp32 dw"}  # y and dx stay right


def test_a_wrong_epsilon_fails_the_output():
    verdict = judged(lambda x, w, eps: llama_rms_norm(x, w, 0.1), form="llama")
    assert verdict.status is Status.FAIL and "y" in {g.split()[1] for g in failing_outputs(verdict)}
    assert verdict.fix.text.startswith("pip install --force-reinstall torch")  # the decomposed form: the wheel


def test_nan_and_a_raising_kernel_fail():
    nan = judged(lambda x, w, eps: llama_rms_norm(x, w, eps) * float("nan"))
    assert nan.status is Status.FAIL and "NaN/inf" in nan.summary

    def raises(x, w, eps):
        raise RuntimeError("HIP error: invalid device function")

    raised = judged(raises)
    assert raised.status is Status.FAIL and "raised" in raised.summary and "invalid device function" in raised.summary
