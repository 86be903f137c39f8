"""The probe code that runs on CPU tensors, for real: the numerics comparison (a correct GEMM passes, a
perturbed one or NaN fails), SDPA backend discovery, and the optimizer-step comparison."""

import math

import pytest

torch = pytest.importorskip("torch")

from rocmcheck.probes import attention, compute  # noqa: E402
from rocmcheck.probes.catalog.gemm_numerics import BF16_MAX_REL_ERR  # noqa: E402
from rocmcheck.probes.catalog.gemm_numerics import judge as judge_gemm_numerics  # noqa: E402
from rocmcheck.probes.context import DeviceContext  # noqa: E402
from rocmcheck.probes.extensions import adamw_step_error  # noqa: E402
from rocmcheck.probes.measure import relative_error  # noqa: E402
from rocmcheck.result import Status  # noqa: E402

CPU = torch.device("cpu")
CTX = DeviceContext(vendor="cpu", name="CPU", arch="")


def test_a_correct_bf16_gemm_passes():
    data = compute.gemm_numerics(CPU, 128, 96, 256)
    assert 1e-4 < data["rel_err"] < BF16_MAX_REL_ERR  # bf16 rounding is visible but small
    assert judge_gemm_numerics(data, CTX).status is Status.PASS


def test_a_perturbed_gemm_fails():
    a = torch.randn(64, 128, dtype=torch.bfloat16)
    b = torch.randn(128, 64, dtype=torch.bfloat16)
    ref = a.double() @ b.double()
    out = a @ b
    out[3, 5] += 50.0  # one wrong element of a few thousand
    err = relative_error(out, ref)
    assert err > BF16_MAX_REL_ERR
    assert judge_gemm_numerics({"shape": [64, 64, 128], "rel_err": err, "nonfinite": 0}, CTX).status is Status.FAIL


def test_nan_in_the_output_makes_the_error_nan_and_fails():
    out = torch.ones(8, 8)
    out[0, 0] = float("nan")
    err = relative_error(out, torch.ones(8, 8))
    assert math.isnan(err)
    assert judge_gemm_numerics({"shape": [8, 8, 8], "rel_err": None, "nonfinite": 1}, CTX).status is Status.FAIL


def test_sdpa_backend_discovery_on_cpu():
    data = attention.sdpa(CPU, (1, 2, 64, 32), iters=2)
    assert data["backends"]["MATH"]["usable"]
    assert data["backends"]["MATH"]["rel_err"] < 1e-2
    assert not data["backends"]["EFFICIENT_ATTENTION"]["usable"]  # a CUDA/ROCm-only kernel
    assert data["backends"]["EFFICIENT_ATTENTION"]["why_not"]
    assert data["default_backend"] in data["backends"]


def test_optimizer_step_comparison_separates_adamw_from_look_alikes():
    same = adamw_step_error(lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, foreach=False), CPU)
    l2_not_decoupled = adamw_step_error(lambda ps: torch.optim.Adam(ps, lr=1e-3, weight_decay=0.01), CPU)
    other_beta = adamw_step_error(lambda ps: torch.optim.AdamW(ps, lr=1e-3, betas=(0.8, 0.999), weight_decay=0.01), CPU)
    assert same < 1e-6
    assert l2_not_decoupled > 1e-2 and other_beta > 1e-2
