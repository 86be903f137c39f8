"""How many threads a CPU fine-tune gives torch: as many as the CPU time this process actually gets, not the cores
the machine has. A container or a Slurm job limited to 1.5 CPUs of a 64-core host, with torch's default of 64
threads, runs 64 threads that each wait on the others whenever one is throttled or descheduled; sized to the
budget, a shared machine slows the run in proportion to its share instead.

The budget is the smaller of two limits:
- the CPU affinity (os.sched_getaffinity: taskset, Slurm's --cpus-per-task with cgroup cpusets, numactl), and
- the cgroup CPU quota of the process's cgroup or any cgroup above it, rounded up: cgroup v2 `cpu.max`
  ("QUOTA PERIOD", or "max PERIOD" for none) and cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1 for none),
  found through /proc/self/cgroup's paths under /sys/fs/cgroup
  (https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files,
  https://docs.kernel.org/scheduler/sched-bwc.html).
Rounded up: the quota is spent by the cgroup as a whole, so 2 threads under a quota of 1.5 CPUs run 75 ms of every
100 ms together and wait together, rather than one waiting on the other.

OMP_NUM_THREADS set by the person wins: the run keeps torch's count then, and says so.

How the threads wait matters as much as how many there are. An OpenMP thread with no work spins on its CPU before it
sleeps (libgomp, torch's OpenMP on Linux: 300,000 spins when OMP_WAIT_POLICY is unset), so on a box shared with
other jobs the waiting thread burns the time slice the working one needs: with six busy jobs beside it on a 2-core
box, a short run took 3-4 times longer spinning than with OMP_WAIT_POLICY=PASSIVE, and 20-40% less time when quiet
(benchmarks/RESULTS.md, section 25).
wait_passively sets PASSIVE before torch is imported, unless the person chose a policy (OMP_WAIT_POLICY,
GOMP_SPINCOUNT, or Intel OpenMP's KMP_BLOCKTIME), which wins
(https://gcc.gnu.org/onlinedocs/libgomp/OMP_005fWAIT_005fPOLICY.html).

cpu_budget is pure (it reads the files under the root it is given, through rocmcheck/safe's bounded readers);
apply sizes torch. Importing this module imports no torch.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from rocmcheck.safe.files import read_head

CGROUP_ROOT = Path("/sys/fs/cgroup")
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
# Any of these set by the person is their choice of how OpenMP threads wait: rocmcheck leaves it.
WAIT_CHOICES = (WAIT_POLICY_ENV, "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
PROC_SELF_CGROUP = "/proc/self/cgroup"
MAX_CGROUP_FILE = 4096  # /proc/self/cgroup is a dozen short lines; cpu.max and the cfs files are one number or two
# A quota this close below a whole CPU count is that count (the kernel's periods are whole microseconds).
QUOTA_SLACK = 1e-6


@dataclass(frozen=True)
class CpuBudget:
    threads: int  # torch's intra-op threads for this process
    affinity: int | None  # CPUs this process may run on (None: unknown)
    quota: float | None  # CPUs the tightest cgroup quota allows (None: no quota)
    ranks: int = 1  # processes of the run on this machine sharing the budget
    asked: int | None = None  # OMP_NUM_THREADS as the person set it
    wait: str | None = None  # OMP_WAIT_POLICY in effect (wait_passively's, or the person's)

    def describe(self) -> str:
        """"CPU: 2 threads (affinity 2, cgroup quota 1.5)": the run's header names the choice."""
        why = [f"affinity {self.affinity}" if self.affinity is not None else "affinity unknown",
               f"cgroup quota {self.quota:g}" if self.quota is not None else "no cgroup quota"]
        if self.ranks > 1:
            why.append(f"shared by {self.ranks} ranks")
        if self.asked is not None:
            why = [f"OMP_NUM_THREADS={self.asked}, as set"]
        if self.wait:
            why.append(f"OMP_WAIT_POLICY={self.wait}")
        return f"CPU: {self.threads} thread{'s' if self.threads != 1 else ''} ({', '.join(why)})"

    def to_dict(self) -> dict[str, object]:
        return {"threads": self.threads, "affinity": self.affinity, "quota": self.quota, "ranks": self.ranks,
                "omp_num_threads": self.asked, "omp_wait_policy": self.wait, "line": self.describe()}


def _cgroup_paths(proc_cgroup: str) -> tuple[str | None, str | None, str | None]:
    """(the cgroup v2 path, the v1 cpu controller's path, the v1 cpu hierarchy's controller list) from
    /proc/self/cgroup ("0::/user.slice/..." for v2, "4:cpu,cpuacct:/docker/..." for v1)."""
    v2 = v1 = v1_dir = None
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1, v1_dir = path, controllers
    return v2, v1, v1_dir


def _ancestors(base: Path, path: str) -> list[Path]:
    """base/path and every folder above it up to base itself."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    return [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _number(text: str | None) -> float | None:
    try:
        return float(text.strip()) if text is not None else None
    except ValueError:
        return None


def _v2_quota(folder: Path) -> float | None:
    """cpu.max "QUOTA PERIOD" -> QUOTA / PERIOD CPUs; "max PERIOD", a missing or a bad file -> None."""
    fields = (read_head(folder / "cpu.max", MAX_CGROUP_FILE) or "").split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    quota, period = _number(fields[0]), _number(fields[1])
    return quota / period if quota and period and quota > 0 and period > 0 else None


def _v1_quota(folder: Path) -> float | None:
    quota = _number(read_head(folder / "cpu.cfs_quota_us", MAX_CGROUP_FILE))
    period = _number(read_head(folder / "cpu.cfs_period_us", MAX_CGROUP_FILE))
    return quota / period if quota and period and quota > 0 and period > 0 else None


def cgroup_quota(proc_cgroup: str, root: Path = CGROUP_ROOT) -> float | None:
    """The tightest CPU quota, in CPUs, on this process's cgroup and those above it (v2 and v1 alike); None when
    no cgroup limits its CPU time. Never raises."""
    v2, v1, v1_dir = _cgroup_paths(proc_cgroup)
    found: list[float] = []
    if v2 is not None:
        found += [q for folder in _ancestors(root, v2) if (q := _v2_quota(folder)) is not None]
    if v1 is not None:
        for mount in dict.fromkeys([root / str(v1_dir), root / "cpu", root / "cpu,cpuacct"]):
            found += [q for folder in _ancestors(mount, v1) if (q := _v1_quota(folder)) is not None]
    return min(found) if found else None


def cpu_budget(affinity: int | None, proc_cgroup: str, root: Path = CGROUP_ROOT, *, ranks: int = 1,
               asked: str | None = None, current: int = 1) -> CpuBudget:
    """The threads for one of `ranks` processes of a run on this machine: the CPUs of the affinity and of the cgroup
    quota (rounded up), whichever is fewer, shared among the ranks, at least 1. asked: OMP_NUM_THREADS as set (a
    whole number wins: `current`, torch's own count, is kept); current: also the count when nothing is known."""
    quota = cgroup_quota(proc_cgroup, root)
    ranks = max(1, ranks)
    try:
        omp = int(asked) if asked is not None and asked.strip() else None
    except ValueError:
        omp = None
    if omp is not None and omp > 0:
        return CpuBudget(max(1, current), affinity, quota, ranks, omp)
    limits = [n for n in (affinity, math.ceil(quota - QUOTA_SLACK) if quota is not None else None) if n]
    cpus = min(limits) if limits else max(1, current)
    return CpuBudget(max(1, cpus // ranks), affinity, quota, ranks)


def this_process(ranks: int = 1, current: int = 1) -> CpuBudget:
    """cpu_budget for this process: its affinity, its /proc/self/cgroup, OMP_NUM_THREADS, OMP_WAIT_POLICY."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    budget = cpu_budget(affinity, read_head(PROC_SELF_CGROUP, MAX_CGROUP_FILE) or "", CGROUP_ROOT, ranks=ranks,
                        asked=os.environ.get("OMP_NUM_THREADS"), current=current)
    return dataclasses.replace(budget, wait=os.environ.get(WAIT_POLICY_ENV, "").strip() or None)


def wait_passively(environ: MutableMapping[str, str] | None = None) -> bool:
    """OMP_WAIT_POLICY=PASSIVE in `environ` (default: this process's, where OpenMP reads it as torch is imported)
    unless the person chose how OpenMP threads wait; True when it was set here. Call it before torch is imported."""
    env = os.environ if environ is None else environ
    if any(env.get(name, "").strip() for name in WAIT_CHOICES):
        return False
    env[WAIT_POLICY_ENV] = "PASSIVE"
    return True


def apply(ranks: int = 1) -> CpuBudget:
    """Size torch's intra-op and inter-op threads to this process's budget; the budget, to be named in the run's
    header. The inter-op count can be set once, before any parallel work: where torch refuses, it stays."""
    import torch

    budget = this_process(ranks, torch.get_num_threads())
    if budget.asked is None:
        torch.set_num_threads(budget.threads)
        try:
            torch.set_num_interop_threads(budget.threads)
        except RuntimeError:  # already set, or parallel work already started
            pass
    return budget
