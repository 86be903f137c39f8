"""What this host lets a process use: the CPUs it may run on and the memory it may still take, each narrowed by a
cgroup v2 limit where a container sets one (inside a container /proc/meminfo shows the host's memory, not the
limit). build-env reads them for MAX_JOBS; smoke-train's scratch checkpoint reads the memory and the kernel's
writeback threshold (train/scratch.py)."""

from __future__ import annotations

import os
from pathlib import Path

from rocmcheck.units import KIB


def usable_cores(cgroup_root: str | Path = "/sys/fs/cgroup") -> int:
    """CPUs this process may run on: the affinity mask, further capped by a cgroup v2 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota(Path(cgroup_root) / "cpu.max")
    if quota is not None:
        cores = min(cores, quota)
    return max(1, cores)


def available_memory(meminfo: str | Path = "/proc/meminfo",
                     cgroup_root: str | Path = "/sys/fs/cgroup") -> tuple[int | None, str]:
    """Bytes a process may still take: MemAvailable, or less when a container's memory limit says so.
    (Inside a container /proc/meminfo shows the host's memory, not the limit.)"""
    avail = _mem_available(Path(meminfo))
    source = "MemAvailable"
    cg = Path(cgroup_root)
    limit = _read_int(cg / "memory.max")
    used = _read_int(cg / "memory.current")
    if limit is not None and used is not None:
        room = max(0, limit - used)
        if avail is None or room < avail:
            avail, source = room, "cgroup memory.max - memory.current"
    return avail, source


def writeback_threshold(available: int, vm: str | Path = "/proc/sys/vm") -> int | None:
    """Bytes of dirty page cache from which the kernel starts writing it back to the disk in the background:
    vm.dirty_background_bytes where it is set, else vm.dirty_background_ratio percent of `available` (the kernel
    takes the ratio of the memory it can dirty, free and file-backed pages, which MemAvailable approximates; a
    cgroup's own limit narrows both). None when neither can be read."""
    folder = Path(vm)
    fixed = _read_int(folder / "dirty_background_bytes")
    if fixed:
        return fixed
    ratio = _read_int(folder / "dirty_background_ratio")
    if ratio is None:
        return None
    return available * ratio // 100


def _mem_available(path: Path) -> int | None:
    try:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("MemAvailable:"):
                parts = line.split()
                value = int(parts[1])
                unit = parts[2].lower() if len(parts) > 2 else "b"
                return value * KIB if unit == "kb" else value
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_cpu_quota(path: Path) -> int | None:
    """cpu.max "200000 100000" -> 2 CPUs; "max 100000" -> no quota."""
    try:
        quota, period = path.read_text().split()[:2]
        if quota == "max":
            return None
        return max(1, int(quota) // int(period))
    except (OSError, ValueError):
        return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" -> no limit
