"""Every fix a check, a probe hint or smoke-train can print is a Fix (rocmcheck/fixes.py): a shell fix is one line
that parses (`bash -n`) and starts each command with a real one, whatever the machine's values (paths with spaces or
`;`, odd versions) are, since every value is a quoted field; prose is a note. An environment variable name keeps its
case. The checks are driven over the recorded machines (tests/machines.py) and variants of them that break one thing
each, so every reachable fix branch is produced by the real checks."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import read_fixture
from machines import amd_machine, ran
from test_checks_nvidia import nvidia_machine
from test_node_health import H200_HEALTH, H200_Q, sysfs_tree

from rocmcheck import fixes
from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.checks.health import finding_fix
from rocmcheck.facts.collect import ENV_NAMES, Facts
from rocmcheck.facts.health import node_health
from rocmcheck.facts.parsers.kernel_log import parse_kernel_log
from rocmcheck.fixes import Fix, FixKind
from rocmcheck.knowledge import load
from rocmcheck.probes import hints
from rocmcheck.runner import CommandResult

CONTAINER = {"/.dockerenv": True, "/sys/module/amdgpu": True, "/dev/shm": True}
# A ROCm root whose name a shell would split or run: it must paste as one quoted word.
HOSTILE_ROOT = "/opt/ROCm 6.2;touch PWNED;#"


def _with(facts: Facts, **over) -> Facts:
    facts = copy.deepcopy(facts)
    for key, value in over.items():
        setattr(facts, key, value)
    return facts


def _probes(**over) -> dict:
    base = amd_machine().probes
    return {**copy.deepcopy(base), **over}


# torch's bytecode as the lent H200 image has it (recorded by python_probe.bytecode_state there): no __pycache__,
# PYTHONDONTWRITEBYTECODE=1 in the environment.
NO_BYTECODE = {"source": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__init__.py",
               "bytecode": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__pycache__/__init__.cpython-312.pyc",
               "cached": False, "dont_write_bytecode": True, "pycache_prefix": None, "writable": True,
               "site_dir": "/opt/torch/.venv/lib/python3.12/site-packages"}


def machines() -> dict[str, Facts]:
    """Recorded machines, each broken in one way (or several, where a branch needs it)."""
    amd = amd_machine()
    nv = nvidia_machine()
    torch_rocm = amd.probes["torch"]
    ds_ok = {"installed": True, "version": "0.15.0", "accelerator": "cuda",
             "torch_info": {"version": "2.5", "hip_version": "6.2", "cuda_version": "0.0"},
             "ops": {"fused_adam": {"known": True, "compatible": True, "installed": False},
                     "cpu_adam": {"known": True, "compatible": False}},
             "jit": {"ninja": False, "cxx": True, "python_headers": True, "hipcc": False}}
    out = {
        "amd-healthy": amd,
        "nvidia-h100": nv,
        "nvidia-old-driver": nvidia_machine(torch_cuda="12.8", arch_list=("sm_80",)),
        "nvidia-in-container": _with(nvidia_machine(), present={"/.dockerenv": True, "/sys/module/nvidia": True},
                                     commands={}),
        "cpu-only": Facts(platform={"system": "Linux", "kernel": "6.8.0"}, os_info={"id": "ubuntu", "version": "22.04"},
                          limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20}),
        "cpu-only-container": Facts(platform={"system": "Linux", "kernel": "7.1.0"},
                                    os_info={"id": "ubuntu", "version": "20.04", "name": "Ubuntu 20.04"},
                                    present={"/.dockerenv": True},
                                    limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20}),
        "macos": Facts(platform={"system": "Darwin", "kernel": "x"}, os_info={"id": "fedora", "version": "40"}),
        "amd-no-torch": _with(amd, probes={}, packages={"transformers": "4.30.0"}),
        "amd-torch-import-error": _with(amd, probes=_probes(torch={"installed": True,
                                                                   "error": "libamdhip64.so: cannot open"})),
        "amd-cpu-torch": _with(amd, probes=_probes(torch={**torch_rocm, "hip": None, "version": "2.5.1+cpu",
                                                          "device_count": 0})),
        "amd-cuda-torch": _with(amd, probes=_probes(torch={**torch_rocm, "hip": None, "cuda": "12.4",
                                                           "version": "2.5.1+cu124", "device_count": 0})),
        "amd-torch-lacks-arch": _with(amd, probes=_probes(torch={**torch_rocm, "arch_list": ["gfx90a"],
                                                                  "device_count": 4})),
        "amd-torch-no-arch-list": _with(amd, probes=_probes(torch={**torch_rocm, "arch_list": []})),
        "amd-torch-no-bytecode": _with(amd, probes=_probes(torch={**torch_rocm, "bytecode": NO_BYTECODE})),
        "amd-torch-no-bytecode-readonly": _with(amd, probes=_probes(torch={
            **torch_rocm, "bytecode": {**NO_BYTECODE, "dont_write_bytecode": False, "writable": False,
                                       "site_dir": "/usr/lib/python3 dist-packages"}})),
        "amd-no-devices-container": _with(amd, devices={}, present=CONTAINER, user={"uid": 1000, "groups": ["u"]},
                                          limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20},
                                          files={**amd.files, "/proc/self/status": "Seccomp:\t2\n"}),
        "amd-no-driver": _with(amd, commands={}, present={}),
        "amd-no-devices-host": _with(amd, devices={}, present={"/sys/module/amdgpu": False}),
        "amd-devices-not-rw": _with(amd, user={"uid": 1000, "groups": ["u"], "group_ids": {}},
                                    devices={p: {**a, "writable": False} for p, a in amd.devices.items()}),
        "amd-devices-not-rw-container": _with(amd, present=CONTAINER, user={"uid": 1000, "groups": ["u"]},
                                              devices={p: {**a, "writable": False} for p, a in amd.devices.items()}),
        "amd-groups-only": _with(amd, user={"uid": 1000, "groups": ["u"], "group_ids": {"render": 110}}),
        "amd-env-instinct-override": _with(amd, env={"HSA_OVERRIDE_GFX_VERSION": "9.4.2", "PYTORCH_ROCM_ARCH": "gfx940",
                                                     "HIP_VISIBLE_DEVICES": "0,9", "CUDA_VISIBLE_DEVICES": ""}),
        "amd-env-radeon-override": _with(amd_machine(env={"HSA_OVERRIDE_GFX_VERSION": "12.0.1",
                                                          "PYTORCH_ROCM_ARCH": "gfx90a", "ROCR_VISIBLE_DEVICES": "0",
                                                          "HIP_VISIBLE_DEVICES": "1"})),
        "amd-host-untuned": _with(amd, files={**amd.files, "/proc/cmdline": "ro quiet",
                                              "/proc/sys/kernel/numa_balancing": "1\n"},
                                  limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20}),
        "amd-no-shm": _with(amd, limits={"memlock_soft": -1, "unlimited": -1, "shm_bytes": None}),
        "amd-no-rocm": _with(amd, rocm_layout={"roots": {}}),
        "amd-torch-only-rocm": _with(amd, rocm_layout={"roots": {}}, packages={**amd.packages}),
        "amd-two-rocms": _with(amd, rocm_layout={"roots": {"/opt/rocm": {"info_version": "6.2.3-119\n"},
                                                           "/opt/rocm-6.4.0": {"info_version": "6.4.0-1\n"}}}),
        "amd-hip-mismatch": _with(amd, commands={**amd.commands, "hipconfig": ran(
            "hipconfig", stdout="HIP version: 6.4.43482-0f2d60242\n")}),
        "amd-hipconfig-empty": _with(amd, commands={**amd.commands, "hipconfig": ran("hipconfig", stdout="")}),
        "amd-no-rocminfo": _with(amd, commands={}),
        "amd-rocminfo-hung": _with(amd, commands={"rocminfo": CommandResult(argv=["rocminfo"], timed_out=True,
                                                                             timeout_s=20)}),
        "amd-rocminfo-crash": _with(amd, commands={"rocminfo": ran("rocminfo", stdout="", returncode=-11)}),
        "amd-rocminfo-garbage": _with(amd, commands={"rocminfo": ran("rocminfo", stdout="hello\n")}),
        "amd-rocminfo-denied": _with(amd, commands={"rocminfo": ran(
            "rocminfo", "rocminfo/error-kfd-permission-denied-rocm-terminal-container.txt", returncode=1)}),
        "amd-rocminfo-invalid": _with(amd, commands={"rocminfo": ran(
            "rocminfo", "rocminfo/error-kfd-invalid-argument-mi300x-docker-rocm6.2.1.txt", returncode=1)}),
        # found at this path, then the kernel said "no such file": the interpreter of its #! line is missing (as
        # the runner records it, and as a bundle from before it said so records it)
        "amd-rocminfo-no-interpreter": _with(amd, commands={"rocminfo": CommandResult(
            argv=["/opt/rocm/bin/rocminfo"], interpreter_missing=True, timeout_s=20,
            error="its interpreter /usr/bin/python3.99 (named on its #! line) does not exist")}),
        "amd-rocminfo-no-interpreter-old-bundle": _with(amd, commands={"rocminfo": CommandResult(
            argv=["/opt/rocm/bin/rocminfo"], not_found=True, timeout_s=20)}),
        "amd-rocm-version-unknown": _with(amd, env={"ROCM_PATH": HOSTILE_ROOT},
                                          rocm_layout={"roots": {HOSTILE_ROOT: {"has_rocminfo": True}}}),
        "mi250x-old-arch": amd_machine("rocminfo/mi250x-1gcd-cray-slurm-rocm5.7-container.txt"),
        "radeon-gfx1100": amd_machine("rocminfo/rx7900xtx-gfx1100-rocm6.2.2-ubuntu24.04.txt"),
        "strix-halo": amd_machine("rocminfo/strix-halo-gfx1151-apu-rocm7.11-nightly.txt",
                                  env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}),
        "amd-libraries-broken": _with(amd, probes=_probes(
            flash_attn={"installed": True, "import_error": "undefined symbol: _ZN3c10"},
            deepspeed={**ds_ok, "torch_info": {"version": "2.3"}, "accelerator": "cpu"}),
            packages={"torch": "2.5.1+rocm6.2", "triton": "3.0.0", "pytorch-triton-rocm": "3.0.0"},
            torch_requires=['pytorch-triton-rocm==3.1.0; platform_system == "Linux"']),
        "amd-deepspeed-isolated": _with(amd, probes=_probes(deepspeed={**ds_ok, "torch_info": {"version": "0.0"}}),
                                        packages={"torch": "2.5.1+rocm6.2", "triton": "3.0.0"},
                                        torch_requires=['pytorch-triton-rocm==3.1.0']),
        "amd-deepspeed-ops": _with(amd, probes=_probes(deepspeed=ds_ok)),
        "amd-deepspeed-import-error": _with(amd, probes=_probes(deepspeed={"installed": True, "import_error": "boom"},
                                                                flash_attn={"installed": True, "version": "2.7.0"}),
                                            packages={"torch": "2.5.1+rocm6.2", "pytorch-triton-rocm": "3.0.0"},
                                            torch_requires=['pytorch-triton-rocm==3.1.0']),
        "amd-probe-died": _with(amd, probes={"torch": torch_rocm}, packages={"torch": "2.5.1+rocm6.2",
                                                                            "flash-attn": "2.7", "deepspeed": "0.15"},
                                probe_runs={n: ran("python_probe", stdout="", returncode=-11)
                                            for n in ("flash_attn", "deepspeed")}),
    }
    out.update(health_machines())
    return out


KERNEL_LOGS = Path(__file__).parent / "fixtures" / "kernel-log"

# amdsmi binding records (the fields rocmcheck/facts/python_probe.py keeps) of a healthy MI300X: Gen5 x16 in MT/s,
# the 750 W default power cap in microwatts (amdsmi_power_cap_info_t on bare metal), AUTO performance level.
MI300X_AMDSMI_HEALTH = {"bus_id": "0000:05:00.0", "ecc_correctable": 0, "ecc_uncorrectable": 0, "ecc_deferred": 0,
                        "bad_pages": 0, "throttle_status": 0, "pcie_speed_current_mts": 32000,
                        "pcie_speed_max_mts": 32000, "pcie_width_current": 16, "pcie_width_max": 16,
                        "power_cap": 750_000_000, "power_default_cap": 750_000_000, "gfx_clock_mhz": 2100,
                        "gfx_clock_max_mhz": 2100, "gfx_activity": 100, "perf_level": "AMDSMI_DEV_PERF_LEVEL_AUTO"}


def _nvml(*healths: dict, **over) -> Facts:
    """The recorded H200 pair (its nvidia-smi table and csv query) with NVML health records: the recorded H200's
    values (H200_HEALTH), changed by each dict; the second GPU is a healthy one when only one dict is given."""
    healths = healths + ({},) * (2 - len(healths))
    gpus = [{"index": i, "name": "NVIDIA H200", "uuid": f"GPU-{i}",
             "health": {**H200_HEALTH, "bus_id": f"00000000:00:0{6 + i}.0", **h}} for i, h in enumerate(healths)]
    facts = nvidia_machine()
    # nvidia-smi as recorded on the same H200 pair: the table and the csv query agree with NVML.
    facts.commands = {"nvidia-smi": ran("nvidia-smi", "nvidia-smi/h200x2-driver580.159.04-default.txt"),
                      "nvidia-smi-query": ran("nvidia-smi-query", "nvidia-smi/h200x2-driver580-query-index-name-"
                                              "memory-driver-compute_cap-uuid-csv-noheader-nounits.txt")}
    facts.probes = {**facts.probes, "nvml": {"installed": True, "driver_version": "580.159.04", "gpus": gpus}}
    for key, value in over.items():
        setattr(facts, key, value)
    return facts


def _amdsmi(*healths: dict, **over) -> Facts:
    gpus = [{"index": i, "health": {**MI300X_AMDSMI_HEALTH, "bus_id": f"0000:{5 + 16 * i:02x}:00.0", **h}}
            for i, h in enumerate(healths)]
    return amd_machine(probes=_probes(amdsmi={"installed": True, "gpus": gpus}), **over)


def _sysfs(**tree) -> dict:
    """node_health read by the real collector from a sysfs tree laid out as on a MI300X host."""
    bad_pages = tree.pop("bad_pages", "")
    with tempfile.TemporaryDirectory() as root:
        sysfs_tree(Path(root), **tree)
        gpu = next(Path(root).glob("devices/pci0000:00/*/0000:03:00.0"))
        (gpu / "ras/gpu_vram_bad_pages").write_text(bad_pages)
        return node_health({}, root=root)


def _kernel_log(facts: Facts, name: str) -> Facts:
    facts = copy.deepcopy(facts)
    facts.commands = {**facts.commands, "kernel-log-dmesg": CommandResult(
        argv=["dmesg"], returncode=0, stdout=(KERNEL_LOGS / name).read_text(encoding="utf-8"), timeout_s=20)}
    facts.node_health = {**facts.node_health, "uptime_s": 20_000.0}
    facts.collected_at = 1723943971.352108 + 600
    return facts


def _tunableop_head(torch_version: str, arch: str) -> str:
    # The Validator lines TunableOp writes at the top of its results file (torch.cuda.tunable docs).
    return (f"Validator,PT_VERSION,{torch_version}\nValidator,ROCM_VERSION,6.2.41133-dd7f95766\n"
            f"Validator,GCN_ARCH_NAME,{arch}:sramecc+:xnack-\n")


def health_machines() -> dict[str, Facts]:
    """Variants for the node-health checks (health.*, host.cpu_governor, host.perf_determinism, env.*): each
    warn/fail branch on the vendor whose tool its fix names."""
    amd, radeon = amd_machine(), amd_machine("rocminfo/rx7900xtx-gfx1100-rocm6.2.2-ubuntu24.04.txt")
    torch_29 = {**amd.probes["torch"], "version": "2.9.0+rocm6.4", "hip": "6.4.43482-0f2d60242"}
    run = "/home/u/llama run"  # a working directory with a space: the mv line must quote it
    tune = {"PYTORCH_TUNABLEOP_ENABLED": "1"}
    out = {
        # health.gpu_errors
        "nvidia-ecc-uncorrectable": _nvml({"ecc_uncorrected_volatile": 2}, {}),
        "nvidia-remap-failed": _nvml({"remapped_rows": [0, 1, 0, 1]}),
        "nvidia-retired-pages-pending": _nvml({"retired_pages_pending": 1}, {"remapped_rows": [0, 0, 1, 0]}),
        "nvidia-ecc-lifetime": _nvml({"ecc_uncorrected_aggregate": 3}),
        "nvidia-ecc-disabled": _nvml({"ecc_mode_current": 0}, {"ecc_mode_current": 0}),
        # the recorded H200 `nvidia-smi -q` with ECC turned off on both GPUs
        "nvidia-smi-ecc-disabled": _with(nvidia_machine(), commands={"nvidia-smi-health": ran(
            "nvidia-smi-health", stdout=read_fixture(H200_Q).replace(": Enabled", ": Disabled"))}),
        "amd-ecc-uncorrectable": _amdsmi({"ecc_uncorrectable": 1}),
        "amd-ecc-deferred-bad-pages": _amdsmi({"ecc_deferred": 2, "bad_pages": 3}, {}),
        "amd-sysfs-ras-ue": amd_machine(node_health=_sysfs(ue="3")),
        "amd-sysfs-bad-pages": amd_machine(node_health=_sysfs(bad_pages="0x00000001 : 0x00001000 : R\n")),
        # health.pcie_link
        "nvidia-link-x8": _nvml({"pcie_width_current": 8}),
        "nvidia-link-gen3-busy": _nvml({"pcie_gen_current": 3, "clock_event_reasons": 0}),
        "nvidia-two-links-x8": _nvml({"pcie_width_current": 8}, {"pcie_width_current": 8}),
        "amd-sysfs-link-x8": amd_machine(node_health=_sysfs(width="8")),
        "amd-amdsmi-link-gen4": _amdsmi({"pcie_speed_current_mts": 16000}),
        # health.throttle
        "nvidia-thermal-slowdown": _nvml({"clock_event_reasons": 0x40}),
        "nvidia-power-capped": _nvml({"power_limit_mw": 400000}, {"power_limit_mw": 450000}),
        "amd-throttled": _amdsmi({"throttle_status": 1}),
        "amd-power-capped": _amdsmi({"power_cap": 500_000_000}),
        # host.cpu_governor, host.perf_determinism
        "amd-sysfs-powersave-low": amd_machine(node_health=_sysfs(governor="powersave", level="low")),
        "amd-amdsmi-perf-low": _amdsmi({"perf_level": "AMDSMI_DEV_PERF_LEVEL_LOW"}),
        "nvidia-powersave": _with(nvidia_machine(), node_health={"cpufreq_governors": {"powersave": 64}}),
        # env.alloc_conf
        "amd-alloc-expandable-old-rocm": amd_machine(env={"PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True"}),
        "amd-alloc-unknown-option": amd_machine(env={
            "PYTORCH_HIP_ALLOC_CONF": "max_split_size_mb:512,expandable_segment:True"}),
        "amd-alloc-not-key-value": amd_machine(env={"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold"}),
        "amd-alloc-two-vars": amd_machine(env={"PYTORCH_HIP_ALLOC_CONF": "max_split_size_mb:512",
                                               "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}),
        "amd-alloc-two-vars-torch-2.9": amd_machine(probes=_probes(torch=torch_29), env={
            "PYTORCH_HIP_ALLOC_CONF": "max_split_size_mb:512,garbage_collection_threshold:0.8",
            "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}),
        "nvidia-alloc-unknown-option": _with(nvidia_machine(),
                                             env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"}),
        # env.tunableop
        "amd-tunableop-tuning": amd_machine(env=tune),
        "amd-tunableop-tuning-with-results": amd_machine(env=tune, node_health={"tunableop_files": {
            f"{run}/tunableop_results0.csv": _tunableop_head("2.5.1", "gfx942")}}),
        "amd-tunableop-no-results": amd_machine(env={**tune, "PYTORCH_TUNABLEOP_TUNING": "0"}),
        "amd-tunableop-stale": amd_machine(env={**tune, "PYTORCH_TUNABLEOP_TUNING": "0"}, node_health={
            "tunableop_files": {f"{run}/tunableop_results0.csv": _tunableop_head("2.3.0", "gfx90a"),
                                f"{run}/tunableop_results1.csv": _tunableop_head("2.3.0", "gfx90a")}}),
        # env.hipblaslt, env.nccl_channels, env.hsa_xnack, env.scratch_reclaim
        "amd-hipblaslt-off": amd_machine(env={"TORCH_BLAS_PREFER_HIPBLASLT": "0"}),
        "radeon-hipblaslt-on": _with(radeon, env={"TORCH_BLAS_PREFER_HIPBLASLT": "1"}),
        "amd-nccl-not-a-number": amd_machine(env={"NCCL_MIN_NCHANNELS": "forty"}),
        "amd-nccl-max-low": amd_machine(env={"NCCL_MAX_NCHANNELS": "16"}),
        "amd-nccl-min-above-max": amd_machine(env={"NCCL_MIN_NCHANNELS": "64", "NCCL_MAX_NCHANNELS": "48"}),
        "amd-hsa-vars": amd_machine(env={"HSA_XNACK": "1", "HSA_NO_SCRATCH_RECLAIM": "yes"}),
        # env.rccl_validation, env.nccl_ib, env.runtime_knobs
        "amd-rccl-against-validation": amd_machine(env={"RCCL_MSCCL_ENABLE": "1", "TORCH_NCCL_HIGH_PRIORITY": "0",
                                                        "NCCL_IB_GID_INDEX": "0"}),
        "amd-rccl-one-nic": amd_machine(env={"NCCL_IB_HCA": "mlx5_0"}, node_health={"infiniband": {
            "present": True, "hcas": {f"mlx5_{i}": {"ports": {"1": {"state": "ACTIVE", "link_layer": "InfiniBand"}}}
                                      for i in range(2)}}}),
        "nvidia-nic-list-without-rdma": _with(nvidia_machine(), env={"NCCL_IB_HCA": "mlx5_0"},
                                              node_health={"infiniband": {"present": False, "hcas": {}}}),
        # the GID table of tests/fixtures/infiniband/show_gids-connectx6-ibm-spectrumscale.txt: IPv4 RoCE v2 at 5
        "amd-rccl-gid-link-local": amd_machine(env={"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5_0,mlx5_9"},
                                               node_health={"infiniband": {"present": True, "hcas": {"mlx5_0": {
                                                   "ports": {"1": {"state": "ACTIVE", "link_layer": "Ethernet",
                                                                   "gids": {"3": {"gid": "fe80::1186:a6b1:3f0b:c441",
                                                                                  "type": "RoCE v2",
                                                                                  "family": "ipv6-link-local"},
                                                                            "5": {"gid": "::ffff:172.19.0.60",
                                                                                  "type": "RoCE v2",
                                                                                  "family": "ipv4"}}}}}}}}),
        "amd-runtime-knobs": amd_machine(env={"GPU_MAX_HW_QUEUES": "2", "HSA_ENABLE_SDMA": "0"}),
        # os.kernel, driver.window: a ROCm 7.0 user space on the ROCm 6.0 driver (module 6.3.6), an unlisted kernel
        "amd-rocm72-old-driver": amd_machine(
            files={**amd.files, "/sys/module/amdgpu/version": "6.3.6\n"},
            rocm_layout={"roots": {"/opt/rocm": {"info_version": "7.0.2\n", "therock_cores": {}}}},
            platform={**amd.platform, "kernel": "6.5.0-45-generic"}),
    }
    # health.kernel_log: every recorded log, on the machine of its vendor
    for path in sorted(KERNEL_LOGS.glob("*.txt")):
        base = nvidia_machine() if path.name.startswith(("nvidia", "aer-uncorrected-fatal-nvidia")) else amd
        out[f"kernel-log {path.stem}"] = _kernel_log(base, path.name)
    return out


def all_fixes() -> dict[str, Fix]:
    """{"machine / check id": fix} for every warn/fail verdict the checks give on every machine."""
    found: dict[str, Fix] = {}
    parsed: dict = {}  # the tools' outputs parsed once for every machine and run (parsers are pure functions)
    for name, facts in machines().items():
        for expected in ((), ("gfx90a",)):
            ctx = CheckContext(facts, expected_archs=expected, parsed=parsed)
            for r in run_checks(select_checks(), ctx):
                assert r.status.value != "crash", f"{name}: {r.id} crashed: {r.summary} {r.evidence}"
                if r.fix:
                    found.setdefault(f"{name} / {r.id}", r.fix)
                for line in r.evidence:  # health.kernel_log lists the other findings' next steps as evidence
                    if line.startswith("next step for "):
                        title, _, step = line.removeprefix("next step for ").partition(": ")
                        found.setdefault(f"{name} / {r.id} / {title}", Fix.from_dict(step))
    return found


def hint_fixes() -> dict[str, Fix]:
    out = {f"wheel {v}": hints.torch_wheel_fix(v, a) for v, a in (("amd", "gfx942"), ("nvidia", "sm_90"), ("none", ""))}
    out |= {f"error {v}": hints.error_fix(e, v, "gfx942", "gemm")[1] for v in ("amd", "nvidia")
            for e in ("HIP error: invalid device function", "CUDA out of memory", "ValueError: x")}
    out |= {f"hang {v}": hints.hang_fix("gemm", v) for v in ("amd", "nvidia")}
    for cmdline, numa in (("ro quiet", "0"), ("ro iommu=pt", "1"), ("ro amd_iommu=pt", "0")):
        out[f"collective {cmdline}"] = fixes.collective_hang_fix("amd", cmdline, numa)[1]
    out["collective nvidia"] = fixes.collective_hang_fix("nvidia", None, None)[1]
    return out


def kernel_log_fixes() -> dict[str, Fix]:
    """Every fix in kernel_log.json (patterns and Xids, noted ones too), as health.kernel_log fills it in: with the
    log line's PCI address, with an address a shell would split, with a GPU named by its node only, and with none."""
    (sample,) = parse_kernel_log("[   67.058794] amdgpu 0000:c4:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40)")
    data = load("kernel_log.json")
    specs = {f"pattern {p['id']}": p["fix"] for p in data["patterns"]}
    specs |= {f"xid {xid}": info["fix"] for xid, info in data["xids"].items()}
    out = {}
    for key, spec in specs.items():
        for device in ("0000:c4:00.0", "GPU node-2", None):
            out[f"kernel-log {key} device={device}"] = finding_fix(dataclasses.replace(sample, fix=spec, device=device))
    return out


def train_fixes() -> dict[str, Fix]:
    """Every warn/fail branch of smoke-train's verdicts (pure functions of numbers), driven with failing inputs,
    and the fixes of the runs that cannot start."""
    from rocmcheck.monitor import step_memory as memory
    from rocmcheck.result import Status
    from rocmcheck.train import comparisons, fit, kernels, run, verdicts

    flat = [7.0] * 30
    nan = [7.0] * 9 + [float("nan")]
    rows = [{"name": "aten::_scaled_dot_product_attention_math", "count": 1, "self_cpu_us": 5.0, "self_device_us": 5.0,
             "device_us": 5.0},
            {"name": "aten::mm", "count": 1, "self_cpu_us": 9000.0, "self_device_us": 0.0, "device_us": 0.0}]
    leak = memory.detect_leak([100 * memory.MiB + i * 64 * memory.MiB for i in range(20)], 4 * memory.MiB)
    huge = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
            "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192}
    settings = {"micro_batch": 4, "seq_len": 2048, "precision": "amp-bf16", "zero_stage": 0, "world_size": 1,
                "offload_optimizer": False, "offload_params": False, "gradient_checkpointing": False,
                "attention": "sdpa", "lora_rank": None, "grad_accumulation_steps": 1, "optimizer": "fused"}
    est, _ = fit.estimate_run(huge, settings)
    curve = {"loss": [7.0 - i / 20 for i in range(30)], "recorded_on": {}}
    numerics_bad = {"bf16": {"loss": 2.0, "grad_norm": 1.0, "blocks": {"a": 2.0}},
                    "fp32": {"loss": 1.0, "grad_norm": 1.0, "blocks": {"a": 1.0}}}
    per_rank = [{"global_loss": [1.0, 2.0], "local_loss": [1.0, 1.0], "grad_norm": [1.0, 2.0], "weights": w}
                for w in (1.0, 2.0)]
    bench_rows = [{"mode": "loop", "tokens_per_s": 1.0, "step_s": 1.0}, {"mode": "hf_trainer", "tokens_per_s": 2.0,
                  "step_s": 1.0}, {"mode": "loop_compile", "tokens_per_s": 1.0, "step_s": 1.0},
                  {"mode": "compiled_x", "error": "boom"}]
    bench_runs = {"loop": {"losses": [1.0] * 5}, "hf_trainer": {"losses": [3.0] * 5},
                  "loop_compile": {"losses": [5.0] * 5}}
    results = {}
    for ok in (None, True, False):
        results[f"loss_decrease numerics={ok}"] = verdicts.check_loss_decrease(flat, 0.5, ok)
        results[f"accuracy numerics={ok}"] = verdicts.check_accuracy(0.0, 0.1, 0.6, 64, ok)
        results[f"learns numerics={ok}"] = verdicts.check_learns(flat, ok)
    results |= {
        "loss_decrease nan": verdicts.check_loss_decrease(nan, 0.5), "learns nan": verdicts.check_learns(nan, None),
        "finite": verdicts.check_finite(nan, [1.0] * 10, 9),
        "reload error": verdicts.check_reload(None, error="OSError: no space left"),
        "reload differs": verdicts.check_reload(1.0, 0.0, False),
        "reference_curve": verdicts.check_reference_curve([9.0] * 30, curve, "", "cpu"),
        "memory_leak": verdicts.check_memory_leak(leak, "gpu-allocator", [100 * memory.MiB] * 20),
        "memory full": verdicts.check_memory_headroom(95 * memory.GiB, 100 * memory.GiB, "gpu-allocator"),
        "memory above plan": verdicts.check_memory_headroom(20 * memory.GiB, 100 * memory.GiB, "gpu-allocator",
                                                            {"allocated_peak_bytes": 10 * memory.GiB}),
        "memory below plan": verdicts.check_memory_headroom(5 * memory.GiB, 100 * memory.GiB, "gpu-allocator",
                                                            {"allocated_peak_bytes": 10 * memory.GiB}),
        "throughput": verdicts.check_throughput([0.01] * 20 + [1.0] * 5, 1024, 1e6, None, None, True),
        "numerics": verdicts.check_numerics(numerics_bad, True),
        "oom": verdicts.oom_result(3, "OutOfMemoryError", "HIP out of memory", 10, 20, "gpu-allocator", "x"),
        "fit does not fit": fit.check_fit(est, "", 80 * memory.GiB, "AMD Instinct MI300X", "/models/llama 70b")[0],
        "fit nothing fits": fit.check_fit(est, "", 1 * memory.GiB, "a small GPU", "/models/llama 70b")[0],
        "fit tight": fit.check_fit(est, "", int(est.total_bytes * 1.05), "a GPU", "m")[0],
        "kernels math": kernels.check_kernels(rows, True, "sdpa"),
        "kernels cpu hot": kernels.check_kernels([{**rows[1], "name": "aten::mm"},
                                                  {"name": "aten::_flash_attention_forward", "count": 1,
                                                   "self_cpu_us": 1.0, "self_device_us": 1.0, "device_us": 1.0}],
                                                 True, "sdpa"),
        "deepspeed_parity": comparisons.check_deepspeed_parity([9.0] * 20, [1.0] * 20, "ZeRO-3"),
        "offload_cost": comparisons.check_offload_cost([10.0] * 20, [1.0] * 20, "ZeRO-3 offload", True),
        "rank_agreement": comparisons.check_rank_agreement(per_rank, True),
    }
    for r in comparisons.bench_verdicts(bench_rows, bench_runs):
        results[f"bench {r.id}"] = r
    out = {f"train {k} / {r.id}": r.fix for k, r in results.items() if r.status in (Status.WARN, Status.FAIL)}
    # Every branch above must have failed or warned: a branch that passes here is not exercised.
    assert len(out) == len(results), sorted(set(f"train {k} / {r.id}" for k, r in results.items()) - set(out))
    out |= {f"train setup {n}": getattr(run, n) for n in ("NO_DEVICE_FIX", "NO_BF16_FIX", "PEFT_FIX", "ATTN_FIX")}
    out |= {"train setup ranks": run.ranks_fix(2), "train setup seq_len": run.seq_len_fix(64)}
    return out


NODE_HEALTH_FIX_KEYS = ("health.", "host.cpu_governor", "host.perf_determinism", "env.alloc_conf", "env.tunableop",
                        "env.hipblaslt", "env.nccl_channels", "env.hsa_xnack", "env.scratch_reclaim")
TRAIN_FIXES = train_fixes()
FIXES = {**all_fixes(), **hint_fixes(), **kernel_log_fixes(), **TRAIN_FIXES}
SHELL_FIXES = {key: fix for key, fix in FIXES.items() if fix.kind is FixKind.SHELL}


def shown(fix: Fix) -> str:
    """How a fix prints: the pasteable line of a shell fix; `note: ...` / `edit: ...` for the others."""
    return fix.line() if fix.kind is FixKind.SHELL else f"{fix.kind.value}: {fix.line()}"


def test_every_fix_is_a_fix_and_the_machines_reach_most_branches():
    bad = {key: type(fix).__name__ for key, fix in FIXES.items() if not isinstance(fix, Fix)}
    assert not bad, bad
    # Each distinct fix is a branch: the variants above must reach a broad set of them, across areas.
    areas = {key.split(" / ")[1].split(".")[0] for key in FIXES if " / " in key}
    assert {"os", "driver", "rocm", "devices", "container", "gpu", "env", "torch", "triton", "flash_attn",
            "deepspeed", "transformers", "host", "nvidia", "health"} <= areas
    assert len(set(FIXES.values())) >= 45
    assert len(SHELL_FIXES) >= 150 and sum(f.kind is FixKind.NOTE for f in FIXES.values()) >= 20


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_every_shell_fix_is_one_line_that_bash_parses():
    bad = {}
    for key, fix in SHELL_FIXES.items():
        line = fix.line()
        if "\n" in line or "\r" in line:
            bad[key] = "more than one line"
            continue
        proc = subprocess.run(["bash", "-n"], input=line + "\n", capture_output=True, text=True)
        if proc.returncode != 0:
            bad[key] = f"{line!r}: {proc.stderr.strip()}"
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


# The first word of every command in a shell fix, and the command sudo runs: prose that happens to parse ("Restart
# the container with: docker run ...", "sudo Reset the GPU") is caught here. A new fix that needs another command
# adds it to this list.
COMMANDS = {"pip", "sudo", "export", "unset", "docker", "python", "rocmcheck", "echo", "rocminfo", "uname",
            "nvidia-smi", "hipconfig", "amd-smi", "eval", "ulimit", "newgrp", "tail", "grep", "mkdir", "mv", "cat",
            "head", "apt", "amdgpu-install", "cpupower", "dmesg", "lspci", "mount", "reboot", "sed", "sysctl", "tee",
            "update-grub", "usermod", "df", "numactl"}


def _commands(fix: str) -> list[list[str]]:
    """The commands of a fix line (the comment dropped), each as its words."""
    lexer = shlex.shlex(fix, posix=True, punctuation_chars=";&|")
    lexer.commenters = "#"
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    for tok in lexer:
        if tok in (";", "&&", "||", "|", "&"):
            out.append([])
        else:
            out[-1].append(tok)
    return [c for c in out if c]


def _command_words(fix: str) -> list[str]:
    """The command word of each command, and the one sudo runs."""
    words = []
    for command in _commands(fix):
        rest = list(itertools.dropwhile(lambda w: re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w), command))  # VAR=value
        words += rest[:1] + (rest[1:2] if rest[:1] == ["sudo"] else [])
    return words


def test_every_shell_fix_starts_each_command_with_a_real_command():
    bad = [f"{key}: {w!r} in {fix.line()!r}" for key, fix in SHELL_FIXES.items() for w in _command_words(fix.text)
           if w not in COMMANDS]
    assert not bad, "\n".join(bad)


def test_a_rocm_root_a_shell_would_split_pastes_as_one_word(tmp_path):
    fix = FIXES["amd-rocm-version-unknown / rocm.install"]
    assert fix.kind is FixKind.SHELL
    assert fix.text == "hipconfig --version; cat " + shlex.quote(f"{HOSTILE_ROOT}/.info/version")
    # Run as pasted (hipconfig stubbed by a shell function): cat gets one argument, nothing else runs.
    script = f"hipconfig() {{ :; }}; cat() {{ printf '%s\\n' \"$#\" \"$1\"; }}; {fix.text}"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert out.stdout.splitlines() == ["1", f"{HOSTILE_ROOT}/.info/version"]
    assert not (tmp_path / "PWNED").exists()


def test_a_tool_that_cannot_start_is_not_called_missing():
    for name, says in (("amd-rocminfo-no-interpreter", "/usr/bin/python3.99"),
                       ("amd-rocminfo-no-interpreter-old-bundle", "installed (/opt/rocm/bin/rocminfo) but could not "
                                                                  "be started")):
        r = run_checks(select_checks(only=("gpu.rocminfo",)), CheckContext(machines()[name]))[0]
        assert r.status.value == "fail" and "not found" not in r.summary and says in r.summary, r.summary
        assert r.fix.text == "head -n 1 /opt/rocm/bin/rocminfo"


KNOWN_VARS = set(ENV_NAMES) | {"HSA_OVERRIDE_GFX_VERSION", "PYTORCH_ROCM_ARCH", "ROCR_VISIBLE_DEVICES",
                               "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NCCL_P2P_DISABLE", "NCCL_DEBUG",
                               "DS_ACCELERATOR", "MAX_JOBS", "ROCM_PATH", "GPU_ARCHS", "PYTORCH_TUNABLEOP_TUNING",
                               "HSA_XNACK", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "AMD_LOG_LEVEL",
                               "HIP_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING", "TORCH_BLAS_PREFER_CUBLASLT",
                               "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"}


def test_env_var_names_keep_their_case():
    bad = []
    for key, fix in FIXES.items():
        for word in re.findall(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+", fix.line()):
            if word.upper() in KNOWN_VARS and word != word.upper():
                bad.append(f"{key}: {word!r} in {fix.line()!r}")
    assert not bad, "\n".join(bad)


# Each warn/fail branch of the node-health checks, on the variant that produces it, and how its fix begins as it
# prints (shown()): the vendor's own tool where AMD and NVIDIA differ.
NODE_HEALTH_BRANCHES = {
    "nvidia-ecc-uncorrectable / health.gpu_errors": "nvidia-smi -q -d ECC,ROW_REMAPPER -i 0 ",
    "nvidia-remap-failed / health.gpu_errors": "nvidia-smi -q -d ECC,ROW_REMAPPER -i 0 ",
    "nvidia-retired-pages-pending / health.gpu_errors": "nvidia-smi -q -d ECC,ROW_REMAPPER -i 0,1 ",
    "nvidia-ecc-lifetime / health.gpu_errors": "nvidia-smi -q",
    "nvidia-ecc-disabled / health.gpu_errors": "sudo nvidia-smi -i 0,1 -e 1 ",
    "nvidia-smi-ecc-disabled / health.gpu_errors": "sudo nvidia-smi -i 0,1 -e 1 ",
    "amd-ecc-uncorrectable / health.gpu_errors": "amd-smi metric --ecc -g 0; amd-smi bad-pages -g 0 ",
    "amd-ecc-deferred-bad-pages / health.gpu_errors": "amd-smi metric --ecc -g 0;",
    "amd-sysfs-ras-ue / health.gpu_errors": "amd-smi metric --ecc -g 0000:03:00.0;",
    "amd-sysfs-bad-pages / health.gpu_errors": "amd-smi metric --ecc -g 0000:03:00.0;",
    "nvidia-link-x8 / health.pcie_link": "sudo lspci -vv -s 0000:00:06.0 | grep",
    "nvidia-link-gen3-busy / health.pcie_link": "sudo lspci -vv -s 0000:00:06.0 | grep",
    "nvidia-two-links-x8 / health.pcie_link": "sudo lspci -vv -d 10de: | grep",
    "amd-sysfs-link-x8 / health.pcie_link": "sudo lspci -vv -s 0000:03:00.0 | grep",
    "amd-amdsmi-link-gen4 / health.pcie_link": "sudo lspci -vv -s 0000:05:00.0 | grep",
    "nvidia-thermal-slowdown / health.throttle": "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i 0 ",
    "nvidia-power-capped / health.throttle": "sudo nvidia-smi -i 0 -pl 700 && sudo nvidia-smi -i 1 -pl 700 ",
    "amd-throttled / health.throttle": "amd-smi metric --power --temperature -g 0 ",
    "amd-power-capped / health.throttle": "sudo amd-smi reset -g 0 --power-cap ",
    "amd-sysfs-powersave-low / host.cpu_governor": "sudo cpupower frequency-set -g performance ",
    "nvidia-powersave / host.cpu_governor": "sudo cpupower frequency-set -g performance ",
    "amd-sysfs-powersave-low / host.perf_determinism": "sudo amd-smi set -g 0000:03:00.0 --perf-level AUTO ",
    "amd-amdsmi-perf-low / host.perf_determinism": "sudo amd-smi set -g 0 --perf-level AUTO ",
    "amd-alloc-expandable-old-rocm / env.alloc_conf": "unset PYTORCH_HIP_ALLOC_CONF ",
    "amd-alloc-unknown-option / env.alloc_conf": "export PYTORCH_HIP_ALLOC_CONF=max_split_size_mb:512 ",
    "amd-alloc-not-key-value / env.alloc_conf": "unset PYTORCH_CUDA_ALLOC_CONF ",
    "amd-alloc-two-vars / env.alloc_conf":
        "unset PYTORCH_CUDA_ALLOC_CONF && export PYTORCH_HIP_ALLOC_CONF=max_split_size_mb:512 ",
    "amd-alloc-two-vars-torch-2.9 / env.alloc_conf": "unset PYTORCH_HIP_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF && "
                                                     "export PYTORCH_ALLOC_CONF=max_split_size_mb:512,garbage",
    "nvidia-alloc-unknown-option / env.alloc_conf": "unset PYTORCH_CUDA_ALLOC_CONF ",
    "amd-tunableop-tuning / env.tunableop": "note: Tune once",
    "amd-tunableop-tuning-with-results / env.tunableop": "export PYTORCH_TUNABLEOP_TUNING=0 ",
    "amd-tunableop-no-results / env.tunableop": "unset PYTORCH_TUNABLEOP_ENABLED ",
    "amd-tunableop-stale / env.tunableop": "mv '/home/u/llama run/tunableop_results0.csv' "
                                           "'/home/u/llama run/tunableop_results0.csv.stale' && mv ",
    "amd-hipblaslt-off / env.hipblaslt": "unset TORCH_BLAS_PREFER_HIPBLASLT ",
    "radeon-hipblaslt-on / env.hipblaslt": "unset TORCH_BLAS_PREFER_HIPBLASLT ",
    "amd-nccl-not-a-number / env.nccl_channels": "export NCCL_MIN_NCHANNELS=40 ",
    "amd-nccl-max-low / env.nccl_channels": "export NCCL_MIN_NCHANNELS=40 && unset NCCL_MAX_NCHANNELS ",
    "amd-nccl-min-above-max / env.nccl_channels": "export NCCL_MIN_NCHANNELS=40 && unset NCCL_MAX_NCHANNELS ",
    "amd-hsa-vars / env.hsa_xnack": "unset HSA_XNACK ",
    "amd-hsa-vars / env.scratch_reclaim": "export HSA_NO_SCRATCH_RECLAIM=1 ",
    "kernel-log mi300x-ras-uncorrectable-aca-dmesg / health.kernel_log": "amd-smi metric --ecc -g 0000:1c:00.0;",
    "kernel-log amdgpu-ring-timeout-reset-dmesg / health.kernel_log / amdgpu GPU reset": "sudo dmesg | grep -B20",
    "kernel-log amdgpu-sdma-timeout-reset-syslog / health.kernel_log": "sudo dmesg | grep",
    "kernel-log aer-uncorrected-fatal-nvidia-dmesg-reltime / health.kernel_log": "sudo lspci -vvv -s 0000:00:03.0 ",
    "kernel-log nvidia-xid-79-fallen-off-bus / health.kernel_log": "note: Reboot the node",
    "kernel-log oom-killer-dmesg-iso / health.kernel_log": "sudo dmesg | grep -i -A3 oom ",
    "kernel-log pattern amdgpu_ras_uncorrectable device=None": "note: run amd-smi metric --ecc -g ADDRESS;",
    "kernel-log pattern amdgpu_ras_uncorrectable device=GPU node-2": "note: run amd-smi metric --ecc -g ADDRESS;",
    "kernel-log pattern amdgpu_ring_timeout device=0000:c4:00.0":
        "sudo dmesg | grep -i -e 'ring .* timeout' -e 'GPU reset'  # if the GPU stays hung, once it is idle: sudo "
        "amd-smi reset -G -g 0000:c4:00.0 ",
    "kernel-log pattern amdgpu_ring_timeout device=None":
        "sudo dmesg | grep -i -e 'ring .* timeout' -e 'GPU reset'  # if the GPU stays hung, once it is idle: sudo "
        "amd-smi reset -G -g ADDRESS ",
}


def test_every_node_health_branch_gives_its_fix():
    missing = sorted(set(NODE_HEALTH_BRANCHES) - set(FIXES))
    assert not missing, missing
    wrong = {k: shown(FIXES[k]) for k, start in NODE_HEALTH_BRANCHES.items() if not shown(FIXES[k]).startswith(start)}
    assert not wrong, wrong
    logs = {p.stem for p in KERNEL_LOGS.glob("*.txt")}
    judged = {k.split(" / ")[0].removeprefix("kernel-log ") for k in FIXES if k.endswith(" / health.kernel_log")}
    # Only the noted-only (correctable RAS) and Xid 45 logs pass; every other recorded log gives its fix.
    assert logs - judged == {"amdgpu-ras-correctable-node-scraper-test", "nvidia-xid-45-after-nvlink-xid-journal"}


def test_a_kernel_log_device_is_a_quoted_field():
    (sample,) = parse_kernel_log("[   67.058794] amdgpu 0000:c4:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40)")
    spec = {"shell": "amd-smi metric --ecc -g {device}", "why": "the counters of {device}"}
    fix = finding_fix(dataclasses.replace(sample, fix=spec, device="0000:c4:00.0"))
    assert (fix.kind, fix.text, fix.why) == (FixKind.SHELL, "amd-smi metric --ecc -g 0000:c4:00.0",
                                             "the counters of 0000:c4:00.0")
    # A device name the parser would never give (it reads a PCI address) still could not run anything.
    hostile = finding_fix(dataclasses.replace(sample, fix=spec, device="0000:c4:00.0; touch PWNED"))
    assert hostile.kind is FixKind.NOTE and "PWNED" not in hostile.line()


def _disruptive(words: list[str]) -> bool:
    """A reboot or a GPU reset: a fix may name it only inside its comment."""
    words = words[1:] if words[:1] == ["sudo"] else words
    return words[:1] == ["reboot"] or (words[:2] == ["amd-smi", "reset"] and ("-G" in words or "--gpureset" in words)) \
        or (words[:1] == ["nvidia-smi"] and ("-r" in words or "--gpu-reset" in words))


def test_node_health_fixes_keep_reboots_and_gpu_resets_in_the_comment():
    keys = [k for k in SHELL_FIXES if k.startswith("kernel-log ") or any(f" / {c}" in k for c in NODE_HEALTH_FIX_KEYS)]
    assert len(keys) > 100
    bad = [f"{k}: {FIXES[k].line()}" for k in keys if any(_disruptive(c) for c in _commands(FIXES[k].text))]
    assert not bad, "\n".join(bad)
    assert _disruptive(["sudo", "amd-smi", "reset", "-G", "-g", "0"]) and _disruptive(["sudo", "reboot"])
    assert not _disruptive(["sudo", "amd-smi", "reset", "-g", "0", "--power-cap"])


def test_the_hsa_override_fix_unsets_the_real_variable():
    fix = FIXES["amd-env-instinct-override / env.hsa_override"]
    assert fix.line().startswith("unset HSA_OVERRIDE_GFX_VERSION")


def test_no_bare_pip_install_torch_and_reinstalls_force():
    for key, fix in SHELL_FIXES.items():
        for m in re.finditer(r"pip install( --force-reinstall)? torch(?P<rest>[^&;#]*)", fix.text):
            assert "--index-url" in m.group("rest"), f"{key}: bare pip install torch: {fix.line()}"
    assert "--force-reinstall" in FIXES["amd-torch-lacks-arch / torch.arch_list"].text
    assert "--force-reinstall" in FIXES["wheel amd"].text
    assert "/whl/cpu" in FIXES["cpu-only / torch.installed"].text


def test_the_container_fix_carries_every_flag_the_host_checks_want():
    fix = FIXES["amd-no-devices-container / container.flags"]
    for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--ulimit memlock=-1:-1", "--ipc=host",
                 "--security-opt seccomp=unconfined", "--group-add render"):
        assert flag in fix.text


def test_flash_attn_fix_takes_max_jobs_from_build_env():
    fix = FIXES["amd-libraries-broken / flash_attn.import"]
    assert "MAX_JOBS=" not in fix.text and "rocmcheck build-env --target flash-attn --arch gfx942" in fix.text


def test_iommu_passthrough_is_one_fact_for_checks_and_probes():
    evidence, _ = fixes.collective_hang_fix("amd", "BOOT_IMAGE=/vmlinuz ro amd_iommu=pt\n", "0\n")
    assert not any("iommu" in e for e in evidence)
    facts = amd_machine(files={"/proc/cmdline": "ro amd_iommu=pt", "/proc/sys/kernel/numa_balancing": "0\n"})
    assert [r.status.value for r in run_checks(select_checks(only=("host.iommu",)), CheckContext(facts))] == ["pass"]


def test_train_fixes_are_pasteable_lines_with_their_meaning():
    # Every train verdict branch is in FIXES (so the bash -n, command and env-var tests above cover it); each is a
    # command with its reason as a comment, or a note, and keeps what it asked a person to do.
    assert len(TRAIN_FIXES) >= 35
    assert all(f.kind is FixKind.NOTE or (f.kind is FixKind.SHELL and f.why and f.text.startswith(
        ("rocmcheck ", "pip ", "df ", "numactl ", "PYTORCH_CUDA_ALLOC_CONF="))) for f in TRAIN_FIXES.values()), \
        {k: shown(f) for k, f in TRAIN_FIXES.items()}
    fx = {k.split(" / ")[0]: shown(v) for k, v in TRAIN_FIXES.items()}
    assert fx["train oom"].startswith("rocmcheck smoke-train --gradient-checkpointing --micro-batch 1 ")
    assert fx["train learns numerics=False"].startswith("note: train.numerics failed")
    assert fx["train loss_decrease numerics=None"].startswith("rocmcheck smoke-train --device cpu  # ")
    assert fx["train loss_decrease numerics=True"].startswith("rocmcheck smoke-train --lr 1e-3 --steps 120  # ")
    assert fx["train fit does not fit"].startswith("rocmcheck smoke-train --model '/models/llama 70b' ")
    assert fx["train fit nothing fits"].startswith("rocmcheck plan --model '/models/llama 70b'  # ")
    assert "loss.item()" in fx["train memory_leak"] and fx["train memory_leak"].startswith("note: ")
    assert fx["train rank_agreement"].startswith("rocmcheck smoke-train --gpus 2 --device cpu  # ")


def test_probe_and_check_wheel_indexes_follow_the_same_rocm():
    machine = _with(amd_machine(), rocm_layout={"roots": {"/opt/rocm": {"info_version": "6.3.1-48\n"}}},
                    probes=_probes(torch={**amd_machine().probes["torch"], "arch_list": ["gfx90a"]}))
    check_fix = run_checks(select_checks(only=("torch.arch_list",)), CheckContext(machine))[0].fix
    probe_fix = hints.torch_wheel_fix("amd", "gfx942", "6.3.1")
    assert check_fix.text.endswith("/whl/rocm6.3") and probe_fix.text.endswith("/whl/rocm6.3")


# Numbers no real tool prints (thousands of digits, past int()'s 4300; infinity once parsed; digits of another
# script), put in place of every number of a recorded machine: in tool outputs, versions, variables, sysfs texts.
HOSTILE_NUMBERS = ("9" * 5000, "1e999", "٣٣")
HOSTILE_MACHINES = ("amd-healthy", "nvidia-h100", "nvidia-smi-ecc-disabled", "amd-sysfs-link-x8", "amd-two-rocms",
                    "amd-alloc-two-vars", "amd-ecc-uncorrectable", "amd-tunableop-stale", "amd-env-instinct-override",
                    "amd-libraries-broken", "nvidia-power-capped", "kernel-log nvidia-xid-79-fallen-off-bus",
                    "kernel-log mi300x-ras-uncorrectable-aca-dmesg", "amd-env-radeon-override",
                    "amd-nccl-min-above-max")


def _numbers_replaced(value, number: str):
    if isinstance(value, str):
        return re.sub(r"[0-9]+(?:\.[0-9]+)?", lambda m: number, value)
    if isinstance(value, dict):
        return {k: _numbers_replaced(v, number) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_replaced(v, number) for v in value]
    return value


@pytest.mark.parametrize("number", HOSTILE_NUMBERS, ids=("5000-digits", "1e999", "arabic-indic"))
def test_no_check_and_no_summary_crashes_on_hostile_numbers(number):
    from rocmcheck.doctor import DoctorRun

    known = machines()
    for name in HOSTILE_MACHINES:
        facts = Facts.from_dict(_numbers_replaced(known[name].to_dict(), number))
        ctx = CheckContext(facts, expected_archs=("gfx942",))
        results = run_checks(select_checks(), ctx)
        crashed = [f"{r.id}: {r.summary}" for r in results if r.status.value == "crash"]
        assert not crashed, (name, crashed)
        DoctorRun(facts, results, 0.0, "bundle", ctx).machine_summary()  # outside any check: must not raise


def test_a_fix_read_back_from_someone_elses_file_is_a_note():
    from rocmcheck.fixes import FixKind, as_recorded, edit, shell

    code = shell("python -c 'import torch'", "shows the error")
    recorded = as_recorded(code, "recorded")
    assert recorded.kind is FixKind.NOTE and recorded.text == "recorded: python -c 'import torch'  # shows the error"
    assert as_recorded(code).text == code.line()
    change = edit("ds.json", "set stage to 3")
    assert as_recorded(change) is change and as_recorded(None) is None
