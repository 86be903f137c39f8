"""Peak memory of `rocmcheck doctor` while its tools print without end.

A fake `rocminfo` and `rocm-smi` on PATH run `exec yes "HSA error"`; the doctor must cap what it reads from
them while it reads, end them at their timeout and still print a report. This measures the doctor process's
own peak RSS (VmHWM from /proc/PID/status, polled until it exits; the tools are separate processes and are not
counted), its wall time and its exit code. Target: peak under 200 MB.

    python benchmarks/bench_flood.py [--repeat 3] [--deadline 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOODING_TOOLS = ("rocminfo", "rocm-smi")
PEAK_TARGET_MB = 200


@dataclass
class FloodRun:
    peak_kb: int  # the doctor's own VmHWM, the highest reading seen
    wall_s: float
    returncode: int
    stdout: str
    stderr: str


def flooding_bin(folder: Path) -> Path:
    """folder/bin with each of FLOODING_TOOLS printing "HSA error" forever."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in FLOODING_TOOLS:
        tool = bin_dir / name
        tool.write_text('#!/bin/sh\nexec yes "HSA error"\n')
        tool.chmod(0o755)
    return bin_dir


def _vmhwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def run_flooded_doctor(folder: Path, deadline: float = 20, timeout: float = 300) -> FloodRun:
    """`python -m rocmcheck doctor --no-train --no-gpu-probes --deadline DEADLINE` with flooding tools first
    on PATH; polls the doctor's VmHWM every 20 ms until it exits."""
    bin_dir = flooding_bin(folder)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(REPO))
    out_path, err_path = folder / "stdout.txt", folder / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes",
                                 "--deadline", f"{deadline:g}"], stdout=out, stderr=err, env=env, cwd=folder)
        peak = 0
        end = time.monotonic() + timeout
        while proc.poll() is None:
            # VmHWM never falls, so the last reading before the process becomes a zombie is its peak.
            peak = max(peak, _vmhwm_kb(proc.pid) or 0)
            if time.monotonic() > end:
                proc.kill()
                break
            time.sleep(0.02)
        returncode = proc.wait()
        wall = time.perf_counter() - start
    return FloodRun(peak, wall, returncode, out_path.read_text(errors="replace"),
                    err_path.read_text(errors="replace"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=20)
    args = parser.parse_args()
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            run = run_flooded_doctor(Path(tmp), args.deadline)
        runs.append(run)
        mentions = [name for name in FLOODING_TOOLS if name in run.stdout]
        print(f"run {i + 1}: peak {run.peak_kb / 1024:.1f} MB, wall {run.wall_s:.1f} s, exit {run.returncode}, "
              f"report names {', '.join(mentions) or 'none'}, traceback {'Traceback' in run.stderr}", flush=True)
    peaks = [r.peak_kb / 1024 for r in runs]
    walls = [r.wall_s for r in runs]
    print()
    print("| measure | median | max |")
    print("|---|---|---|")
    print(f"| doctor peak RSS (VmHWM), MB | {statistics.median(peaks):.1f} | {max(peaks):.1f} |")
    print(f"| wall time, s | {statistics.median(walls):.1f} | {max(walls):.1f} |")
    print(f"| exit codes | {', '.join(str(r.returncode) for r in runs)} | |")
    verdict = "met" if max(peaks) < PEAK_TARGET_MB else "**missed**"
    print(f"\npeak target < {PEAK_TARGET_MB} MB: {verdict}")


if __name__ == "__main__":
    main()
