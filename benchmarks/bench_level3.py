"""doctor --level 3 on a GPU, for the lead to run on a lent GPU in one call:

    python benchmarks/bench_level3.py                  # the floor, doctor --level 3 --duration 60, each new probe
    python benchmarks/bench_level3.py --duration 120   # a longer stress
    python benchmarks/bench_level3.py --no-alone       # only the floor and the doctor run
    python benchmarks/bench_level3.py --cpu            # the new probes in CPU test mode: the script itself, here

In one run, each as a fresh process:
1. the floor: the same bf16 8192^3 GEMM probe.stress_gemm runs, timed bare (warm-up, then back-to-back batches
   between CUDA events, no bitwise check, no telemetry): the sustained rate is read against it;
2. `rocmcheck doctor --level 3 --duration SECONDS --no-train --json`;
3. each probe this level adds alone: `rocmcheck probe NAME --json` (the stress probes with --duration ALONE_S),
   and probe.attention_speed once more at a grouped-query shape (ROCMCHECK_ATTENTION_SHAPE=1,32,8,4096,128).
Prints a table of seconds, figures and verdicts, with the sustained GEMM beside the bare one, and the figures
benchmarks/RESULTS.md records (the healthy stability ratio, the pattern test's GB/s, the 4-bit errors, SDPA vs
flash-attn). The collective sweep and the pair matrix need 2+ GPUs: on one GPU they skip, and the table says so.
Writes bench_level3.json to $OUT (or /tmp)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import child, last_json  # noqa: E402

# NVLink multicast stays off on the lent multi-GPU machines; keep it off if the caller did not say.
for key, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(key, value)

NEW = ("bitsandbytes", "attention_speed", "p2p_matrix", "stress_gemm", "memory_pattern", "collective_sweep")
STRESS = ("stress_gemm", "memory_pattern")
GQA_SHAPE = "1,32,8,4096,128"
BARE_GEMM = """
import json, statistics, time, torch
ok = torch.cuda.is_available()
if not ok:
    print(json.dumps({"skipped": "no GPU"})); raise SystemExit
d = torch.device("cuda", 0); n = 8192
g = torch.Generator(device=d).manual_seed(20261130)
a = torch.randn(n, n, device=d, dtype=torch.bfloat16, generator=g)
b = torch.randn(n, n, device=d, dtype=torch.bfloat16, generator=g)
c = torch.empty(n, n, device=d, dtype=torch.bfloat16)
t0 = time.perf_counter()
while time.perf_counter() - t0 < 3.0:
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()
rates = []
for _ in range(30):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        torch.matmul(a, b, out=c)
    e.record(); e.synchronize()
    rates.append(2 * n ** 3 * 20 / (s.elapsed_time(e) / 1e3) / 1e12)
print(json.dumps({"median_tflops": statistics.median(rates), "best_tflops": max(rates), "min_tflops": min(rates),
                  "device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
"""


def document(stdout: str) -> dict:
    try:
        doc = json.loads(stdout)
    except ValueError:
        doc = last_json(stdout)
    return doc if isinstance(doc, dict) else {}


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> dict:
    wall, code, out, err = child(argv, timeout, env)
    doc = document(out)
    return {"wall_s": wall, "exit": code, "results": doc.get("results", []),
            "error": None if doc else (err.strip().splitlines() or ["no JSON"])[-1]}


def figures(name: str, data: dict, bare: dict) -> str:
    """The numbers a probe's verdict carries, in one line."""
    if name == "stress_gemm" and data.get("median_tflops"):
        floor = bare.get("median_tflops")
        vs = f" = {data['median_tflops'] / floor:.1%} of bare {floor:.0f}" if floor else ""
        return (f"median {data['median_tflops']:.0f} TFLOP/s{vs}; slowest {data.get('stability', 0):.1%} of median; "
                f"last/first quarter {data.get('trend', 0):.1%}; differing repeats {data.get('differing_repeats')}; "
                f"slowdown intervals {data.get('slowdown_intervals')}")
    if name == "memory_pattern" and "bytes_tested" in data:
        free = data.get("free_bytes") or 0
        return (f"{data['bytes_tested'] / 2**30:.1f} GiB of {free / 2**30:.1f} free, {data.get('rounds')} rounds, "
                f"{data.get('mismatches')} mismatches, {data.get('gb_per_s') or 0:.0f} GB/s write+read")
    if name == "bitsandbytes" and data.get("results"):
        return "; ".join(f"{qt} bs{r.get('blocksize')}: rt {r.get('round_trip_rel_err')}, mm {r.get('matmul_rel_err')}"
                         if not r.get("error") else f"{qt}: {r['error'][:60]}" for qt, r in data["results"].items())
    if name == "attention_speed" and "sdpa_ms" in data:
        return f"SDPA {data.get('sdpa_ms')} ms, flash-attn {data.get('flash_attn_ms')} ms (fwd+bwd) {data.get('shape')}"
    if name == "p2p_matrix" and data.get("pairs"):
        return f"{len(data['pairs'])} pairs, min {data.get('min_gbps')} / median {data.get('median_gbps')} GB/s"
    if name == "collective_sweep" and data.get("rows"):
        return (f"all-reduce busbw {data.get('largest_busbw_gbps'):.1f} GB/s at the largest size, "
                f"link {data.get('link')}")
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="doctor --duration (seconds, default 60)")
    parser.add_argument("--alone-duration", type=float, default=30.0, help="--duration of each stress probe alone")
    parser.add_argument("--no-alone", action="store_true", help="skip running each new probe on its own")
    parser.add_argument("--timeout", type=float, default=540.0, help="per command, seconds")
    parser.add_argument("--cpu", action="store_true", help="the new probes in CPU test mode, in one stage")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT") or "/tmp")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"duration": args.duration}
    if args.cpu:
        from rocmcheck.probes.stage import run_stage

        report["bare"] = {"skipped": "CPU test mode"}
        results = run_stage(timeout_s=args.timeout, only=set(NEW), cpu=True)
        report["doctor"] = {"wall_s": None, "exit": None, "results": [r.to_dict() for r in results]}
        report["alone"] = {}
    else:
        wall, code, out, err = child(["-c", BARE_GEMM], args.timeout)
        report["bare"] = last_json(out) or {"error": (err.strip().splitlines() or ["?"])[-1], "wall_s": wall}
        report["doctor"] = run(["-m", "rocmcheck", "doctor", "--level", "3", "--duration", f"{args.duration:g}",
                                "--no-train", "--json"], args.timeout)
        report["alone"] = {}
        if not args.no_alone:
            for name in NEW:
                extra = ["--duration", f"{args.alone_duration:g}"] if name in STRESS else []
                report["alone"][name] = run(["-m", "rocmcheck", "probe", name, *extra, "--json"], args.timeout)
            report["alone"]["attention_speed gqa"] = run(["-m", "rocmcheck", "probe", "attention_speed", "--json"],
                                                         args.timeout, {"ROCMCHECK_ATTENTION_SHAPE": GQA_SHAPE})
    (out_dir / "bench_level3.json").write_text(json.dumps(report, indent=1, default=str))

    bare = report["bare"]
    print("bare GEMM (the floor): " + (f"median {bare['median_tflops']:.1f} TFLOP/s, best {bare['best_tflops']:.1f}, "
                                       f"min {bare['min_tflops']:.1f} on {bare.get('device')}"
                                       if "median_tflops" in bare else str(bare)))
    d = report["doctor"]
    if d["wall_s"] is not None:
        counts: dict[str, int] = {}
        for r in d["results"]:
            counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
        print(f"doctor --level 3 --duration {args.duration:g} --no-train: {d['wall_s']:.1f} s, exit {d['exit']}, "
              f"{counts}" + (f"  ({d['error']})" if d.get("error") else ""))
    by_id = {r.get("id"): r for r in d["results"]}
    print(f"\n{'probe':22} {'run':7} {'status':6} {'stage s':>8} {'alone s':>8}  figures / verdict")
    rows = [(n, "doctor", by_id.get(f"probe.{n}", {})) for n in NEW]
    rows += [(n.split()[0], "alone" if " " not in n else "gqa", (a.get("results") or [{}])[0])
             for n, a in report["alone"].items()]
    for name, where, r in rows:
        data = r.get("data") or {}
        alone_s = report["alone"].get(name if where != "gqa" else "attention_speed gqa", {}).get("wall_s")
        line = figures(name, data, bare) or (r.get("summary") or "not run")[:110]
        print(f"{name:22} {where:7} {r.get('status', '-'):6} {data.get('seconds') or 0:8.1f} "
              f"{'' if alone_s is None or where == 'doctor' else f'{alone_s:8.1f}':>8}  {line}")
        if r.get("status") not in (None, "pass") and r.get("summary"):
            print(f"{'':47}{r['summary'][:150]}")
    print(f"JSON: {out_dir / 'bench_level3.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
