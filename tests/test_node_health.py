"""GPU error counters, PCIe links, throttling, host tuning and runtime variables.

nvidia-smi texts are the recorded H200 outputs in tests/fixtures/public. The NVML/amdsmi records are what the
bindings child returns (tests/test_gpu_bindings.py runs the child itself); their values mirror the recorded H200
outputs (Gen5 x16, clock event reasons 0x1 = idle, ECC 0). sysfs is a real directory tree written under tmp_path.
"""

from __future__ import annotations

import os

from conftest import read_fixture
from machines import amd_machine, ran, verdicts

from rocmcheck.checks.health import annotate_link_with_bandwidth
from rocmcheck.facts.health import node_health
from rocmcheck.facts.parsers.gpu_health import parse_nvidia_smi_q
from rocmcheck.result import CheckResult, Status

H200_Q = "nvidia-smi/h200x2-q-ecc-performance-clock.txt"
H200_HEALTH = {"bus_id": "00000000:00:06.0", "ecc_mode_current": 1, "ecc_uncorrected_volatile": 0,
               "ecc_corrected_volatile": 0, "ecc_uncorrected_aggregate": 0, "retired_pages": {"double_bit": 0},
               "retired_pages_pending": 0, "remapped_rows": [0, 0, 0, 0], "clock_event_reasons": 1,
               "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16, "pcie_width_max": 16,
               "power_limit_mw": 700000, "power_default_limit_mw": 700000, "sm_clock_mhz": 345,
               "sm_clock_max_mhz": 1980}


def nvidia(health: dict | None = None, **over):
    gpus = [{"index": 0, "name": "NVIDIA H200", "memory_total": 150754820096, "compute_cap": "9.0", "uuid": "GPU-0",
             "health": dict(H200_HEALTH, **(health or {}))}]
    facts = amd_machine(commands={}, present={}, devices={}, rocm_layout={},
                        probes={"nvml": {"installed": True, "driver_version": "580.159.04", "cuda_version": "13.0",
                                         "gpus": gpus}})
    for key, value in over.items():
        setattr(facts, key, value)
    return facts


def test_nvidia_smi_q_h200_record():
    gpus = parse_nvidia_smi_q(read_fixture(H200_Q))
    assert [g["bus_id"] for g in gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert gpus[0]["reasons_active"] == ["Idle"] and gpus[0]["ecc_mode_current"] == "Enabled"
    assert gpus[0]["ecc_uncorrected_volatile"] == 0 and gpus[0]["ecc_uncorrected_aggregate"] == 0
    assert parse_nvidia_smi_q("garbage\n:::\nGPU 0\n") == []


def test_healthy_h200_passes_every_health_check_by_nvml_and_by_nvidia_smi():
    ids = ("health.gpu_errors", "health.pcie_link", "health.throttle")
    v = verdicts(nvidia(), *ids)
    assert all(v[i].status == Status.PASS for i in ids), {i: v[i].summary for i in ids}
    assert "Gen5 x16 (max Gen5 x16)" in v["health.pcie_link"].evidence[0]
    smi_only = amd_machine(commands={"nvidia-smi-health": ran("nvidia-smi-health", H200_Q)}, present={}, devices={},
                           rocm_layout={}, probes={})
    v = verdicts(smi_only, *ids)
    assert v["health.gpu_errors"].status == Status.PASS and "nvidia-smi -q" in v["health.gpu_errors"].evidence[0]
    assert v["health.throttle"].status == Status.PASS and v["health.pcie_link"].status == Status.SKIP


def test_uncorrectable_ecc_and_remap_failure_fail():
    r = verdicts(nvidia({"ecc_uncorrected_volatile": 2, "remapped_rows": [0, 1, 0, 1]}), "health.gpu_errors")
    r = r["health.gpu_errors"]
    assert r.status == Status.FAIL and "2 uncorrectable" in r.summary
    assert any("remapping failed" in e for e in r.evidence)
    w = verdicts(nvidia({"retired_pages_pending": 1}), "health.gpu_errors")["health.gpu_errors"]
    assert w.status == Status.WARN and "pending" in w.summary


def test_link_below_max_warns_unless_only_speed_while_idle():
    r = verdicts(nvidia({"pcie_width_current": 8}), "health.pcie_link")["health.pcie_link"]
    assert r.status == Status.WARN and "Gen5 x8 (max Gen5 x16)" in r.evidence[0]
    idle = verdicts(nvidia({"pcie_gen_current": 1}), "health.pcie_link")["health.pcie_link"]
    assert idle.status == Status.PASS and "while idle" in idle.evidence[0]
    busy = verdicts(nvidia({"pcie_gen_current": 3, "clock_event_reasons": 0}), "health.pcie_link")["health.pcie_link"]
    assert busy.status == Status.WARN


def test_measured_host_bandwidth_is_shown_beside_a_slow_link():
    link = verdicts(nvidia({"pcie_width_current": 8}), "health.pcie_link")["health.pcie_link"]
    band = CheckResult("probe.host_bandwidth", Status.WARN, "pinned host->device 13.1 GB/s, device->host 12.9 GB/s")
    annotate_link_with_bandwidth([link, band])
    assert link.evidence[0].startswith("measured (probe.host_bandwidth): pinned host->device 13.1 GB/s")


def test_thermal_slowdown_and_lowered_power_cap_warn():
    r = verdicts(nvidia({"clock_event_reasons": 0x40}), "health.throttle")["health.throttle"]
    assert r.status == Status.WARN and "HW thermal slowdown" in r.summary
    r = verdicts(nvidia({"power_limit_mw": 400000}), "health.throttle")["health.throttle"]
    assert r.status == Status.WARN and "57%" in r.summary


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def sysfs_tree(root, *, width="16", speed="32.0 GT/s PCIe", ue="0", governor="performance", level="auto"):
    """A MI300X behind a switch port, as sysfs lays it out (device dirs under /sys/devices, links in bus/pci)."""
    port = root / "devices/pci0000:00/0000:00:01.1"
    gpu = port / "0000:03:00.0"
    for d, files in ((port, {"vendor": "0x1022\n", "class": "0x060400\n", "max_link_speed": "32.0 GT/s PCIe\n",
                             "max_link_width": "16\n"}),
                     (gpu, {"vendor": "0x1002\n", "class": "0x038000\n", "current_link_speed": f"{speed}\n",
                            "current_link_width": f"{width}\n", "max_link_speed": "32.0 GT/s PCIe\n",
                            "max_link_width": "16\n", "ras/umc_err_count": f"ue: {ue}\nce: 4\n",
                            "ras/gpu_vram_bad_pages": "", "power_dpm_force_performance_level": f"{level}\n"})):
        for name, text in files.items():
            write(d / name, text)
    links = root / "bus/pci/devices"
    links.mkdir(parents=True, exist_ok=True)
    for d in (port, gpu):
        os.symlink(d, links / d.name)
    write(root / "devices/system/cpu/cpu0/cpufreq/scaling_governor", f"{governor}\n")
    write(root / "devices/system/cpu/cpu1/cpufreq/scaling_governor", f"{governor}\n")


def test_sysfs_link_ras_governor_and_perf_level(tmp_path):
    sysfs_tree(tmp_path)
    health = node_health({}, root=str(tmp_path))
    (gpu,) = health["pci_gpus"]
    assert gpu["bdf"] == "0000:03:00.0" and gpu["upstream"]["bdf"] == "0000:00:01.1"
    assert health["cpufreq_governors"] == {"performance": 2}
    v = verdicts(amd_machine(node_health=health), "health.pcie_link", "health.gpu_errors", "host.cpu_governor",
                 "host.perf_determinism")
    assert all(r.status == Status.PASS for r in v.values()), {k: r.summary for k, r in v.items()}
    assert "RAS ue/ce 0/4" in v["health.gpu_errors"].evidence[0]


def test_sysfs_faults_are_judged(tmp_path):
    sysfs_tree(tmp_path, width="8", ue="3", governor="powersave", level="low")
    v = verdicts(amd_machine(node_health=node_health({}, root=str(tmp_path))), "health.pcie_link", "health.gpu_errors",
                 "host.cpu_governor", "host.perf_determinism")
    assert v["health.pcie_link"].status == Status.WARN and "Gen5 x8 (max Gen5 x16)" in v["health.pcie_link"].evidence[0]
    assert v["health.gpu_errors"].status == Status.FAIL and "3 uncorrectable" in v["health.gpu_errors"].summary
    assert v["host.cpu_governor"].status == Status.WARN and "cpupower frequency-set -g performance" in \
        v["host.cpu_governor"].fix.line()
    assert v["host.perf_determinism"].status == Status.WARN


def test_visibility_renumbered_twice():
    v = verdicts(amd_machine(env={"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "2,3"}), "env.visible_devices")
    r = v["env.visible_devices"]
    assert r.status == Status.FAIL and "renumbered twice" in r.summary
    v = verdicts(amd_machine(env={"ROCR_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "1"}), "env.visible_devices")
    r = v["env.visible_devices"]
    assert r.status == Status.WARN and r.fix.line().startswith("export ROCR_VISIBLE_DEVICES=3")


def test_runtime_variables_set_wrong_for_fine_tuning():
    env = {"PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True", "TORCH_BLAS_PREFER_HIPBLASLT": "0",
           "NCCL_MAX_NCHANNELS": "16", "HSA_XNACK": "1", "HSA_NO_SCRATCH_RECLAIM": "yes",
           "PYTORCH_TUNABLEOP_ENABLED": "1"}
    v = verdicts(amd_machine(env=env), "env")
    assert "does nothing with torch 2.5.1 on ROCm 6.2" in v["env.alloc_conf"].summary
    assert v["env.hipblaslt"].status == Status.WARN and "forces rocBLAS on gfx942" in v["env.hipblaslt"].summary
    assert v["env.nccl_channels"].status == Status.WARN and "NCCL_MAX_NCHANNELS=16" in v["env.nccl_channels"].summary
    assert v["env.hsa_xnack"].status == Status.WARN and v["env.scratch_reclaim"].status == Status.WARN
    assert v["env.tunableop"].status == Status.WARN and "tunes every new GEMM shape" in v["env.tunableop"].summary
    ok = verdicts(amd_machine(env={"PYTORCH_HIP_ALLOC_CONF": "max_split_size_mb:512", "NCCL_MIN_NCHANNELS": "112"}),
                  "env")
    assert all(r.status in (Status.PASS, Status.SKIP) for r in ok.values()), {k: r.summary for k, r in ok.items()}
    bad = verdicts(amd_machine(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"}), "env.alloc_conf")
    assert "unknown option 'expandable_segment'" in bad["env.alloc_conf"].summary


def test_tunableop_results_from_another_stack(tmp_path):
    (tmp_path / "tunableop_results0.csv").write_text(
        "Validator,PT_VERSION,2.3.0\nValidator,ROCM_VERSION,6.0.0.0-12969-1544e39\n"
        "Validator,GCN_ARCH_NAME,gfx90a:sramecc+:xnack-\n")
    env = {"PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "0"}
    health = node_health(env, root=str(tmp_path / "nosys"), cwd=str(tmp_path))
    r = verdicts(amd_machine(env=env, node_health=health), "env.tunableop")["env.tunableop"]
    assert r.status == Status.WARN and any("made on gfx90a" in e for e in r.evidence)
    assert any("made with torch 2.3.0" in e for e in r.evidence)
