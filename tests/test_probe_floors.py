"""The probes judge an AMD product against the floor AMD's own validation fails it at (validation_floors.json, read
from RVS's gst configurations and TransferBench's healthcheck), named with its source; products without one keep
the datasheet rules (tests/test_probes_verdicts.py)."""

from __future__ import annotations

import pytest

from rocmcheck.knowledge.floors import validation_floor
from rocmcheck.probes.catalog import copy_bandwidth, gemm_tflops, host_bandwidth, p2p_matrix
from rocmcheck.probes.catalog.gemm_tflops import GEMM_FAIL_OF_RVS_TARGET, GEMM_PASS_OF_RVS_TARGET
from rocmcheck.probes.context import DeviceContext
from rocmcheck.result import Status

MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=8, hip="6.3.42131")
MI355X = DeviceContext(vendor="amd", name="AMD Instinct MI355X", arch="gfx950", count=8, hip="7.0.51830")
MI350X_BY_SMI = DeviceContext(vendor="amd", name="AMD Radeon Graphics", arch="gfx950",
                              gpu_names=["AMD Instinct MI350X"])


def _gemm(tflops: float, ctx: DeviceContext):
    return gemm_tflops.judge({"tflops": tflops, "shape": [8192, 8192, 8192]}, ctx)


@pytest.mark.parametrize("ctx, target", [(MI300X, 552.0), (MI355X, 956.0), (MI350X_BY_SMI, 956.0)])
def test_gemm_against_the_rvs_target(ctx, target):
    passed = _gemm(target * GEMM_PASS_OF_RVS_TARGET + 0.1, ctx)
    assert passed.status is Status.PASS and f"RVS target {target:,.0f}" in passed.summary
    assert any("ROCmValidationSuite" in line for line in passed.evidence)
    assert _gemm(target * GEMM_PASS_OF_RVS_TARGET - 0.1, ctx).status is Status.WARN
    assert _gemm(target * GEMM_FAIL_OF_RVS_TARGET - 0.1, ctx).status is Status.FAIL


def test_gfx950_no_longer_passes_on_a_third_of_its_peak():
    """Before the RVS row, a MI355X passed any rate above 30% of its 2,517 TFLOP/s peak (755)."""
    assert _gemm(760.0, MI355X).status is Status.WARN


def test_device_copy_against_transferbench():
    floor_tbps = 2045 * 0.97 * 2 / 1000  # TransferBench's copy limit, bytes counted read and written here
    copy = lambda tb: copy_bandwidth.judge({"tb_per_s": tb, "bytes": 2 << 30}, MI300X)  # noqa: E731
    ok = copy(floor_tbps + 0.01)
    assert ok.status is Status.PASS and ok.data["floor_tb_per_s"] == pytest.approx(floor_tbps, abs=1e-3)
    assert "TransferBench" in ok.evidence[0]
    # 3.3 TB/s passed before (60% of the 5.3 TB/s datasheet); AMD's health check fails it
    assert copy(3.3).status is Status.WARN
    assert copy(1.5).status is Status.FAIL


def test_host_copies_against_the_nearest_numa_node_floor():
    host = lambda h2d, d2h: host_bandwidth.judge({"h2d_gb_per_s": h2d, "d2h_gb_per_s": d2h}, MI300X)  # noqa: E731
    assert host(55.0, 53.0).status is Status.PASS
    slow = host(25.0, 53.0)  # passed at the old 20 GB/s mark
    assert slow.status is Status.WARN and "host->device 25.0 < 48.5" in slow.summary and "numactl" in slow.fix.text
    assert host(3.0, 3.0).status is Status.FAIL


def test_xgmi_pair_against_transferbench():
    pairs = [{"src": a, "dst": b, "gbps": 40.0 if (a, b) == (0, 1) else 50.0, "latency_us": 9.0, "ok": True,
              "peer_access": True} for a in range(4) for b in range(4) if a != b]
    data = {"gpus": 4, "pairs": pairs, "links": {"kinds": {f"{p['src']}-{p['dst']}": "xgmi" for p in pairs}}}
    r = p2p_matrix.judge(data, MI300X)  # 40 GB/s passed the old 32.9 floor
    assert r.status is Status.WARN and "0->1 40.0 GB/s over XGMI (< 43.65)" in r.summary
    assert any("TransferBench" in line for line in r.evidence)


def test_products_without_a_floor_have_none():
    assert validation_floor("H200", "gemm_bf16_tflops") is None
    assert validation_floor("MI300A", "hbm_copy_gbps") is None  # TransferBench's preset covers 304-CU gfx942 only
