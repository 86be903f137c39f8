"""doctor --level 2 on a GPU, for the lead to run on a lent GPU in one call:

    python benchmarks/bench_level2.py              # the floor, doctor at level 1 and 2, then each level-2 probe alone
    python benchmarks/bench_level2.py --no-alone   # without the per-probe runs
    python benchmarks/bench_level2.py --cpu        # the level-2 probes in CPU test mode (small sizes): the script
                                                   # itself, on a machine without a GPU

In one run, each as a fresh process (what a person waits for):
1. the floor: a bare `import torch` plus one CUDA/HIP initialisation and one tensor on the GPU;
2. `rocmcheck doctor --no-train --json` (level 1) and `rocmcheck doctor --level 2 --no-train --json`;
3. each level-2 probe alone: `rocmcheck probe NAME --json`.
Prints a table of every level-2 probe: its seconds inside the stage (the child's own timing), its declared budget,
its wall time alone (which includes the child's torch import, so compare it with the floor), its verdict, and
its worst case against its limit; then, per probe, the largest error of each group (dtype, or dtype and output)
beside its limit: the figures benchmarks/RESULTS.md records as the measured GPU tolerances. The budget is 2
minutes for the level-2 probes in all on one GPU (levels.NUMERICS_BUDGET_S), designed for 60-90 s.
Writes bench_level2.json to $OUT (or /tmp). On a machine without a GPU it still runs: every
probe then skips, and the table says so."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import child, last_json  # noqa: E402

from rocmcheck.probes.catalog import PROBES  # noqa: E402
from rocmcheck.probes.levels import NUMERICS, NUMERICS_BUDGET_S  # noqa: E402

FLOOR = ("import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
         "ok = torch.cuda.is_available(); torch.cuda.init() if ok else None; "
         "x = torch.zeros(1, device='cuda') if ok else None; torch.cuda.synchronize() if ok else None; "
         "print(round(t1 - t0, 3), round(time.perf_counter() - t1, 3), ok)")
LEVEL2 = [p for p in PROBES if p.level == NUMERICS]


def document(stdout: str) -> dict:
    """The JSON report a --json command printed (indented), or {}."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        doc = last_json(stdout)
    return doc if isinstance(doc, dict) else {}


def floor(timeout: float) -> dict:
    wall, code, out, err = child(["-c", FLOOR], timeout)
    parts = out.split()
    if code != 0 or len(parts) != 3:
        return {"wall_s": wall, "error": (err.strip().splitlines() or ["?"])[-1]}
    return {"wall_s": wall, "import_s": float(parts[0]), "gpu_init_s": float(parts[1]), "gpu": parts[2] == "True"}


def doctor(level: int, timeout: float) -> dict:
    wall, code, out, err = child(["-m", "rocmcheck", "doctor", "--level", str(level), "--no-train", "--json"],
                                 timeout)
    doc = document(out)
    return {"wall_s": wall, "exit": code, "results": doc.get("results", []),
            "error": None if doc else (err.strip().splitlines() or ["no JSON"])[-1]}


def alone(name: str, timeout: float) -> dict:
    wall, code, out, err = child(["-m", "rocmcheck", "probe", name, "--json"], timeout)
    doc = document(out)
    results = doc.get("results") or [{}]
    return {"wall_s": wall, "exit": code, "result": results[0],
            "error": None if doc else (err.strip().splitlines() or ["no JSON"])[-1]}


def worst_by_group(result: dict) -> dict[str, dict]:
    """The largest error of each group of a numerics verdict's cases, with its limit."""
    groups: dict[str, dict] = {}
    for case in (result.get("data") or {}).get("cases") or []:
        err, limit = case.get("rel_err"), case.get("limit")
        if err is None or not limit:
            continue
        group = groups.setdefault(case["group"], {"rel_err": err, "limit": limit, "what": case["what"]})
        if err / limit > group["rel_err"] / group["limit"]:
            group.update(rel_err=err, limit=limit, what=case["what"])
    return groups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-alone", action="store_true", help="skip running each level-2 probe on its own")
    parser.add_argument("--timeout", type=float, default=600.0, help="per command, seconds")
    parser.add_argument("--cpu", action="store_true", help="the level-2 probes in CPU test mode, in one stage")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT") or "/tmp")
    out_dir.mkdir(parents=True, exist_ok=True)

    report = {"floor": floor(args.timeout)}
    if args.cpu:
        from rocmcheck.probes.stage import run_stage

        results = run_stage(timeout_s=args.timeout, only={p.name for p in LEVEL2}, cpu=True)
        report["cpu"] = [r.to_dict() for r in results]
        by_id = {r["id"]: r for r in report["cpu"]}
        report["alone"] = {}
    else:
        report.update(level1=doctor(1, args.timeout), level2=doctor(2, args.timeout))
        by_id = {r["id"]: r for r in report["level2"]["results"] if r.get("id", "").startswith("probe.")}
        report["alone"] = {} if args.no_alone else {p.name: alone(p.name, args.timeout) for p in LEVEL2}
    (out_dir / "bench_level2.json").write_text(json.dumps(report, indent=1, default=str))

    f = report["floor"]
    print(f"floor: import torch {f.get('import_s', '?')} s + GPU init {f.get('gpu_init_s', '?')} s "
          f"(process {f['wall_s']:.1f} s){'' if f.get('gpu') else '  NO GPU'}")
    for level in ("level1", "level2"):
        d = report.get(level)
        if d is not None:
            print(f"doctor --{level.replace('level', 'level ')} --no-train: {d['wall_s']:.1f} s, exit {d['exit']}"
                  + (f"  ({d['error']})" if d.get("error") else ""))
    print(f"\n{'probe':16} {'status':6} {'stage s':>8} {'budget':>7} {'alone s':>8}  worst case (error / limit)")
    total = 0.0
    for p in LEVEL2:
        r = by_id.get(p.id, {})
        seconds = (r.get("data") or {}).get("seconds") or 0.0
        total += seconds
        worst = (r.get("data") or {}).get("worst") or {}
        alone_s = report["alone"].get(p.name, {}).get("wall_s")
        figure = (f"{worst['what']}: {worst['rel_err']:.2e} / {worst['limit']:.1e}" if worst.get("rel_err") is not None
                  else (r.get("summary") or "not run")[:90])
        print(f"{p.name:16} {r.get('status', '-'):6} {seconds:8.2f} {p.budget_s or 0:7.0f} "
              f"{alone_s if alone_s is None else round(alone_s, 1)!s:>8}  {figure}")
    print(f"\nlevel-2 probes in the stage: {total:.1f} s (budget {NUMERICS_BUDGET_S:g} s, designed for 60-90 s); "
          f"declared budgets add up to {sum(p.budget_s or 0 for p in LEVEL2):g} s")
    if "level2" in report:
        print("doctor level 2 minus level 1 (wall): "
              f"{report['level2']['wall_s'] - report['level1']['wall_s']:.1f} s")
    print("\nmeasured errors per group (for benchmarks/RESULTS.md):")
    for p in LEVEL2:
        for group, g in worst_by_group(by_id.get(p.id, {})).items():
            print(f"  {p.name:16} {group:10} {g['rel_err']:.2e}  limit {g['limit']:.1e}  "
                  f"({g['rel_err'] / g['limit']:.0%} of it)  {g['what']}")
    print(f"JSON: {out_dir / 'bench_level2.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
