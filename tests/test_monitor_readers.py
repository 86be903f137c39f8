"""The command-line readers of `monitor` (amd-smi, rocm-smi, nvidia-smi) on real processes: small fake tools on
PATH that print recorded outputs, fail, or print nothing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from conftest import PROJECT_FIXTURES_DIR, read_fixture
from fakes import env_with_path, make_tool

from rocmcheck.facts.tools import find_tool
from rocmcheck.monitor.sampler import READERS, ReaderError, open_reader
from rocmcheck.units import MIB

AMD_MONITOR = PROJECT_FIXTURES_DIR / "amd-smi-monitor" / "monitor-q-process-table-rocm6.2.0.txt"
ROCM_JSON = "rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt"
NVIDIA_QUERY = "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt"


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", env_with_path(path)["PATH"])  # the fakes answer before any real tool
    return path


def test_amd_smi_reader_reads_gpus_and_processes(bin_dir):
    make_tool(bin_dir, "amd-smi", stdout_file=AMD_MONITOR)
    reader, tried = open_reader("amd-smi")
    assert tried == [] and reader.name == "amd-smi"
    samples, procs = reader.read()
    assert samples[0].used_bytes == 1235 * MIB and samples[0].power_w == 199
    assert procs == {0: {1564865: int(1.1 * 1024**3)}}
    reader.close()


def test_rocm_smi_reader_knows_no_processes(bin_dir):
    make_tool(bin_dir, "rocm-smi", stdout=read_fixture(ROCM_JSON))
    reader, _ = open_reader("rocm-smi")
    samples, procs = reader.read()
    assert samples[0].total_bytes == 21458059264 and procs == {}


def test_nvidia_smi_reader_asks_again_with_the_memory_fields_only(bin_dir):
    # This fake answers only the minimal query, as a driver that refuses power/clock fields would.
    query = read_fixture(NVIDIA_QUERY).splitlines()
    rows = "\n".join(",".join(line.split(",")[i] for i in (0, 6, 3, 2)) for line in query)  # index,uuid,used,total
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      'case "$1" in\n'
                      f'  --query-gpu=index,uuid,memory.used,memory.total) printf "%s\\n" {shlex.quote(rows)} ;;\n'
                      '  --query-gpu=*) echo "Field \\"power.draw\\" is not a valid field to query."; exit 2 ;;\n'
                      "esac\n")
    script.chmod(0o755)
    reader, _ = open_reader("nvidia-smi")
    assert reader.fields == ["index", "uuid", "memory.used", "memory.total"]
    samples, procs = reader.read()
    assert [s.total_bytes for s in samples] == [143771 * MIB] * 2 and procs == {0: {}, 1: {}}


@pytest.mark.parametrize("tool", ["amd-smi", "rocm-smi", "nvidia-smi"])
def test_a_failing_or_silent_tool_is_refused_with_its_reason(bin_dir, tool):
    make_tool(bin_dir, tool, stdout="ERROR:root:Driver not initialized (amdgpu not found in modules)", exit_code=1)
    reader, tried = open_reader(tool)
    assert reader is None and tried[0].startswith(f"{tool}: ") and "exit" in tried[0].lower()
    make_tool(bin_dir, tool, stdout="")
    reader, tried = open_reader(tool)
    assert reader is None and tried == [f"{tool}: {tool} printed no GPU"]
    with pytest.raises(ReaderError):
        READERS[tool]()


def test_a_tool_only_under_the_rocm_root_is_found_as_the_doctor_finds_it(tmp_path):
    """ROCm's installers put amd-smi in $ROCM_PATH/bin without touching PATH: the doctor finds it there
    (rocmcheck.facts.tools.find_tool), and so must the monitor."""
    root = tmp_path / "rocm-6.2.0"
    make_tool(root / "bin", "amd-smi", stdout_file=AMD_MONITOR)
    env = {"PATH": "/usr/bin:/bin", "ROCM_PATH": str(root)}
    assert find_tool("amd-smi", env) == str(root / "bin" / "amd-smi")
    reader, _ = open_reader("amd-smi", env)
    assert reader is not None and reader.tool == str(root / "bin" / "amd-smi")
    assert reader.read()[0][0].used_bytes == 1235 * MIB
    # End to end: PATH has no amd-smi; the monitor reads it from under ROCM_PATH.
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--backend", "amd-smi", "--out",
                           str(out), "--", sys.executable, "-c", "import time; time.sleep(0.5)"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert proc.returncode in (0, 3), proc.stderr
    verdict = json.loads(next(out.glob("verdict-*.json")).read_text())
    assert verdict["reader"] == "amd-smi" and "via amd-smi" in proc.stderr
