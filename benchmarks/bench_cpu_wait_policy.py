"""The CPU smoke-train with OpenMP threads that spin while they wait against threads that sleep, on this machine,
quiet and with other jobs competing for its CPUs (prints a table as it goes):

    python benchmarks/bench_cpu_wait_policy.py                       # 0, 2 and 6 competing jobs, 2 runs each
    python benchmarks/bench_cpu_wait_policy.py --hogs 0,4 --repeat 1 --steps 15

Each run is `python -m rocmcheck smoke-train --device cpu --steps N --no-profile --json` in a fresh process, as a
person runs it. The two sides, one after the other for each load:
- spin: GOMP_SPINCOUNT=300000, libgomp's own spin count when OMP_WAIT_POLICY is unset (what torch did before
  rocmcheck set a policy; rocmcheck leaves a policy the person chose, and GOMP_SPINCOUNT is one);
- passive: nothing set, so rocmcheck's OMP_WAIT_POLICY=PASSIVE (rocmcheck/train/cpu_threads.py);
- with --sides, also short-spin (GOMP_SPINCOUNT=10000: a thirtieth of the default spin, then sleep) and no-spin
  (GOMP_SPINCOUNT=0).
The competing jobs are busy loops (`python -c "while True: pass"`), one process each, started before the pair and
killed after it; the load average is read before and after each run. A row: load, side, wall seconds, the child's
CPU seconds (user + system, from wait4), train.throughput's tokens/s, and the run's verdict counts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIDES = {"spin": {"GOMP_SPINCOUNT": "300000"}, "passive": {}, "short-spin": {"GOMP_SPINCOUNT": "10000"},
         "no-spin": {"GOMP_SPINCOUNT": "0"}}
WAIT_NAMES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def loadavg() -> str:
    try:
        return " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def one_run(side: str, steps: int, timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in WAIT_NAMES} | SIDES[side]
    env["PYTHONPATH"] = str(REPO)
    with tempfile.TemporaryDirectory(prefix="bench-wait-") as tmp:
        argv = [sys.executable, "-m", "rocmcheck", "smoke-train", "--device", "cpu", "--steps", str(steps),
                "--no-profile", "--json", "-o", tmp, "--force"]
        before = loadavg()
        t0 = time.perf_counter()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=tmp)
            deadline = t0 + timeout
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    proc.kill()
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.2)
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            text = out.read().decode(errors="replace")
    row = {"side": side, "wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
           "exit": proc.returncode, "load_before": before, "load_after": loadavg(), "timed_out": wall > timeout}
    try:
        doc = json.loads(text.strip().splitlines()[-1])
        by_id = {r["id"]: r for r in doc["results"]}
        row["tokens_per_s"] = (by_id.get("train.throughput", {}).get("data") or {}).get("tokens_per_s")
        row["cpu_line"] = (doc.get("info", {}).get("cpu") or {}).get("line")
        row["not_pass"] = sorted(i for i, r in by_id.items() if r["status"] != "pass")
    except (ValueError, IndexError, KeyError, TypeError):
        row["tokens_per_s"] = None
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hogs", default="0,2,6", help="competing busy loops, a comma-separated list of counts")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--sides", default="spin,passive", help=f"which of {', '.join(SIDES)}")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}, "
          f"steps {args.steps}", flush=True)
    print("| competing jobs | side | wall (s) | CPU (s) | tokens/s | load before | load after | not pass |", flush=True)
    print("|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for hogs in [int(h) for h in args.hogs.split(",") if h.strip()]:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        try:
            time.sleep(5 if hogs else 0)  # the competitors running before the first side starts
            for _ in range(args.repeat):
                for side in args.sides.split(","):
                    row = one_run(side, args.steps, args.timeout) | {"hogs": hogs}
                    rows.append(row)
                    tps = row.get("tokens_per_s")
                    print(f"| {hogs} | {side} | {row['wall_s']}{' (timed out)' if row['timed_out'] else ''} | "
                          f"{row['cpu_s']} | {round(tps) if tps else '-'} | {row['load_before']} | "
                          f"{row['load_after']} | {', '.join(row.get('not_pass') or []) or '-'} |", flush=True)
        finally:
            for p in busy:
                p.kill()
                p.wait()
    if rows:
        print(f"header of a passive run: {next((r.get('cpu_line') for r in rows if r['side'] == 'passive'), None)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
