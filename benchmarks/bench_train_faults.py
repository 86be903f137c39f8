"""smoke-train's planted faults on this machine's GPU: the very tests that plant them on the CPU in CI, run with
ROCMCHECK_TEST_DEVICE=cuda (tests/devices.py), so each verdict is shown to catch its fault on the device and to
pass the same run without it:

- a leak (a validation loss kept with its graph every step) -> train.memory_leak fails; the clean run passes
- an inf in the forward pass -> train.finite fails and the run stops
- a flipped bit in the saved checkpoint -> train.reload fails (the files read back, and the full reload); the
  same check passes a healthy save made from host copies in the background, also one begun while the later
  steps run (and fails it with a flipped bit; a run stopped after it began leaves no folder)
- attention that drops its scale in bf16 -> train.numerics fails; the same run without it passes
- (not a fault) the attention warm-up thread runs its kernels on the GPU

    python benchmarks/bench_train_faults.py [--device cuda]

Prints one line per test as it ends, then the count; exits with pytest's code.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SELECTION = [
    "tests/test_train_faults.py::test_leaking_run_is_caught",
    "tests/test_train_faults.py::test_clean_run_is_not_flagged",
    "tests/test_train_faults.py::test_inf_in_the_forward_pass_is_caught_and_stops_the_run",
    "tests/test_train_reload.py::test_a_real_run_with_a_flipped_bit_in_its_checkpoint_fails_reload",
    "tests/test_train_reload.py::test_the_files_method_in_a_real_run_saves_from_host_copies_in_the_verdict_order",
    "tests/test_train_own_model.py::test_planted_attention_fault_fails_numerics",
    "tests/test_train_own_model.py::test_the_same_run_without_the_fault_passes_numerics",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="the device the tests train on (cuda, or cpu as in CI)")
    ap.add_argument("--timeout", type=float, default=400.0)
    args = ap.parse_args()
    env = dict(os.environ, ROCMCHECK_TEST_DEVICE=args.device, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:randomly", *SELECTION]
    print(f"device {args.device}: {' '.join(cmd[2:4])} ... ({len(SELECTION)} tests)", flush=True)
    try:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if "::" in line or "passed" in line or "failed" in line or "Error" in line:
                print(f"[{time.perf_counter() - t0:6.1f} s] {line.rstrip()[:200]}", flush=True)
        rc = proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        print(f"timed out after {args.timeout:g} s", flush=True)
        rc = 124
    print(f"exit {rc}, {time.perf_counter() - t0:.1f} s", flush=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
