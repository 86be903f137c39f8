"""What this host lets a process use: the CPUs it may run on and the memory it may still take, each narrowed by a
cgroup v2 limit where a container sets one (inside a container /proc/meminfo shows the host's memory, not the
limit). build-env reads them for MAX_JOBS; the doctor records the host's memory and smoke-train judges its CPU
run's peak against it: /proc/meminfo is read here alone (meminfo_bytes)."""

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
    avail = meminfo_bytes(_read_text(Path(meminfo)), "MemAvailable")
    source = "MemAvailable"
    cg = Path(cgroup_root)
    limit = _read_int(cg / "memory.max")
    used = _read_int(cg / "memory.current")
    if limit is not None and used is not None:
        room = max(0, limit - used)
        if avail is None or room < avail:
            avail, source = room, "cgroup memory.max - memory.current"
    return avail, source


def total_memory(meminfo: str | Path = "/proc/meminfo", cgroup_root: str | Path = "/sys/fs/cgroup") -> int | None:
    """Bytes of memory this host has for a process: MemTotal, or a container's memory limit where it is lower."""
    total = meminfo_bytes(_read_text(Path(meminfo)), "MemTotal")
    limit = _read_int(Path(cgroup_root) / "memory.max")
    if limit is not None and (total is None or limit < total):
        return limit
    return total


def meminfo_bytes(text: str | None, field: str) -> int | None:
    """A field of /proc/meminfo's text ("MemTotal", "MemAvailable") in bytes; None when it is not there."""
    for line in (text or "").splitlines():
        if line.startswith(field + ":"):
            parts = line.split()
            try:
                value = int(parts[1])
            except (IndexError, ValueError):
                return None
            unit = parts[2].lower() if len(parts) > 2 else "b"
            return value * KIB if unit == "kb" else value
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
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
