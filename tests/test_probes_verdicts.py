"""Verdict thresholds on plain numbers (no GPU needed): GPU product lookup from the knowledge table, the
pass/warn/fail boundaries, and the fixes a person gets. Each judge is its probe's own (rocmcheck/probes/catalog)."""

import math

import pytest

from rocmcheck.fixes import FixKind
from rocmcheck.probes.catalog import (
    attention,
    collective,
    copy_bandwidth,
    deepspeed_ops,
    flash_attn,
    gemm_numerics,
    gemm_tflops,
    host_bandwidth,
    memory,
    triton,
)
from rocmcheck.probes.catalog.collective import bus_bandwidth_gbps
from rocmcheck.probes.catalog.gemm_tflops import GEMM_FAIL_OF_TYPICAL, GEMM_PASS_OF_TYPICAL
from rocmcheck.probes.context import DeviceContext
from rocmcheck.result import Status
from rocmcheck.units import GIB

judge_attention, judge_collective, judge_copy_bandwidth = attention.judge, collective.judge, copy_bandwidth.judge
judge_deepspeed_ops, judge_gemm_numerics = deepspeed_ops.judge, gemm_numerics.judge
judge_gemm_tflops, judge_host_bandwidth, judge_memory = gemm_tflops.judge, host_bandwidth.judge, memory.judge

H200 = DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90", count=1)
MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=8, hip="6.3.42131")
H200_TYPICAL = 989 * 0.80


def gemm(tflops, ctx):
    return judge_gemm_tflops({"tflops": tflops, "shape": [8192, 8192, 8192]}, ctx)


def test_the_measured_h200_rate_passes():
    r = gemm(778.4, H200)  # gpu-baselines-h200.json, torch 2.11
    assert r.status is Status.PASS and r.data["peak_tflops"] == 989
    assert r.data["ratio"] == pytest.approx(778.4 / H200_TYPICAL, rel=1e-3)


@pytest.mark.parametrize("ctx, typical", [(H200, H200_TYPICAL)])  # MI300X: AMD's RVS target (test_probe_floors.py)
def test_gemm_boundaries_against_the_typical_rate(ctx, typical):
    assert gemm(typical * GEMM_PASS_OF_TYPICAL + 0.1, ctx).status is Status.PASS
    assert gemm(typical * GEMM_PASS_OF_TYPICAL - 0.1, ctx).status is Status.WARN
    assert gemm(typical * GEMM_FAIL_OF_TYPICAL + 0.1, ctx).status is Status.WARN
    failed = gemm(typical * GEMM_FAIL_OF_TYPICAL - 0.1, ctx)
    assert failed.status is Status.FAIL and "far below" in failed.summary and failed.fix


def test_a_slow_mi300x_gets_the_rocm_blas_hint():
    r = gemm(250, MI300X)
    assert r.status is Status.FAIL and "TORCH_BLAS_PREFER_HIPBLASLT" in r.fix.text


def test_gemm_without_datasheet_figure_reports_the_number():
    r = gemm(100.0, DeviceContext(vendor="nvidia", name="NVIDIA GeForce RTX 3090", arch="sm_86"))
    assert r.status is Status.PASS and "no datasheet" in r.summary and r.data["tflops"] == 100.0


def test_product_is_found_from_the_smi_name_when_torch_name_is_generic():
    ctx = DeviceContext(vendor="amd", name="AMD Radeon Graphics", arch="gfx942", gpu_names=["AMD Instinct MI300X"])
    assert ctx.product().name == "MI300X"


@pytest.mark.parametrize("value", [float("nan"), None, 0.0, -1.0])
def test_gemm_rate_that_is_not_a_number_fails(value):
    assert gemm(value, H200).status is Status.FAIL


def test_copy_bandwidth_thresholds():
    data = lambda tb: {"tb_per_s": tb, "bytes": 2 << 30}  # noqa: E731
    assert judge_copy_bandwidth(data(4.2), H200).status is Status.PASS  # measured on the lent H200
    assert judge_copy_bandwidth(data(2.5), H200).status is Status.WARN
    assert judge_copy_bandwidth(data(1.0), H200).status is Status.FAIL


def test_host_bandwidth_thresholds():
    data = lambda h2d, d2h: {"h2d_gb_per_s": h2d, "d2h_gb_per_s": d2h, "bytes": 256 << 20}  # noqa: E731
    assert judge_host_bandwidth(data(50, 52), H200).status is Status.PASS
    assert judge_host_bandwidth(data(50, 11), H200).status is Status.WARN  # the slower direction decides
    r = judge_host_bandwidth(data(3, 3), MI300X)
    assert r.status is Status.FAIL and "amd-smi" in r.fix.text


def test_gemm_numerics_nan_never_passes():
    ok = judge_gemm_numerics({"shape": [2, 2, 2], "rel_err": 2e-3, "nonfinite": 0}, H200)
    assert ok.status is Status.PASS
    for data in ({"rel_err": None, "nonfinite": 4}, {"rel_err": math.nan}, {"rel_err": 2e-3, "nonfinite": 1}):
        r = judge_gemm_numerics({"shape": [2, 2, 2], **data}, H200)
        assert r.status is Status.FAIL and "NaN" in r.summary
    wrong = judge_gemm_numerics({"shape": [2, 2, 2], "rel_err": 0.3, "nonfinite": 0}, MI300X)
    assert wrong.status is Status.FAIL and "gfx942" in wrong.fix.why and wrong.fix.kind is FixKind.SHELL


def test_the_wheel_a_fix_names_follows_the_rocm_version_passed_down():
    ctx = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=8, rocm_version="6.3.3")
    wrong = judge_gemm_numerics({"shape": [2, 2, 2], "rel_err": 0.3, "nonfinite": 0}, ctx)
    assert wrong.fix.text.endswith("/whl/rocm6.3")
    unknown = judge_gemm_numerics({"shape": [2, 2, 2], "rel_err": 0.3, "nonfinite": 0}, MI300X)
    assert "/whl/rocm" in unknown.fix.text and not unknown.fix.text.endswith("/whl/rocm6.3")
    nvidia = judge_gemm_numerics({"shape": [2, 2, 2], "rel_err": 0.3, "nonfinite": 0},
                                 DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90", rocm_version="6.3.3"))
    assert "/whl/cu" in nvidia.fix.text


def _device(total_gib, free_gib, index=0):
    return {"index": index, "name": "x", "total_bytes": int(total_gib * GIB), "free_bytes": int(free_gib * GIB)}


def test_memory_matches_smi():
    ctx = DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90", smi_memory_bytes=[143771 * 2**20])
    r = judge_memory({"devices": [_device(139.8, 139.0)]}, ctx)
    assert r.status is Status.PASS and "matches" in r.summary


def test_memory_size_mismatch_warns_with_partition_hint():
    ctx = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", smi_memory_bytes=[206141652992])
    r = judge_memory({"devices": [_device(48.0, 47.5)]}, ctx)
    assert r.status is Status.WARN and "partition" in r.fix.text


def test_memory_taken_by_other_processes_warns():
    r = judge_memory({"devices": [_device(139.8, 60.0)]}, H200)
    assert r.status is Status.WARN and "79.8 GiB" in r.summary and "nvidia-smi" in r.fix.text


def _attention(default, backends, warnings=(), default_ms=0.1, math_ms=2.0, err=3e-3):
    return {"shape": [1, 32, 2048, 128], "backends": backends, "default_backend": default, "default_ms": default_ms,
            "math_ms": math_ms, "default_rel_err": err, "warnings": list(warnings)}


FLASH_OK = {"FLASH_ATTENTION": {"usable": True, "ms": 0.1, "rel_err": 3e-3},
            "MATH": {"usable": True, "ms": 2.0, "rel_err": 1e-3}}
ONLY_MATH = {"FLASH_ATTENTION": {"usable": False, "why_not": "RuntimeError: No available kernel. Aborting execution."},
             "MATH": {"usable": True, "ms": 2.0, "rel_err": 1e-3}}


def test_attention_with_flash_passes():
    r = judge_attention(_attention("FLASH_ATTENTION", FLASH_OK), H200)
    assert r.status is Status.PASS and r.data["speedup_vs_math"] == pytest.approx(20.0)


def test_silent_math_fallback_on_rocm_names_the_aotriton_switch():
    # torch's warning as a user logged it (RX 7900, transformers' LLaMA calling SDPA on ROCm).
    warning = ("Flash attention support on Navi31 GPU is still experimental. Enable it with "
               "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1. (Triggered internally at "
               "/pytorch/aten/src/ATen/native/transformers/hip/sdp_utils.cpp:207.)")
    ctx = DeviceContext(vendor="amd", name="Radeon RX 7900 XTX", arch="gfx1100", hip="6.3")
    r = judge_attention(_attention("MATH", ONLY_MATH, [warning]), ctx)
    assert r.status is Status.FAIL and "math" in r.summary
    assert r.fix.text == "export TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1"


def test_math_fallback_without_experimental_reason_asks_for_another_torch_build():
    r = judge_attention(_attention("MATH", ONLY_MATH), MI300X)
    assert r.status is Status.FAIL and "pip install" in r.fix.text


def test_attention_wrong_numbers_fail_and_no_speedup_warns():
    assert judge_attention(_attention("FLASH_ATTENTION", FLASH_OK, err=0.2), H200).status is Status.FAIL
    assert judge_attention(_attention("FLASH_ATTENTION", FLASH_OK, err=None), H200).status is Status.FAIL
    assert judge_attention(_attention("FLASH_ATTENTION", FLASH_OK, default_ms=1.9), H200).status is Status.WARN


def test_deepspeed_ops_states():
    ok = {"state": "ok", "rel_err": 1e-7}
    assert judge_deepspeed_ops({"ops": {"fused_adam": ok, "cpu_adam": ok}}, MI300X).status is Status.PASS
    r = judge_deepspeed_ops({"ops": {"fused_adam": ok, "cpu_adam": {"state": "not_built"}}}, MI300X)
    assert r.status is Status.WARN and "DS_BUILD_CPU_ADAM=1" in r.fix.text
    line = "csrc/includes/gemm_test.h:6:10: fatal error: cuda_profiler_api.h: No such file or directory"
    r = judge_deepspeed_ops({"ops": {"cpu_adam": {"state": "build_failed", "error_line": line}}}, MI300X)
    assert r.status is Status.FAIL and line in r.summary
    r = judge_deepspeed_ops({"ops": {"fused_adam": {"state": "ok", "rel_err": 0.05}}}, MI300X)
    assert r.status is Status.FAIL and "different AdamW step" in r.summary


def test_bus_bandwidth_like_nccl_tests():
    # 8 ranks, 1 GB in 10 ms: algbw 100 GB/s; all-reduce busbw x 2*7/8, all-gather x 7/8.
    assert bus_bandwidth_gbps("all_reduce", 1e9, 0.01, 8) == pytest.approx((100.0, 175.0))
    assert bus_bandwidth_gbps("all_gather", 1e9, 0.01, 8) == pytest.approx((100.0, 87.5))
    assert bus_bandwidth_gbps("all_reduce", 1e9, 0.01, 2) == pytest.approx((100.0, 100.0))
    with pytest.raises(ValueError):
        bus_bandwidth_gbps("all_reduce", 1e9, 0.0, 2)


def test_collective_with_wrong_data_fails():
    good = {"ok": True, "bytes": 1 << 28, "ms": 2.0, "algbw_gbps": 134.0, "busbw_gbps": 134.0}
    r = judge_collective({"world": 2, "backend": "nccl", "all_reduce": good, "all_gather": {**good, "ok": False}},
                         MI300X)
    assert r.status is Status.FAIL and "all_gather" in r.summary and "RCCL_MSCCL_ENABLE=0" in r.fix.text
    right = judge_collective({"world": 2, "backend": "nccl", "all_reduce": good, "all_gather": good}, H200)
    assert right.status is Status.PASS and right.id == "probe.collective"


def test_flash_attn_right_passes_and_a_wrong_gradient_fails_with_a_rebuild():
    good = {"version": "2.7.4", "backend": "ck", "out_rel_err": 3e-3, "dq_rel_err": 8e-3, "dk_rel_err": 8e-3,
            "dv_rel_err": 6e-3}
    assert flash_attn.judge(good, MI300X).status is Status.PASS
    r = flash_attn.judge({**good, "dq_rel_err": 0.4}, MI300X)
    assert r.status is Status.FAIL and "dq_rel_err" in r.summary and "FLASH_ATTENTION_TRITON_AMD_ENABLE" in r.fix.text
    r = flash_attn.judge({**good, "out_rel_err": None}, H200)  # NaN/inf: never passes
    assert r.status is Status.FAIL and "build-env" in r.fix.text and "sm_90" in r.fix.text


def test_triton_kernel_numerics():
    assert triton.judge({"version": "3.4", "rel_err": 1e-8, "n": 98309, "compile_s": 1.2}, H200).status is Status.PASS
    r = triton.judge({"version": "3.4", "rel_err": 0.5, "n": 98309, "compile_s": 1.2}, H200)
    assert r.status is Status.FAIL and r.id == "probe.triton"


def test_every_fix_a_judge_gives_is_a_fix_object():
    slow = judge_host_bandwidth({"h2d_gb_per_s": 3, "d2h_gb_per_s": 3}, H200)
    assert slow.fix.kind is FixKind.SHELL and slow.fix.text == "nvidia-smi -q -d PCI"
    nan = judge_gemm_numerics({"shape": [2, 2, 2], "rel_err": None, "nonfinite": 4}, H200)
    assert nan.fix.text == "rocmcheck probe gemm_numerics"
    built = judge_deepspeed_ops({"ops": {"cpu_adam": {"state": "build_failed", "error_line": "x"}}}, MI300X)
    assert built.fix.text.startswith("sudo apt-get install -y python3-dev ninja-build && DS_BUILD_FUSED_ADAM=1")
