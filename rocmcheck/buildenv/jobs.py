"""MAX_JOBS from cores AND free memory: too many parallel hipcc/nvcc jobs is the classic
out-of-memory build failure ("Killed signal terminated program cc1plus")."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocmcheck.buildenv.knowledge import build_facts
from rocmcheck.units import GIB, KIB


@dataclass(frozen=True)
class JobsEstimate:
    max_jobs: int
    cores: int
    available_bytes: int | None  # None: could not be read; the rule then uses cores only
    gib_per_job: float
    threads_per_job: int
    memory_source: str  # "MemAvailable", "cgroup memory.max", "unknown"

    def explain(self) -> str:
        """The rule with this machine's numbers in it, for a comment next to MAX_JOBS."""
        by_cores = max(1, self.cores // self.threads_per_job)
        per_job = self.gib_per_job * self.threads_per_job
        if self.available_bytes is None:
            mem = "free memory unknown"
        else:
            gib = self.available_bytes / GIB
            mem = f"{gib:.1f} GiB free ({self.memory_source}) / {per_job:g} GiB per job = {int(gib // per_job)}"
        threads = f" (NVCC_THREADS={self.threads_per_job} per job)" if self.threads_per_job > 1 else ""
        source = build_facts()["max_jobs"]["sources"][0]
        return (
            f"MAX_JOBS = min({self.cores} usable cores{threads} -> {by_cores}, {mem}), at least 1. "
            f"Rule: ~{self.gib_per_job:g} GiB peak per compile job, from flash-attn's own heuristic: {source}"
        )


def estimate_jobs(
    cores: int,
    available_bytes: int | None,
    threads_per_job: int = 1,
    gib_per_job: float | None = None,
    memory_source: str = "MemAvailable",
) -> JobsEstimate:
    """The rule itself (flash-attn's NinjaBuildExtension heuristic, see build_facts.json)."""
    if gib_per_job is None:
        gib_per_job = float(build_facts()["max_jobs"]["gib_per_job"])
    threads_per_job = max(1, threads_per_job)
    by_cores = max(1, cores // threads_per_job)
    jobs = by_cores
    if available_bytes is not None:
        by_memory = int(available_bytes // (gib_per_job * threads_per_job * GIB))
        jobs = min(by_cores, by_memory)
    return JobsEstimate(
        max(1, jobs), cores, available_bytes, gib_per_job, threads_per_job,
        memory_source if available_bytes is not None else "unknown",
    )


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
    """Bytes a build may still use: MemAvailable, or less when a container's memory limit says so.
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
