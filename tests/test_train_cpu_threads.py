"""The CPU fine-tune's thread count (rocmcheck/train/cpu_threads.py): the affinity and the cgroup quota, read from
fake cgroup trees in the layouts the kernel gives (cgroup v2's cpu.max, v1's cfs files; the formats of
https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files and
https://docs.kernel.org/scheduler/sched-bwc.html), and a real smoke-train naming its choice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rocmcheck.train.cpu_threads import WAIT_CHOICES, cgroup_quota, cpu_budget, wait_passively

# /proc/self/cgroup on a cgroup v2 host (a systemd user session) and inside a v1 Docker container.
V2_SELF = "0::/user.slice/user-1000.slice/session-3.scope\n"
V1_SELF = ("12:pids:/docker/4f1c\n5:cpu,cpuacct:/docker/4f1c\n4:memory:/docker/4f1c\n1:name=systemd:/docker/4f1c\n")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_v2_the_tightest_quota_on_the_way_up_counts(tmp_path):
    write(tmp_path / "user.slice" / "cpu.max", "400000 100000\n")  # 4 CPUs for every user
    write(tmp_path / "user.slice" / "user-1000.slice" / "cpu.max", "150000 100000\n")  # 1.5 for this one
    write(tmp_path / "user.slice" / "user-1000.slice" / "session-3.scope" / "cpu.max", "max 100000\n")
    assert cgroup_quota(V2_SELF, tmp_path) == 1.5
    budget = cpu_budget(8, V2_SELF, tmp_path)
    assert budget.threads == 2  # 1.5 CPUs, rounded up: both threads run, and are throttled, together
    assert budget.describe() == "CPU: 2 threads (affinity 8, cgroup quota 1.5)"


def test_v1_quota_under_the_cpu_hierarchy(tmp_path):
    write(tmp_path / "cpu,cpuacct" / "docker" / "4f1c" / "cpu.cfs_quota_us", "100000\n")
    write(tmp_path / "cpu,cpuacct" / "docker" / "4f1c" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")  # the host's root: no limit
    write(tmp_path / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    budget = cpu_budget(64, V1_SELF, tmp_path)
    assert (budget.quota, budget.threads) == (1.0, 1)
    assert budget.describe() == "CPU: 1 thread (affinity 64, cgroup quota 1)"


def test_no_quota_leaves_the_affinity_and_ranks_share_it(tmp_path):
    write(tmp_path / "cpu.max", "max 100000\n")  # a container's own cgroup mounted at the root, no limit
    assert cpu_budget(2, "0::/\n", tmp_path).describe() == "CPU: 2 threads (affinity 2, no cgroup quota)"
    shared = cpu_budget(16, "0::/\n", tmp_path, ranks=4)
    assert shared.threads == 4 and "shared by 4 ranks" in shared.describe()


def test_omp_num_threads_set_by_the_person_wins(tmp_path):
    write(tmp_path / "cpu.max", "100000 100000\n")
    budget = cpu_budget(8, "0::/\n", tmp_path, asked="6", current=6)
    assert budget.threads == 6 and budget.describe() == "CPU: 6 threads (OMP_NUM_THREADS=6, as set)"


def test_missing_or_garbled_files_mean_no_quota(tmp_path):
    write(tmp_path / "a" / "cpu.max", "lots 100000\n")
    write(tmp_path / "cpu.max", "\x00\xff")
    assert cgroup_quota("0::/a/b\nnot a line\n", tmp_path) is None
    assert cpu_budget(None, "", tmp_path, current=3).threads == 3  # nothing known: torch's own count


def test_threads_wait_passively_unless_the_person_chose_how():
    env = {"PATH": "/usr/bin", "OMP_WAIT_POLICY": " "}  # blank is not a choice
    assert wait_passively(env) is True and env["OMP_WAIT_POLICY"] == "PASSIVE"
    for name, value in (("OMP_WAIT_POLICY", "active"), ("GOMP_SPINCOUNT", "10000"), ("KMP_BLOCKTIME", "0")):
        env = {name: value}
        assert wait_passively(env) is False and env == {name: value}, name


@pytest.mark.parametrize("chosen", [None, "ACTIVE"])
def test_a_cpu_smoke_train_sizes_torch_and_names_it_in_its_header(tmp_path, chosen):
    """Real smoke-train on this machine, 10 steps, under taskset-like affinity inherited from this process: its
    threads wait passively unless the person set OMP_WAIT_POLICY, and the header says which."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", *WAIT_CHOICES)}
    if chosen:
        # One thread: threads that spin while they wait would take the CPU from whatever else runs here.
        env.update(OMP_WAIT_POLICY=chosen, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--device", "cpu", "--steps", "10",
                           "--no-profile", "--json"], capture_output=True, text=True, env=env, timeout=600)
    doc = json.loads(proc.stdout)
    cpu = doc["info"]["cpu"]
    assert cpu["affinity"] == len(os.sched_getaffinity(0))
    assert cpu["threads"] <= cpu["affinity"] and cpu["line"].startswith(f"CPU: {cpu['threads']} thread")
    policy = chosen or "PASSIVE"
    assert cpu["omp_wait_policy"] == policy and cpu["line"].endswith(f"OMP_WAIT_POLICY={policy})")
