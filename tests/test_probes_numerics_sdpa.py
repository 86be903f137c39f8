"""probe.sdpa_* on real CPU tensors: the flash and math backends run forward and backward and pass; the backends
this torch cannot run here are skips with torch's reason; and each planted fault fails with the output named: a
perturbed output, attention that ignores the causal mask, a wrong query gradient, NaN, a backend that raises."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from rocmcheck.probes.attention_grads import CPU_SHAPES, causal_sdpa, sdpa_backend  # noqa: E402
from rocmcheck.probes.catalog import sdpa_cudnn, sdpa_efficient, sdpa_flash, sdpa_math  # noqa: E402
from rocmcheck.probes.context import DeviceContext  # noqa: E402
from rocmcheck.probes.numerics_verdicts import judge_attention  # noqa: E402
from rocmcheck.result import Status  # noqa: E402

CPU = torch.device("cpu")
CTX = DeviceContext(vendor="cpu", name="CPU", arch="")
MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942")


def wrong(verdict):
    return [c for c in verdict.data["cases"] if c["rel_err"] is None or c["rel_err"] > c["limit"]]


def test_flash_and_math_pass_forward_and_backward_on_the_cpu():
    for probe in (sdpa_flash, sdpa_math):
        data = probe.run_cpu(CPU, None)
        verdict = probe.judge(data, CTX)
        assert verdict.status is Status.PASS, verdict.summary
        assert {c["what"].split()[1] for c in verdict.data["cases"]} == {"out", "dq", "dk", "dv"}
        assert {c["group"].split()[0] for c in verdict.data["cases"]} == {"bf16", "fp16"}
        assert "forward+backward" in verdict.summary


def test_a_backend_that_cannot_run_here_is_a_skip_with_torchs_reason():
    for probe in (sdpa_efficient, sdpa_cudnn):
        verdict = probe.judge(probe.run_cpu(CPU, None), CTX)
        assert verdict.status is Status.SKIP
        assert "does not run here" in verdict.summary and "No viable backend" in verdict.summary


def judged(attend, ctx=CTX, backend="flash"):
    return judge_attention(f"probe.sdpa_{backend}", backend, sdpa_backend(CPU, backend, CPU_SHAPES, attend), ctx)


def test_a_perturbed_output_fails_with_the_fix_that_keeps_sdpa_off_that_backend():
    verdict = judged(lambda q, k, v: causal_sdpa(q, k, v) * 1.1, MI300X)
    assert verdict.status is Status.FAIL and "SDPA flash forward+backward is wrong" in verdict.summary
    assert any(c["what"].split()[1] == "out" for c in wrong(verdict))
    assert verdict.fix.kind.value == "note" and "enable_flash_sdp(False)" in verdict.fix.text


def test_attention_that_ignores_the_causal_mask_fails():
    verdict = judged(lambda q, k, v: F.scaled_dot_product_attention(q, k, v))
    assert verdict.status is Status.FAIL
    assert {c["what"].split()[1] for c in wrong(verdict)} == {"out", "dq", "dk", "dv"}


def test_a_wrong_query_gradient_fails_on_dq_alone():
    def scaled_dq(q, k, v):
        q.register_hook(lambda grad: grad * 1.2)
        return causal_sdpa(q, k, v)

    verdict = judged(scaled_dq)
    assert verdict.status is Status.FAIL
    assert {c["what"].split()[1] for c in wrong(verdict)} == {"dq"}
    assert "dq" in verdict.summary


def test_nan_in_the_output_fails():
    def poisoned(q, k, v):
        out = causal_sdpa(q, k, v)
        return out.index_fill(2, torch.tensor([3]), float("nan"))

    verdict = judged(poisoned, backend="math")
    assert verdict.status is Status.FAIL and "NaN/inf" in verdict.summary
    assert verdict.fix.text.startswith("pip install --force-reinstall torch")  # the math path: the GEMM probes


def test_a_backend_that_raises_fails_naming_the_error():
    def raises(q, k, v):
        raise RuntimeError("HIP error: invalid device function")

    verdict = judged(raises, MI300X)
    assert verdict.status is Status.FAIL and "raised" in verdict.summary
    assert "invalid device function" in verdict.summary


def test_a_backward_that_raises_fails():
    class Broken(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError("HIP error: an illegal memory access was encountered")

    verdict = judged(lambda q, k, v: Broken.apply(causal_sdpa(q, k, v)))
    assert verdict.status is Status.FAIL and "backward: RuntimeError" in verdict.summary


@pytest.mark.parametrize("probe, switch", [(sdpa_flash, "enable_flash_sdp"),
                                           (sdpa_efficient, "enable_mem_efficient_sdp"),
                                           (sdpa_cudnn, "enable_cudnn_sdp"), (sdpa_math, None)])
def test_every_backends_judge_fails_a_perturbed_run_with_its_own_fix(probe, switch):
    """The fused backends do not run on the CPU: their judges get a perturbed run of the CPU's kernels."""
    data = sdpa_backend(CPU, "math", CPU_SHAPES, lambda q, k, v: causal_sdpa(q, k, v) + 0.5)
    verdict = probe.judge(data, MI300X)
    assert verdict.status is Status.FAIL and verdict.id == probe.ID
    if switch:
        assert switch in verdict.fix.text
    else:
        assert "probe.gemm_blaslt" in verdict.fix.why
    assert probe.judge(sdpa_backend(CPU, "math", CPU_SHAPES), MI300X).status is Status.PASS
