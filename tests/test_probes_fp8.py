"""probe.fp8_gemm: the arch -> fp8 formats choice (torch's own _scaled_mm gate), the limits derived from the fp8
mantissa and K, the runner on torch's real CPU fp8 kernels (healthy, a kernel reading fnuz bits as OCP, a broken
cast), its skips, and the judge's rate verdict against bf16."""

from __future__ import annotations

import pytest
import torch

from rocmcheck.probes import fp8_gemm as runner
from rocmcheck.probes.catalog import fp8_gemm as probe
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.fp8_formats import (
    FNUZ,
    FP8_OVER_BF16_FLOOR,
    OCP,
    cuda_capability,
    fp8_formats,
    fp8_gemm_limit,
    fp8_quantized_limit,
)
from rocmcheck.probes.spec import ProbeSkip
from rocmcheck.probes.stage import run_stage
from rocmcheck.result import Status

CPU = torch.device("cpu")
H100 = DeviceContext(vendor="nvidia", name="NVIDIA H100 80GB HBM3", arch="sm_90", count=1)
MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=1)
SMALL = dict(shape=runner.CPU_SHAPE, rate_size=runner.CPU_RATE_SIZE, iters=1, warmup_s=0.0)


def test_each_arch_gets_its_own_fp8_family_or_none():
    assert fp8_formats("gfx942") == FNUZ and fp8_formats("gfx942:sramecc+:xnack-") == FNUZ
    assert fp8_formats("gfx950") == OCP and fp8_formats("sm_90") == OCP and fp8_formats("sm_89") == OCP
    assert fp8_formats("sm_120") == OCP and cuda_capability("sm_120") == (12, 0)
    assert all(fp8_formats(a) is None for a in ("gfx90a", "gfx908", "sm_80", "sm_86", "", "cpu"))
    assert (FNUZ.e4m3, FNUZ.e5m2, OCP.e4m3, OCP.e5m2) == ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3fn",
                                                          "float8_e5m2")


def test_the_limits_follow_the_mantissa_bits_and_k():
    # 4 x (bf16 output rounding 2^-8 + sqrt(4096) x the 14-bit accumulator's 2^-14)
    assert fp8_gemm_limit(4096) == pytest.approx(4 * (2 ** -8 + 64 * 2 ** -14))
    assert fp8_gemm_limit(16384) > fp8_gemm_limit(4096)
    e4m3 = fp8_quantized_limit("float8_e4m3fnuz", "float8_e4m3fnuz", 4096)
    assert e4m3 == pytest.approx(2 ** -4 + 2 ** -4 + fp8_gemm_limit(4096))
    assert fp8_quantized_limit("float8_e5m2", "float8_e4m3fn", 4096) - e4m3 == pytest.approx(2 ** -3 - 2 ** -4)


def test_a_real_cpu_child_run_passes_in_ocp_formats():
    r = run_stage(timeout_s=120, only={"fp8_gemm"}, cpu=True)[0]
    assert r.status == Status.PASS, (r.summary, r.evidence)
    assert r.data["family"] == "ocp" and set(r.data["cases"]) == set(runner.CASES)
    assert all(c["rel_err"] < r.data["limit"] for c in r.data["cases"].values())


def test_the_fnuz_formats_run_and_pass_on_the_cpu_kernels():
    data = runner.fp8_gemm(CPU, "gfx942", **SMALL)
    assert data["e4m3"] == "float8_e4m3fnuz" and data["cases"]["backward"]["a"] == "float8_e5m2fnuz"
    r = probe.judge(data, DeviceContext(vendor="cpu"))
    assert r.status == Status.PASS, (r.summary, r.evidence)


def test_a_kernel_that_reads_fnuz_bits_as_ocp_fails(monkeypatch):
    real = torch._scaled_mm
    as_ocp = {torch.float8_e4m3fnuz: torch.float8_e4m3fn, torch.float8_e5m2fnuz: torch.float8_e5m2}
    monkeypatch.setattr(torch, "_scaled_mm", lambda a, b, **kw: real(a.view(as_ocp[a.dtype]), b.view(as_ocp[b.dtype]),
                                                                      **kw))
    r = probe.judge(runner.fp8_gemm(CPU, "gfx942", **SMALL), MI300X)
    assert r.status == Status.FAIL and "forward (float8_e4m3fnuz x float8_e4m3fnuz)" in r.summary
    # each value off by 2x (exponent bias 8 vs 7), and fnuz's largest e4m3 value is OCP's NaN
    assert all(c["rel_err"] is None or c["rel_err"] > 0.5 for c in r.data["cases"].values())


def test_a_broken_cast_to_fp8_is_caught_against_the_operands_before_the_cast(monkeypatch):
    real = runner._quantize

    def flushing(x, dtype):  # a cast that flushes every value under a quarter of the largest to zero
        q, scale = real(x, dtype)
        return torch.where(q.float().abs() < torch.finfo(dtype).max / 4, 0.0, q.float()).to(dtype), scale

    monkeypatch.setattr(runner, "_quantize", flushing)
    r = probe.judge(runner.fp8_gemm(CPU, "sm_90", **SMALL), H100)
    assert r.status == Status.FAIL and "wrong after the cast to fp8" in r.summary
    assert all(c["rel_err"] < r.data["limit"] for c in r.data["cases"].values())  # the kernel itself is right


def test_it_skips_on_an_arch_without_fp8_and_on_a_torch_without_scaled_mm(monkeypatch):
    with pytest.raises(ProbeSkip, match="gfx90a has no fp8 GEMM in torch._scaled_mm"):
        runner.fp8_gemm(CPU, "gfx90a")
    with pytest.raises(ProbeSkip, match="sm_80 has no fp8 GEMM"):
        runner.fp8_gemm(CPU, "sm_80")
    monkeypatch.delattr(torch, "_scaled_mm")
    with pytest.raises(ProbeSkip, match=r"has no torch._scaled_mm"):
        runner.fp8_gemm(CPU, "sm_90")


def _measured(**rate):
    case = {"a": "float8_e4m3fn", "b": "float8_e4m3fn", "fast_accum": False, "rel_err": 3e-3,
            "quantized_rel_err": 0.04, "nonfinite": 0}
    return {"arch": "sm_90", "family": "ocp", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
            "shape": [2048, 2048, 4096], "cases": {"forward": case, "backward": {**case, "a": "float8_e5m2"}},
            "rate": {"shape": [8192] * 3, **rate}}


def test_the_rate_against_bf16_in_the_same_run():
    ok = probe.judge(_measured(fp8_tflops=1250.0, bf16_tflops=700.0), H100)
    assert ok.status == Status.PASS and ok.data["ratio"] == pytest.approx(1250 / 700, abs=1e-3)
    slow = probe.judge(_measured(fp8_tflops=650.0, bf16_tflops=700.0), H100)
    assert slow.status == Status.WARN and f"expected >= {FP8_OVER_BF16_FLOOR:g}x" in slow.summary
    assert slow.fix is not None and "nvidia-smi" in slow.fix.text
    refused = probe.judge(_measured(bf16_tflops=700.0, error="RuntimeError: no fp8 kernel"), MI300X)
    assert refused.status == Status.WARN and "no fp8 kernel" in refused.summary


def test_a_case_that_raises_fails_naming_the_pair():
    data = _measured(fp8_tflops=1250.0, bf16_tflops=700.0)
    data["cases"]["backward"] = {"a": "float8_e5m2fnuz", "b": "float8_e4m3fnuz", "fast_accum": False,
                                 "error": "RuntimeError: HIPBLAS_STATUS_NOT_SUPPORTED"}
    r = probe.judge(data, MI300X)
    assert r.status == Status.FAIL and "backward (float8_e5m2fnuz x float8_e4m3fnuz) fails" in r.summary
    assert "HIPBLAS_STATUS_NOT_SUPPORTED" in r.summary and r.fix is not None
