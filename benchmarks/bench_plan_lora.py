"""Predicted vs measured peak memory for LoRA (peft) and full fine-tunes, and the trial count of --measure.

    python benchmarks/bench_plan_lora.py --out /tmp/bench_plan_lora.json     # on an NVIDIA/AMD GPU, ~8 min on an H200
    python benchmarks/bench_plan_lora.py --only-measure --only 7B            # one --measure case, ~2 min
    python benchmarks/bench_plan_lora.py --measure-first                     # the --measure cases, then the table

Every configuration builds LlamaForCausalLM from a preset shape (random init, nothing downloaded) in the batch
finder's child (rocmcheck/plan/probe_child.py), runs two optimizer steps at one micro-batch, and reads
torch.cuda.max_memory_allocated(); the planner's allocated peak for the same settings is printed beside it, one
line per configuration as it finishes. Then `plan --measure` (the planner-first search) on the two cases whose
answers are known on an H200: 1.1B seq 2048 (21) and 7B seq 4096 with checkpointing (10), each printed with its
tries and seconds as it finishes (--only-measure runs just these, --measure-first runs them before the table).
Targets: max |pred - meas| / meas <= 10%, and no underestimate beyond 5% (pred < 0.95 x meas)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocmcheck.plan.estimate import estimate_memory  # noqa: E402
from rocmcheck.plan.measure import find_max_micro_batch  # noqa: E402
from rocmcheck.plan.shapes import preset_shape  # noqa: E402
from rocmcheck.units import GIB  # noqa: E402

MAX_ERR, MAX_UNDER = 0.10, 0.05
# (label, preset, seq, micro-batch, settings). LoRA: peft over a bf16 base; defaults: fp32 adapters, autocast.
LORA = [
    ("1.1B r16 all ac", "tinyllama-1.1b", 2048, 8, dict(lora_rank=16)),
    ("1.1B r8 qv ac", "tinyllama-1.1b", 2048, 8, dict(lora_rank=8, lora_target="qv")),
    ("1.1B r64 all noac s4096", "tinyllama-1.1b", 4096, 4, dict(lora_rank=64, autocast=False)),
    ("1.1B r16 all ckpt s4096", "tinyllama-1.1b", 4096, 8, dict(lora_rank=16, gradient_checkpointing=True)),
    ("1.1B r16 all drop0.05", "tinyllama-1.1b", 2048, 8, dict(lora_rank=16, lora_dropout=0.05)),
    ("7B r16 all ac", "llama-2-7b", 2048, 4, dict(lora_rank=16)),
    ("7B r16 all noac", "llama-2-7b", 2048, 4, dict(lora_rank=16, autocast=False)),
    ("7B r8 qv ac s4096", "llama-2-7b", 4096, 2, dict(lora_rank=8, lora_target="qv")),
    ("7B r64 all ckpt s4096", "llama-2-7b", 4096, 4, dict(lora_rank=64, gradient_checkpointing=True)),
    ("7B r16 all ckpt noac s4096", "llama-2-7b", 4096, 4,
     dict(lora_rank=16, gradient_checkpointing=True, autocast=False)),
    ("7B r16 all bf16-adapters", "llama-2-7b", 2048, 4, dict(lora_rank=16, adapter_dtype="bf16")),
    ("8B r16 all ac", "llama-3-8b", 2048, 2, dict(lora_rank=16)),
    ("8B r16 all ckpt s4096", "llama-3-8b", 4096, 2, dict(lora_rank=16, gradient_checkpointing=True)),
    ("8B r8 qv noac s4096", "llama-3-8b", 4096, 1, dict(lora_rank=8, lora_target="qv", autocast=False)),
    ("8B r64 all ckpt drop0.1 s4096", "llama-3-8b", 4096, 2,
     dict(lora_rank=64, gradient_checkpointing=True, lora_dropout=0.1)),
]
# The full fine-tune runs of the H200 baselines (amp = fp32 weights under autocast).
FULL = [
    ("1.1B full mb4", "tinyllama-1.1b", 2048, 4, dict()),
    ("1.1B full mb4 ckpt", "tinyllama-1.1b", 2048, 4, dict(gradient_checkpointing=True)),
    ("1.1B full mb8 ckpt", "tinyllama-1.1b", 2048, 8, dict(gradient_checkpointing=True)),
    ("1.1B full mb4 pure-bf16", "tinyllama-1.1b", 2048, 4, dict(precision="pure-bf16")),
    ("7B full mb1 ckpt", "llama-2-7b", 2048, 1, dict(gradient_checkpointing=True)),
    ("7B full mb2 ckpt", "llama-2-7b", 2048, 2, dict(gradient_checkpointing=True)),
]
MEASURE = [("1.1B seq 2048", "tinyllama-1.1b", 2048, dict(), 21),
           ("7B seq 4096 ckpt", "llama-2-7b", 4096, dict(gradient_checkpointing=True), 10)]


def one(label: str, preset: str, seq: int, mb: int, settings: dict, kind: str) -> dict:
    shape = preset_shape(preset)
    est = estimate_memory(shape, micro_batch=mb, seq_len=seq, **settings)
    t0 = time.monotonic()
    m = find_max_micro_batch(shape, seq, 0.999, start=mb, max_micro_batch=mb, max_trials=1, steps=2, timeout_s=150,
                             **settings)
    row = {"label": label, "kind": kind, "preset": preset, "seq_len": seq, "micro_batch": mb, "settings": settings,
           "predicted_allocated": int(est.allocated_peak_bytes), "predicted_phase": est.peak_phase,
           "predicted_lines": {ln.name: int(est.at_peak(ln)) for ln in est.lines}, "seconds": 0.0}
    row["seconds"] = round(time.monotonic() - t0, 1)
    trial = m.trials[0] if m.trials else None
    if not m.available or trial is None or trial.outcome not in ("ok", "over") or not trial.peak_allocated:
        why = m.reason or (trial.error if trial else "no trial") or (trial.outcome if trial else "")
        row["error"] = str(why)[:200]
        print(f"{label:<32} pred {est.allocated_peak_bytes / GIB:7.2f} GiB   meas  -----   {row['error']}", flush=True)
        return row
    meas = trial.peak_allocated
    err = (est.allocated_peak_bytes - meas) / meas
    row.update(measured_allocated=meas, measured_reserved=trial.peak_reserved, error=None, rel_err=round(err, 4))
    flag = "UNDER" if err < -MAX_UNDER else ("OFF" if abs(err) > MAX_ERR else "ok")
    print(f"{label:<32} pred {est.allocated_peak_bytes / GIB:7.2f} GiB   meas {meas / GIB:7.2f} GiB   "
          f"{err:+7.1%}  {flag:<5} (reserved {(trial.peak_reserved or 0) / GIB:.2f}, peak at "
          f"{est.peak_phase}, {row['seconds']:.0f} s)", flush=True)
    return row


def summarize(report: dict) -> None:
    for kind in ("lora", "full"):
        rows = [r for r in report["configs"] if r["kind"] == kind and r.get("rel_err") is not None]
        if not rows:
            continue
        worst = max(rows, key=lambda r: abs(r["rel_err"]))
        under = min(rows, key=lambda r: r["rel_err"])
        ok = abs(worst["rel_err"]) <= MAX_ERR and under["rel_err"] >= -MAX_UNDER
        summary = {"kind": kind, "measured": len(rows), "max_abs_rel_err": worst["rel_err"], "worst": worst["label"],
                   "largest_underestimate": under["rel_err"], "met": ok}
        report[f"summary_{kind}"] = summary
        print(f"== {kind}: {len(rows)} measured; max |pred-meas|/meas {abs(worst['rel_err']):.1%} ({worst['label']}); "
              f"largest underestimate {min(0.0, under['rel_err']):.1%} ({under['label']}); "
              f"targets <= {MAX_ERR:.0%} and no under beyond {MAX_UNDER:.0%}: {'MET' if ok else 'MISSED'}", flush=True)


def run_measure(label: str, preset: str, seq: int, settings: dict, want: int, timeout_s: float) -> dict:
    """`plan --measure`: the planner's answer first, then around it; its tries and how long they took."""
    print(f"== --measure {label}: starting (timeout {timeout_s:.0f} s)", flush=True)
    t0 = time.monotonic()
    m = find_max_micro_batch(preset_shape(preset), seq, 0.95, steps=2, timeout_s=timeout_s, **settings)
    secs = time.monotonic() - t0
    tries = [(t.micro_batch, t.outcome, round((t.device_peak or 0) / GIB, 2)) for t in m.trials]
    row = {"label": label, "guess": m.guess, "best": m.best, "stop": m.stop, "trials": len(m.trials),
           "tries": tries, "trial_seconds": [t.seconds for t in m.trials], "seconds": round(secs, 1),
           "expected": want, "reason": m.reason, "outside_bytes": m.outside_bytes, "total_bytes": m.total_bytes}
    print(f"== --measure {label}: answer {m.best} (expected {want} on an H200) in {len(m.trials)} tries, "
          f"{secs:.0f} s; planner's guess {m.guess}; tries {tries}; seconds per try "
          f"{[round(t.seconds or 0, 1) for t in m.trials]}; {m.stop or m.reason}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write every number here as JSON")
    ap.add_argument("--skip-measure", action="store_true", help="only predicted vs measured peaks")
    ap.add_argument("--only-measure", action="store_true", help="only the --measure cases, not the table")
    ap.add_argument("--measure-first", action="store_true", help="the --measure cases before the table")
    ap.add_argument("--measure-timeout", type=float, default=300.0, help="seconds for each --measure case")
    ap.add_argument("--only", default="", help="run only configurations (and --measure cases) whose label "
                    "contains this")
    args = ap.parse_args()
    if args.skip_measure and args.only_measure:
        print("--skip-measure and --only-measure leave nothing to run", file=sys.stderr)
        return 2
    report: dict = {"configs": [], "measure": []}
    t_start = time.monotonic()

    def measures() -> None:
        for label, preset, seq, settings, want in MEASURE:
            if not args.only or args.only in label:
                report["measure"].append(run_measure(label, preset, seq, settings, want, args.measure_timeout))

    if not args.skip_measure and (args.only_measure or args.measure_first):
        measures()
    if not args.only_measure:
        print(f"{'configuration':<32} {'predicted':>14}   {'measured':>12}   {'error':>7}", flush=True)
        for kind, table in (("lora", LORA), ("full", FULL)):
            for label, preset, seq, mb, settings in table:
                if args.only and args.only not in label:
                    continue
                report["configs"].append(one(label, preset, seq, mb, settings, kind))
                if report["configs"][-1]["error"] and "no GPU" in report["configs"][-1]["error"]:
                    print("no GPU: nothing to measure", flush=True)
                    return 0
        summarize(report)
        if not args.skip_measure and not args.measure_first:
            measures()
    if not report["configs"] and not report["measure"]:
        print(f"nothing to run: no configuration or --measure case matches --only {args.only!r}", file=sys.stderr)
        return 2
    report["seconds"] = round(time.monotonic() - t_start, 1)
    print(f"total {report['seconds']:.0f} s", flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
