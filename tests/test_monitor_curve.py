"""The memory-curve judge on curves shaped like real runs (tests/monitor_curves.py), and the CLI parsers on
recorded amd-smi / nvidia-smi / rocm-smi outputs."""

from __future__ import annotations

import monitor_curves as mc
import pytest
from conftest import project_fixture, read_fixture

from rocmcheck.monitor.curve import classify_curve, judge_curves
from rocmcheck.monitor.parse import (
    parse_amd_smi_monitor,
    parse_nvidia_compute_apps,
    parse_nvidia_query,
    parse_rocm_smi_monitor_json,
)
from rocmcheck.result import Status


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
    assert "staircase" in result.summary and "LeakWatchCallback" in result.fix


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


# ---- parsers on recorded outputs ----------------------------------------------------------------------------

def test_amd_smi_monitor_with_process_table():
    samples, procs = parse_amd_smi_monitor(project_fixture("amd-smi-monitor/monitor-q-process-table-rocm6.2.0.txt"))
    s = samples[0]
    assert (s.power_w, s.temp_c, s.util_pct, s.sm_clock_mhz, s.mem_clock_mhz) == (199, 103, 99, 1920, 1000)
    assert s.used_bytes == 1235 * 1024**2 and s.total_bytes == 16335 * 1024**2
    assert procs == [{"gpu": 0, "pid": 1564865, "used_bytes": int(1.1 * 1024**3)}]


def test_amd_smi_monitor_cpx_partitions_and_newer_layouts():
    samples, _ = parse_amd_smi_monitor(project_fixture("amd-smi-monitor/mi300x-cpx-monitor-p-t-v-rocm6.3.0.txt"))
    assert len(samples) == 32 and samples[31].power_w == 227 and samples[0].total_bytes == 196300 * 1024**2
    samples, _ = parse_amd_smi_monitor(project_fixture("amd-smi-monitor/mi300x-cpx-monitor-default-vram-usage-rocm6.4.1-truncated.txt"))
    assert len(samples) == 9 and samples[0].total_bytes == 192 * 1024**3 and samples[0].sm_clock_mhz == 2107
    assert samples[1].power_w is None and samples[1].total_bytes == 24 * 1024**3
    samples, _ = parse_amd_smi_monitor(project_fixture("amd-smi-monitor/monitor-v-vram-free-percent-rocm6.5.0-truncated.txt"))
    assert [s.used_bytes // 1024**2 for s in samples] == [174, 78]


def test_nvidia_query_by_field_list_and_header():
    fields = ["index", "name", "memory.total", "memory.used", "driver_version", "compute_cap", "uuid"]
    text = read_fixture("nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt")
    samples, uuids = parse_nvidia_query(text, fields)
    assert [s.total_bytes for s in samples] == [143771 * 1024**2] * 2
    assert uuids[1].startswith("GPU-")
    # nvidia-smi's own csv header (units in brackets) names the columns when present
    samples, _ = parse_nvidia_query("index, memory.used [MiB], power.draw [W]\n0, 512 MiB, 81.25 W\n")
    assert samples[0].used_bytes == 512 * 1024**2 and samples[0].power_w == 81.25
    apps = parse_nvidia_compute_apps("gpu_uuid, pid, used_gpu_memory [MiB]\n" + f"{uuids[0]}, 4242, 1024 MiB\n")
    assert apps == [{"gpu_uuid": uuids[0], "pid": 4242, "used_bytes": 1024 * 1024**2}]


def test_rocm_smi_json():
    samples = parse_rocm_smi_monitor_json(read_fixture("rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt"))
    assert samples[0].total_bytes == 21458059264 and samples[0].used_bytes == 27856896 and samples[0].util_pct == 0


@pytest.mark.parametrize("garbage", ["", "NVIDIA-SMI has failed because it couldn't communicate", "{", "\x00\xff"])
def test_parsers_never_raise(garbage):
    assert parse_nvidia_query(garbage) == ([], {})
    assert parse_amd_smi_monitor(garbage) == ([], [])
    assert parse_rocm_smi_monitor_json(garbage) == []


def test_real_h200_monitor_queries_parse_with_clocks_and_processes():
    # Recorded on a 2 x H200 (driver 580): the header names the clocks clocks.current.sm / clocks.current.memory.
    samples, uuids = parse_nvidia_query(project_fixture("nvidia-smi-monitor/h200x2-driver580-query-gpu-monitor-csv-nounits.txt"))
    assert [s.gpu for s in samples] == [0, 1] and uuids[0] == "GPU-045eeb97-b7f7-321a-48ee-7b1f8855995a"
    assert samples[0].used_bytes == 1643 * 2**20 and samples[0].total_bytes == 143771 * 2**20
    assert (samples[0].sm_clock_mhz, samples[0].mem_clock_mhz, samples[1].sm_clock_mhz) == (1980, 3201, 345)
    assert samples[0].power_w == 120.51 and samples[0].temp_c == 35
    apps = parse_nvidia_compute_apps(project_fixture("nvidia-smi-monitor/h200x2-driver580-query-compute-apps-csv-nounits.txt"))
    assert apps == [{"gpu_uuid": uuids[0], "pid": 2811, "used_bytes": 1634 * 2**20}]
