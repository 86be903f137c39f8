"""Where the default smoke-train's time goes, from process start to verdict (one table per call):

    python benchmarks/bench_smoke_train_time.py                     # 3 runs of `rocmcheck smoke-train`
    python benchmarks/bench_smoke_train_time.py --runs 1 --variants ";--steps 80;--no-profile"

Each run is `python -m rocmcheck smoke-train --json` in a child process; its wall time is measured from
spawning the child to its exit (what a person waits for). The report's own timings (info.timings_s, one per
part of the run: model load, data, numerics, accuracy, train, reload, profile, ...) split the run; what is
left is the interpreter, the imports (torch, transformers) and the start-up. First, the bare import times of
torch and transformers in fresh interpreters put those in context. The first run of a call on a fresh machine
is the cold one (nothing in the page cache). Prints as it goes, so a run cut short still says something.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPORTS = {
    "import torch": "import torch",
    "+ torch.cuda init": "import torch; torch.cuda.is_available() and torch.zeros(1, device='cuda')",
    "+ transformers Llama": "import torch, transformers; from transformers import LlamaForCausalLM, AutoTokenizer",
}


def timed_child(argv: list[str], timeout: float) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=os.environ.copy())
    return time.perf_counter() - t0, proc


def bench_imports() -> None:
    print("| import | seconds (fresh interpreter) |\n|---|---|", flush=True)
    for label, code in IMPORTS.items():
        secs, proc = timed_child([sys.executable, "-c", code], 300)
        print(f"| {label} | {secs:.2f}{'' if proc.returncode == 0 else ' (exit %d)' % proc.returncode} |", flush=True)


def import_tree(top: int = 25) -> None:
    """The modules whose import (with what they import) costs most: python -X importtime, by cumulative time."""
    code = IMPORTS["+ transformers Llama"] + "; import torch.optim; torch._dynamo"
    _, proc = timed_child([sys.executable, "-X", "importtime", "-c", code], 300)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("\nslowest imports (cumulative, -X importtime): "
          + "; ".join(f"{name.strip()} {us / 1e6:.2f} s" for us, name in sorted(rows, reverse=True)[:top]),
          flush=True)


def bench_run(extra: list[str], timeout: float) -> dict:
    wall, proc = timed_child([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", *extra], timeout)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        print(f"no JSON (exit {proc.returncode}): {proc.stderr[-2000:]}", flush=True)
        return {"wall": wall, "exit": proc.returncode}
    info = doc.get("info", {})
    results = {r["id"]: r for r in doc.get("results", [])}
    problems = [f"{k}: {r['status']}: {r['summary']}" for k, r in results.items()
                if r["status"] not in ("pass", "skip")]
    return {"wall": wall, "exit": proc.returncode, "run": info.get("wall_s"), "parts": info.get("timings_s", {}),
            "device": info.get("device", {}).get("name"), "verdicts": len(results), "problems": problems,
            "accuracy": results.get("train.task_accuracy", {}).get("summary")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each variant (the first of a call is the cold one)")
    ap.add_argument("--variants", default="",
                    help="extra smoke-train arguments, one variant per ';'-separated part (default: one, none)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--no-imports", action="store_true", help="skip the bare import timings")
    ap.add_argument("--import-tree", action="store_true", help="also list the slowest imports (-X importtime)")
    ap.add_argument("--json", type=Path, default=None, help="also write every row here")
    args = ap.parse_args()
    if not args.no_imports:
        bench_imports()
    if args.import_tree:
        import_tree()
    rows = []
    for variant in args.variants.split(";"):
        for i in range(args.runs):
            r = bench_run(shlex.split(variant), args.timeout) | {"variant": variant or "(default)", "run_no": i + 1}
            rows.append(r)
            parts = r.get("parts") or {}
            shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
            before = r["wall"] - r["run"] if r.get("run") is not None else float("nan")
            print(f"\n{r['variant']} #{r['run_no']} on {r.get('device')}: exit {r['exit']}, "
                  f"{r.get('verdicts')} verdicts, "
                  f"**wall {r['wall']:.2f} s** = start-up and imports {before:.2f} s + run {r.get('run') or 0:.2f} s "
                  f"({shown}); {r.get('accuracy')}", flush=True)
            for p in r.get("problems", []):
                print(f"   problem: {p}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
