"""Time doctor's cheap stage against the tools it replaces, on this machine, side by side.

    python benchmarks/bench_doctor.py [--repeat 5] [--json OUT]

Each command runs as a fresh process (what a person waits for), `repeat` times; the table shows the median.
Targets: doctor <= 1.5x `import torch` and <= 0.5x (collect_env + ds_report).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

CANDIDATES = {
    "rocmcheck doctor (cheap stage)": [sys.executable, "-m", "rocmcheck", "doctor", "--json", "--no-gpu-probes",
                                       "--no-train"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "python -m torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
    "ds_report": [shutil.which("ds_report") or "ds_report"],
}


def time_command(argv: list[str], repeat: int) -> tuple[float | None, str]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{type(exc).__name__}"
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):  # doctor exits 1 when a verdict failed; that is a result, not an error
            return None, f"exit {proc.returncode}"
    return statistics.median(times), ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    rows = {name: time_command(argv, args.repeat) for name, argv in CANDIDATES.items()}
    doctor = rows["rocmcheck doctor (cheap stage)"][0]
    torch_import = rows["python -c 'import torch'"][0]
    collect, ds = rows["python -m torch.utils.collect_env"][0], rows["ds_report"][0]
    print(f"machine: {platform.node() and platform.machine()} {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, median of {args.repeat}")
    print(f"{'command':<36} {'median s':>9}  note")
    for name, (secs, note) in rows.items():
        print(f"{name:<36} {secs if secs is None else round(secs, 2)!s:>9}  {note}")
    verdicts = {}
    if doctor and torch_import:
        verdicts["doctor / import torch"] = (doctor / torch_import, 1.5)
    if doctor and collect and ds:
        verdicts["doctor / (collect_env + ds_report)"] = (doctor / (collect + ds), 0.5)
    for name, (ratio, target) in verdicts.items():
        print(f"{name:<36} {ratio:>9.2f}  target <= {target} {'OK' if ratio <= target else 'MISSED'}")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"rows": {k: v[0] for k, v in rows.items()},
                       "ratios": {k: v[0] for k, v in verdicts.items()}}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
