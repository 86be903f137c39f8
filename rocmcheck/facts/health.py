"""Node-health facts: the kernel log, the GPUs' PCIe links and RAS counters from sysfs, CPU frequency
governors, and the TunableOp result files the environment points at.

Everything here is read-only and bounded; the kernel log goes through the one command runner. The sysfs
values are kept as the raw text of each file, so a bundle replays them exactly.
"""

from __future__ import annotations

import glob
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from rocmcheck.facts.host_config import host_config
from rocmcheck.facts.infiniband import read_infiniband
from rocmcheck.facts.tools import find_tool
from rocmcheck.runner import CommandResult, run_command
from rocmcheck.safe.files import read_head

# journalctl keeps the newest lines with -n; dmesg prints the whole ring buffer (bounded by the kernel's
# log_buf_len, 256 KiB-several MiB). The tail is what matters, so both are cut to the newest lines.
KERNEL_LOG_MAX_LINES = 20_000
KERNEL_LOG_MAX_CHARS = 1_500_000
JOURNALCTL_ARGV = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-n", str(KERNEL_LOG_MAX_LINES)]
DMESG_ARGV = ["dmesg", "--time-format", "iso"]

# PCI display-class devices of AMD and NVIDIA (VGA 0x0300, 3D 0x0302, display 0x0380).
GPU_VENDORS = {"0x1002": "amd", "0x10de": "nvidia"}
GPU_CLASSES = ("0x0300", "0x0302", "0x0380")
PCI_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
# amdgpu RAS sysfs (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c): "<block>_err_count" holds "ue: N\nce: M",
# gpu_vram_bad_pages one line per retired page.
AMDGPU_RAS_GLOB = "ras/*_err_count"
TUNABLEOP_DEFAULT_FILENAME = "tunableop_results.csv"
TUNABLEOP_HEAD_LINES = 12


def kernel_log_usable(res: CommandResult | None) -> bool:
    """journalctl answers 0 with '-- No entries --' when the user may not read the system journal."""
    if res is None or not res.ok:
        return False
    lines = [l for l in res.stdout.splitlines() if l.strip() and not l.startswith("-- ")]
    return bool(lines) and not lines[0].startswith("No journal files")


def _keep_tail(res: CommandResult) -> CommandResult:
    if len(res.stdout) > KERNEL_LOG_MAX_CHARS:
        tail = res.stdout[-KERNEL_LOG_MAX_CHARS:]
        res.stdout = tail[tail.find("\n") + 1:]
    return res


def collect_kernel_log(timeout: float, env: Mapping[str, str] | None = None) -> dict[str, CommandResult]:
    """journalctl -k for this boot, else dmesg. The two run side by side, so together they take at most
    `timeout`: a hung journald does not cost dmesg its time. dmesg's answer is kept only when journalctl gave
    nothing usable, and then both attempts are kept: the check says why neither worked (and which hung)."""
    argvs = {"kernel-log-dmesg": [find_tool("dmesg", env) or DMESG_ARGV[0], *DMESG_ARGV[1:]]}
    journalctl = find_tool("journalctl", env)
    if journalctl:
        argvs = {"kernel-log-journalctl": [journalctl, *JOURNALCTL_ARGV[1:]], **argvs}
    with ThreadPoolExecutor(max_workers=len(argvs)) as pool:
        running = {key: pool.submit(run_command, argv, timeout=timeout) for key, argv in argvs.items()}
        out = {key: _keep_tail(job.result()) for key, job in running.items()}  # run_command never raises
    if kernel_log_usable(out.get("kernel-log-journalctl")):
        del out["kernel-log-dmesg"]
    return out


def _read(path: str, limit: int = 65_536) -> str | None:
    return read_head(path, limit)


def _pci_gpus(root: str) -> list[dict[str, Any]]:
    gpus = []
    for dev in sorted(glob.glob(os.path.join(root, "bus/pci/devices/*"))):
        vendor = (_read(os.path.join(dev, "vendor")) or "").strip()
        klass = (_read(os.path.join(dev, "class")) or "").strip()
        if vendor not in GPU_VENDORS or not klass.startswith(GPU_CLASSES):
            continue
        entry: dict[str, Any] = {"bdf": os.path.basename(dev), "vendor": GPU_VENDORS[vendor], "class": klass,
                                 "device": (_read(os.path.join(dev, "device")) or "").strip() or None}
        entry.update({name: _read(os.path.join(dev, name)) for name in PCI_LINK_FILES})
        # The link trains to the lower of the GPU's and its upstream port's capability.
        parent = os.path.basename(os.path.dirname(os.path.realpath(dev)))
        parent_dev = os.path.join(root, "bus/pci/devices", parent)
        if os.path.isdir(parent_dev):
            entry["upstream"] = {"bdf": parent, **{n: _read(os.path.join(parent_dev, n))
                                                   for n in ("max_link_speed", "max_link_width")}}
        if entry["vendor"] == "amd":
            entry["ras"] = {os.path.basename(p): _read(p)
                            for p in sorted(glob.glob(os.path.join(dev, AMDGPU_RAS_GLOB)))}
            bad = _read(os.path.join(dev, "ras/gpu_vram_bad_pages"))
            entry["bad_pages"] = None if bad is None else bad[:4096]
            entry["perf_level"] = _read(os.path.join(dev, "power_dpm_force_performance_level"))
        gpus.append(entry)
    return gpus


def _governors(root: str) -> dict[str, int]:
    found = Counter()
    for path in glob.glob(os.path.join(root, "devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")):
        value = (_read(path) or "").strip()
        if value:
            found[value] += 1
    return dict(found)


def tunableop_filename(env: dict[str, str]) -> str:
    return env.get("PYTORCH_TUNABLEOP_FILENAME") or TUNABLEOP_DEFAULT_FILENAME


def _tunableop_files(env: dict[str, str], cwd: str) -> dict[str, str | None]:
    """Heads of the TunableOp result files this environment would read (their Validator lines)."""
    if env.get("PYTORCH_TUNABLEOP_ENABLED") != "1":
        return {}
    name = tunableop_filename(env)
    stem, ext = os.path.splitext(name)
    pattern = name.replace("%d", "*") if "%d" in name else f"{stem}*{ext}"  # per-device files: results0.csv ...
    out = {}
    for path in sorted(glob.glob(pattern if os.path.isabs(pattern) else os.path.join(cwd, pattern)))[:16]:
        text = _read(path, 16_384) or ""
        out[path] = "\n".join(text.splitlines()[:TUNABLEOP_HEAD_LINES])
    return out


def node_health(env: dict[str, str], root: str = "/sys", cwd: str | None = None,
                config_root: str = "/") -> dict[str, Any]:
    """The in-process node facts (cheap: file reads only). config_root: where /etc and /usr/lib are (host_config)."""
    uptime = (_read("/proc/uptime") or "").split()
    return {
        **host_config(config_root, root),
        "uptime_s": float(uptime[0]) if uptime and _is_float(uptime[0]) else None,
        "pci_gpus": _pci_gpus(root),
        "cpufreq_governors": _governors(root),
        "tunableop_files": _tunableop_files(env, cwd or os.getcwd()),
        "infiniband": read_infiniband(os.path.join(root, "class/infiniband")),
    }


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
