"""Wall time of `rocmcheck lint` with and without DeepSpeed's own classes (a child process that
imports deepspeed and therefore torch). Runs on CPU; prints a table. Writes lint_bench.json to $OUT if set.

    python benchmarks/bench_lint.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED_LIKE = {"zero_optimization": {"stage": 3, "stage3_parition_grads": True}, "bf16": {"enabled": True}}


def timed(argv: list[str], env: dict) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=REPO, timeout=300)
    return time.perf_counter() - start, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "seed.json"
        config.write_text(json.dumps(SEED_LIKE))
        no_ds = Path(tmp) / "no_ds"
        no_ds.mkdir()
        (no_ds / "deepspeed.py").write_text("raise ImportError('benchmark: deep validation off')\n")
        base = dict(os.environ, PYTHONPATH=str(REPO))
        cases = {
            "rocmcheck --help": ([sys.executable, "-m", "rocmcheck", "--help"], base),
            "lint, rules only (deepspeed hidden)": ([sys.executable, "-m", "rocmcheck", "lint", str(config)],
                                                   dict(base, PYTHONPATH=f"{no_ds}{os.pathsep}{REPO}")),
            "lint, rules + DeepSpeed classes": ([sys.executable, "-m", "rocmcheck", "lint", str(config)], base),
        }
        rows = []
        for name, (argv, env) in cases.items():
            times = [timed(argv, env)[0] for _ in range(args.repeat)]
            rows.append({"case": name, "min_s": min(times), "median_s": statistics.median(times), "max_s": max(times)})
    print(f"{'case':<40} {'min s':>7} {'median s':>9} {'max s':>7}")
    for r in rows:
        print(f"{r['case']:<40} {r['min_s']:7.2f} {r['median_s']:9.2f} {r['max_s']:7.2f}")
    out = os.environ.get("OUT")
    if out:
        Path(out, "lint_bench.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
