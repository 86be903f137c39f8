"""A fast climb is a verdict: short runs judged from their rate and time to capacity, on generated curves shaped
like the runs they stand for (tests/monitor_curves.py) and through `rocmcheck monitor` around a real fake
training process whose memory a fake nvidia-smi reports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import monitor_curves as mc
from fakes import env_with_path

from rocmcheck.monitor.curve import FAST_ETA_S, MIN_SPAN_S, classify_curve, count_steps, judge_curves
from rocmcheck.result import Status


def test_a_short_run_that_climbs_fast_fails_with_its_rate_and_time_to_capacity():
    # The case a 30 s minimum let pass: 51 GiB of 80 GiB in 24 s, then the run ended on its own.
    t, used = mc.fast_leak()
    v = classify_curve(t, used, mc.H100)
    assert v.span_s < MIN_SPAN_S and v.shape == "staircase" and v.fast
    assert 1.5 * mc.GiB < v.rise_per_min / 60 < 2.5 * mc.GiB  # 2.8 GiB per 1.5 s step
    assert v.eta_oom_s is not None and v.eta_oom_s < FAST_ETA_S
    curve = judge_curves({"0": v})[0]
    assert curve.status is Status.FAIL and "climbs fast" in curve.summary and "GiB/s" in curve.summary
    assert "out of memory in ~" in curve.summary and "LeakWatchCallback" in curve.fix.text
    assert curve.data["gpus"]["0"]["fast_climb"] is True


def test_a_fast_climb_is_judged_from_the_share_of_time_the_gpu_is_busy():
    # Readings every 0.25 s of a loop busy about 40% of its time (its steps wait on a host-side pause): the kernels
    # are caught by two readings of each step and missed by the others, so most readings say 0%.
    t, used = mc.fast_leak(interval=0.25)
    loading = int(6.0 / 0.25)
    stepping = [0.0] * loading + [80.0 if i % 5 in (0, 1) else 0.0 for i in range(len(t) - loading)]
    assert sorted(stepping)[len(stepping) // 2] == 0.0  # the median reading: idle
    v = classify_curve(t, used, mc.H100, busy=stepping)
    assert v.fast and judge_curves({"0": v})[0].status is Status.FAIL
    # The same climb with the GPU idle the whole time (copies while loading, no kernels): not judged on a short span.
    idle = classify_curve(t, used, mc.H100, busy=[1.0] * len(t))
    assert not idle.fast and idle.shape == "too short"


def test_the_steps_are_counted_where_the_readings_resolve_them():
    # Readings every 0.25 s, a step every 1.5 s: 12 steps after the first, each a rise from a flat floor.
    v = classify_curve(*mc.fast_leak(interval=0.25), mc.H100)
    assert v.steps == 11 and "over 11 steps" in judge_curves({"0": v})[0].summary
    # One reading a second against a step every 1.5 s: two rises in a row happen, the count is not known.
    assert classify_curve(*mc.fast_leak(), mc.H100).steps is None
    assert count_steps([0.0, 1.0 * mc.GiB, 1.0 * mc.GiB, 0.0]) is None  # a fall: a sawtooth, no count


def test_a_run_that_dies_at_capacity_fails_with_its_rate_per_second():
    # 5 GiB a step: out of memory 26 s in, the process dies and frees its memory; its readings are teardown.
    t, used = mc.fast_leak(seconds=30, interval=0.5, leak_per_step=5 * mc.GiB)
    assert used[-1] < mc.GiB
    v = classify_curve(t, used, mc.H100)
    assert v.fast and any("freed" in n for n in v.notes)
    curve = judge_curves({"0": v})[0]
    assert curve.status is Status.FAIL and "GiB/s" in curve.summary


def test_a_short_flat_run_is_still_skipped():
    for interval in (1.0, 0.2):
        v = classify_curve(*mc.short_flat(interval=interval), mc.H100)
        assert v.shape == "too short" and not v.fast
        assert judge_curves({"0": v})[0].status is Status.SKIP


def test_a_climb_with_the_gpu_idle_is_loading_not_a_fast_climb():
    # The same curve as a run that dies while it loads: no kernels run, utilisation near 0%.
    t, used = mc.fast_leak()
    assert classify_curve(t, used, mc.H100, [0.0] * len(t)).shape == "too short"
    assert classify_curve(t, used, mc.H100, [97.0] * len(t)).fast
    assert classify_curve(t, used, mc.H100, [None] * len(t)).fast  # not told: judged from memory alone


def test_a_slow_climb_in_a_short_run_is_not_judged():
    # 0.5 GiB a step every 1.5 s: the card would fill in about an hour, not within FAST_ETA_S.
    v = classify_curve(*mc.fast_leak(leak_per_step=0.05 * mc.GiB), mc.H100)
    assert v.shape == "too short"


FAKE_NVIDIA_SMI = r'''#!{python}
"""nvidia-smi stand-in for one H100 80GB: memory.used is what the fake training process last wrote to its state
file (MiB), in nvidia-smi's csv layout with nounits values."""
import sys
try:
    used = int(open({state!r}).read() or 0)
except (OSError, ValueError):
    used = 0
if "--query-compute-apps" in " ".join(sys.argv[1:]):
    print("gpu_uuid, pid, used_gpu_memory [MiB]")
    sys.exit(0)
print("index, uuid, memory.used [MiB], memory.total [MiB], power.draw [W], utilization.gpu [%], "
      "temperature.gpu, clocks.sm [MHz], clocks.mem [MHz]")
print(f"0, GPU-5d5e2f0a-6b1c-4f0e-9c1a-6f3b2f8e9d10, {{used}}, 81559, 612.30, 98, 63, 1980, 2619")
'''

TRAINING = """
    import os, sys, time
    state, steps, per_step_mib, step_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    def allocated(mib):
        tmp = state + ".tmp"
        open(tmp, "w").write(str(mib))
        os.replace(tmp, state)
    allocated(512)  # the context
    time.sleep(0.5)
    allocated(10 * 1024)  # the weights
    time.sleep(1.0)
    for step in range(steps):  # each step keeps (or not) what it allocated
        allocated(14 * 1024 + step * per_step_mib)
        time.sleep(step_s)
"""


def _monitor_training(tmp_path: Path, steps: int, per_step_mib: int, step_s: float) -> tuple[int, dict, str]:
    bin_dir, state = tmp_path / "bin", tmp_path / "allocated"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(FAKE_NVIDIA_SMI.format(python=sys.executable, state=str(state)))
    tool.chmod(0o755)
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent(TRAINING))
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--interval", "0.2",
                           "--backend", "nvidia-smi", "--out", str(tmp_path / "out"), "--",
                           sys.executable, str(train), str(state), str(steps), str(per_step_mib), str(step_s)],
                          capture_output=True, text=True, env=env_with_path(bin_dir), timeout=120)
    verdict = json.loads(next((tmp_path / "out").glob("verdict-*.json")).read_text())
    return proc.returncode, verdict, proc.stderr


def test_monitor_fails_a_short_training_process_that_climbs_fast(tmp_path):
    # 3 GiB kept every 0.8 s for 10 steps: 41 GiB of 80 GiB in about 10 s, then the process ends on its own (exit 0).
    code, verdict, stderr = _monitor_training(tmp_path, steps=10, per_step_mib=3072, step_s=0.8)
    curve = next(r for r in verdict["results"] if r["id"] == "monitor.memory_curve")
    assert code == 1 and verdict["exit_code"] == 0, stderr
    assert curve["status"] == "fail" and "GiB/s" in curve["summary"] and "out of memory in ~" in curve["summary"]
    gpu = curve["data"]["gpus"]["0"]
    assert gpu["fast_climb"] and 2 * 1024**3 < gpu["rise_per_s_bytes"] < 6 * 1024**3
    # Readings every 0.2 s resolve the 0.8 s steps unless the busy machine delays some of them.
    assert gpu["steps"] is None or 8 <= gpu["steps"] <= 10


def test_monitor_still_skips_a_short_flat_training_process(tmp_path):
    code, verdict, stderr = _monitor_training(tmp_path, steps=10, per_step_mib=0, step_s=0.8)
    curve = next(r for r in verdict["results"] if r["id"] == "monitor.memory_curve")
    assert code == 0 and curve["status"] == "skip", stderr
