"""MAX_JOBS from cores AND free memory: too many parallel hipcc/nvcc jobs is the classic
out-of-memory build failure ("Killed signal terminated program cc1plus")."""

from __future__ import annotations

from dataclasses import dataclass

from rocmcheck.buildenv.knowledge import build_facts
from rocmcheck.units import GIB


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
