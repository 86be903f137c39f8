"""The parsers of the monitor's command-line readers (rocmcheck/facts/parsers/smi_monitor.py) on recorded
amd-smi / nvidia-smi / rocm-smi outputs, and on garbage."""

from __future__ import annotations

import pytest
from conftest import project_fixture, read_fixture

from rocmcheck.facts.parsers.smi_monitor import (
    parse_amd_smi_monitor,
    parse_nvidia_compute_apps,
    parse_nvidia_query,
    parse_rocm_smi_monitor_json,
)

AMD_CPX_DEFAULT = "amd-smi-monitor/mi300x-cpx-monitor-default-vram-usage-rocm6.4.1-truncated.txt"
AMD_VRAM_FREE = "amd-smi-monitor/monitor-v-vram-free-percent-rocm6.5.0-truncated.txt"
NVIDIA_QUERY = "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt"
ROCM_SMI_JSON = "rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt"
H200_MONITOR = "nvidia-smi-monitor/h200x2-driver580-query-gpu-monitor-csv-nounits.txt"
H200_APPS = "nvidia-smi-monitor/h200x2-driver580-query-compute-apps-csv-nounits.txt"


def test_amd_smi_monitor_with_process_table():
    samples, procs = parse_amd_smi_monitor(project_fixture("amd-smi-monitor/monitor-q-process-table-rocm6.2.0.txt"))
    s = samples[0]
    assert (s.power_w, s.temp_c, s.util_pct, s.sm_clock_mhz, s.mem_clock_mhz) == (199, 103, 99, 1920, 1000)
    assert s.used_bytes == 1235 * 1024**2 and s.total_bytes == 16335 * 1024**2
    assert procs == [{"gpu": 0, "pid": 1564865, "used_bytes": int(1.1 * 1024**3)}]


def test_amd_smi_monitor_cpx_partitions_and_newer_layouts():
    samples, _ = parse_amd_smi_monitor(project_fixture("amd-smi-monitor/mi300x-cpx-monitor-p-t-v-rocm6.3.0.txt"))
    assert len(samples) == 32 and samples[31].power_w == 227 and samples[0].total_bytes == 196300 * 1024**2
    samples, _ = parse_amd_smi_monitor(project_fixture(AMD_CPX_DEFAULT))
    assert len(samples) == 9 and samples[0].total_bytes == 192 * 1024**3 and samples[0].sm_clock_mhz == 2107
    assert samples[1].power_w is None and samples[1].total_bytes == 24 * 1024**3
    samples, _ = parse_amd_smi_monitor(project_fixture(AMD_VRAM_FREE))
    assert [s.used_bytes // 1024**2 for s in samples] == [174, 78]


def test_nvidia_query_by_field_list_and_header():
    fields = ["index", "name", "memory.total", "memory.used", "driver_version", "compute_cap", "uuid"]
    text = read_fixture(NVIDIA_QUERY)
    samples, uuids = parse_nvidia_query(text, fields)
    assert [s.total_bytes for s in samples] == [143771 * 1024**2] * 2
    assert uuids[1].startswith("GPU-")
    # nvidia-smi's own csv header (units in brackets) names the columns when present
    samples, _ = parse_nvidia_query("index, memory.used [MiB], power.draw [W]\n0, 512 MiB, 81.25 W\n")
    assert samples[0].used_bytes == 512 * 1024**2 and samples[0].power_w == 81.25
    apps = parse_nvidia_compute_apps("gpu_uuid, pid, used_gpu_memory [MiB]\n" + f"{uuids[0]}, 4242, 1024 MiB\n")
    assert apps == [{"gpu_uuid": uuids[0], "pid": 4242, "used_bytes": 1024 * 1024**2}]


def test_rocm_smi_json():
    samples = parse_rocm_smi_monitor_json(read_fixture(ROCM_SMI_JSON))
    assert samples[0].total_bytes == 21458059264 and samples[0].used_bytes == 27856896 and samples[0].util_pct == 0


@pytest.mark.parametrize("garbage", ["", "NVIDIA-SMI has failed because it couldn't communicate", "{", "\x00\xff",
                                     "[" * 100_000, '{"card0": ' * 5000])
def test_parsers_never_raise(garbage):
    assert parse_nvidia_query(garbage) == ([], {})
    assert parse_amd_smi_monitor(garbage) == ([], [])
    assert parse_rocm_smi_monitor_json(garbage) == []


def test_numbers_no_gpu_can_show_are_unknown():
    # 400 digits are infinite as a float: unknown, never an OverflowError.
    (reading,), _ = parse_nvidia_query("index, memory.used\n0, " + "9" * 400 + "\n")
    assert reading.gpu == 0 and reading.used_bytes is None
    huge = "9" * 400
    (reading,), _ = parse_amd_smi_monitor(f"GPU  POWER  VRAM_USED  VRAM_TOTAL\n0  {huge} W  12 MB  {huge} MB\n")
    assert (reading.power_w, reading.used_bytes, reading.total_bytes) == (None, 12 * 1024**2, None)


def test_real_h200_monitor_queries_parse_with_clocks_and_processes():
    # Recorded on a 2 x H200 (driver 580): the header names the clocks clocks.current.sm / clocks.current.memory.
    samples, uuids = parse_nvidia_query(project_fixture(H200_MONITOR))
    assert [s.gpu for s in samples] == [0, 1] and uuids[0] == "GPU-045eeb97-b7f7-321a-48ee-7b1f8855995a"
    assert samples[0].used_bytes == 1643 * 2**20 and samples[0].total_bytes == 143771 * 2**20
    assert (samples[0].sm_clock_mhz, samples[0].mem_clock_mhz, samples[1].sm_clock_mhz) == (1980, 3201, 345)
    assert samples[0].power_w == 120.51 and samples[0].temp_c == 35
    apps = parse_nvidia_compute_apps(project_fixture(H200_APPS))
    assert apps == [{"gpu_uuid": uuids[0], "pid": 2811, "used_bytes": 1634 * 2**20}]
