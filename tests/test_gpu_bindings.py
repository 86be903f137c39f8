"""The vendor Python bindings the doctor prefers over parsing tool text: NVML (nvidia-ml-py) and amdsmi.

The real nvidia-ml-py is installed in CI; with no NVIDIA driver it must come back as a recorded error, and the
doctor must fall back to nvidia-smi. With a GPU present, only a stand-in module can run here: these tests put a
small `pynvml` / `amdsmi` module on PYTHONPATH that answers like the real binding (same function names and
return shapes as nvidia-ml-py 12+ and ROCm's amdsmi), because no NVIDIA or AMD GPU exists on a CPU machine.
The memory figure is the real one from the amd-smi MI300X fixture (196592 MB).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES_DIR, read_fixture
from fakes import env_with_path, make_tool

from rocmcheck.child import parse_events
from rocmcheck.facts.collect import probe_answers

MI300X_ROCMINFO = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"

FAKE_AMDSMI = '''
def amdsmi_init(): pass
def amdsmi_shut_down(): pass
def amdsmi_get_processor_handles(): return ["h0", "h1"]
def amdsmi_get_gpu_asic_info(h): return {"market_name": "AMD Instinct MI300X", "target_graphics_version": "gfx942"}
def amdsmi_get_gpu_vram_info(h): return {"vram_type": "HBM3", "vram_size": 196592}
'''

FAKE_PYNVML = '''
class _Mem:
    total, used = 150754820096, 1048576
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "580.159.04"
def nvmlSystemGetCudaDriverVersion(): return 13000
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetMemoryInfo(h): return _Mem()
def nvmlDeviceGetCudaComputeCapability(h): return (9, 0)
def nvmlDeviceGetName(h): return b"NVIDIA H200"
def nvmlDeviceGetUUID(h): return "GPU-%d" % h
'''


def probe(name: str, env=None) -> dict:
    out = subprocess.run([sys.executable, "-m", "rocmcheck.facts.python_probe", "--request",
                          json.dumps({"probes": [name]})], capture_output=True, text=True,
                         env=env, timeout=60).stdout
    return probe_answers(parse_events(out)[0])[name]


def stand_in(tmp_path, module: str, source: str) -> dict:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(source)
    return env_with_path(tmp_path / "bin", PYTHONPATH=str(site))


def test_real_nvml_without_a_driver_is_a_recorded_error():
    pytest.importorskip("pynvml")
    data = probe("nvml")
    assert data["installed"] is True and "NVMLError" in data["error"]


def test_nvml_gpus_are_read_and_preferred(tmp_path):
    env = stand_in(tmp_path, "pynvml", FAKE_PYNVML)
    data = probe("nvml", env)
    assert data["cuda_version"] == "13.0" and data["gpus"][1]["compute_cap"] == "9.0"
    assert data["gpus"][0]["name"] == "NVIDIA H200"
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--json", "--no-gpu-probes", "--no-train",
                           "--only", "gpu,nvidia"], capture_output=True, text=True, env=env, timeout=120)
    results = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    assert "2 GPU(s), driver 580.159.04" in results["nvidia.smi"]["summary"]
    assert "listed by the NVML binding" in results["nvidia.smi"]["evidence"]
    assert results["gpu.arch"]["data"]["archs"] == ["sm_90"] and results["gpu.arch"]["data"]["products"] == ["H200"]


def test_amdsmi_memory_and_names_feed_the_gpu_list(tmp_path):
    read_fixture(MI300X_ROCMINFO)
    env = stand_in(tmp_path, "amdsmi", FAKE_AMDSMI)
    make_tool(tmp_path / "bin", "rocminfo", stdout_file=FIXTURES_DIR / MI300X_ROCMINFO)
    data = probe("amdsmi", env)
    health = data["gpus"][0].pop("health")
    assert data["gpus"][0] == {"index": 0, "name": "AMD Instinct MI300X", "gfx": "gfx942",
                               "memory_total": 196592 * 2**20}
    # A binding without the counter functions (older ROCm) still gives the GPU list; the counters are unknown.
    assert health["bus_id"] is None and health["ecc_uncorrectable"] is None
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--json", "--no-gpu-probes", "--no-train",
                           "--only", "gpu,torch"], capture_output=True, text=True, env=env, timeout=120)
    results = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    # GPUs 0 and 1 take amdsmi's 196592 MiB (192 GiB); the rest keep rocminfo's pool size.
    assert "GPU 0: gfx942 AMD Instinct MI300X = MI300X, 304 CUs, 192 GiB" in results["gpu.present"]["evidence"]


def test_amdsmi_absent_or_failing_is_recorded(tmp_path):
    real = probe("amdsmi")  # absent, or AMD's PyPI package without ROCm's library (the test extra installs it)
    assert real == {"installed": False} or real.get("library_missing") is True
    failing = "def amdsmi_init():\n    raise RuntimeError('AMDSMI_STATUS_DRIVER_NOT_LOADED')\n"
    env = stand_in(tmp_path, "amdsmi", failing)
    data = probe("amdsmi", env)
    assert data["installed"] is True and "DRIVER_NOT_LOADED" in data["error"] and data["driver_not_loaded"] is True


def test_real_amdsmi_without_its_library_is_a_recorded_fact():
    # AMD's amdsmi package from PyPI holds only the Python wrapper: without ROCm's libamd_smi.so its import
    # fails (KeyError 'libamd_smi.so' after printing "Unable to find libamd_smi.so ..." to stdout).
    from importlib import metadata

    try:
        metadata.version("amdsmi")
    except metadata.PackageNotFoundError:
        pytest.skip("amdsmi (AMD's Python package, the test extra) is not installed")
    data = probe("amdsmi")
    if data.get("library_missing") is None and data.get("driver_not_loaded"):
        pytest.skip("this machine has libamd_smi.so: the driver-not-loaded path is exercised in .ci/rocm.sh")
    assert data["installed"] is True and data["library_missing"] is True
    assert "libamd_smi.so" in data["error"] and "Traceback" not in data["error"]
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--json", "--no-gpu-probes", "--no-train",
                           "--only", "gpu,rocm,driver"], capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout)
    assert not [r for r in report["results"] if r["status"] == "crash"]


# ---- one binding for the doctor and the monitor ---------------------------------------------------------------

def test_only_facts_bindings_imports_the_vendor_bindings():
    """NVML and amdsmi are bound once (rocmcheck/facts/bindings.py): the doctor's probe and the monitor's
    readers both go through it."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "rocmcheck"
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("pynvml", "amdsmi") for n in names):
                importers.add(str(path.relative_to(package.parent)))
    assert importers == {"rocmcheck/facts/bindings.py"}


READ_WITH_MONITOR = ("import json, sys; from rocmcheck.monitor.sampler import open_reader; "
                     "reader, tried = open_reader(sys.argv[1]); assert reader is not None, tried; "
                     "samples, procs = reader.read(); reader.close(); "
                     "print(json.dumps({'samples': [s.to_dict() for s in samples], 'uuids': reader.uuids}))")


def monitor_reading(backend: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", READ_WITH_MONITOR, backend], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_doctor_and_monitor_read_one_nvml_stand_in_alike(tmp_path):
    env = stand_in(tmp_path, "pynvml", FAKE_PYNVML)
    doctor = probe("nvml", env)
    monitor = monitor_reading("nvml", env)
    assert [s["used_bytes"] for s in monitor["samples"]] == [g["memory_used"] for g in doctor["gpus"]]
    assert [s["total_bytes"] for s in monitor["samples"]] == [g["memory_total"] for g in doctor["gpus"]]
    assert list(monitor["uuids"].values()) == [g["uuid"] for g in doctor["gpus"]]
    # The stand-in has no power or clock calls (an old binding): those fields are unknown, the reading stands.
    assert monitor["samples"][0]["power_w"] is None and monitor["samples"][0]["sm_clock_mhz"] is None


FAKE_AMDSMI_MONITORED = FAKE_AMDSMI + '''
def amdsmi_get_gpu_vram_usage(h): return {"vram_total": 196592, "vram_used": 283}
def amdsmi_get_gpu_device_uuid(h): return "uuid-" + h
def amdsmi_get_power_info(h): return {"current_socket_power": "N/A", "average_socket_power": 131}
def amdsmi_get_gpu_process_list(h): return [{"pid": 4242, "memory_usage": {"vram_mem": 1048576}}] if h == "h1" else []
'''


def test_doctor_and_monitor_read_one_amdsmi_stand_in_alike(tmp_path):
    env = stand_in(tmp_path, "amdsmi", FAKE_AMDSMI_MONITORED)
    doctor = probe("amdsmi", env)
    monitor = monitor_reading("amdsmi", env)
    assert [s["total_bytes"] for s in monitor["samples"]] == [g["memory_total"] for g in doctor["gpus"]]
    assert monitor["samples"][0]["used_bytes"] == 283 * 2**20 and monitor["samples"][0]["power_w"] == 131
    assert monitor["uuids"] == {"0": "uuid-h0", "1": "uuid-h1"}
