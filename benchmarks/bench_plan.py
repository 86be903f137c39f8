"""The real batch finder on the LLaMA 1.1B shape (random init, nothing downloaded) at seq 2048, without and with
gradient checkpointing: measured peak vs the planner's estimate for every micro-batch tried.

    python benchmarks/bench_plan.py            # on a GPU machine; ~2-3 minutes on an H200
Writes $OUT/bench_plan.json when OUT is set. On a machine without a GPU it says so and exits 0."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocmcheck.plan.estimate import CONTEXT_BYTES, estimate_memory  # noqa: E402
from rocmcheck.plan.measure import find_max_micro_batch, measured_verdict  # noqa: E402
from rocmcheck.plan.shapes import preset_shape  # noqa: E402
from rocmcheck.units import GIB  # noqa: E402

SEQ = 2048
RUNS = [("no checkpointing", False, 64), ("gradient checkpointing", True, 160)]


def main() -> int:
    shape = preset_shape("tinyllama-1.1b")
    report: dict = {"model": shape.name, "seq_len": SEQ, "runs": []}
    for label, ckpt, cap in RUNS:
        t0 = time.monotonic()
        m = find_max_micro_batch(shape, SEQ, 0.95, gradient_checkpointing=ckpt, steps=2, max_micro_batch=cap,
                                 timeout_s=170)
        verdict = measured_verdict(m)
        print(f"\n== {label}: {verdict.status.value}: {verdict.summary}  ({time.monotonic() - t0:.0f} s)")
        if not m.available:
            report["runs"].append({"label": label, "verdict": verdict.to_dict()})
            continue
        if m.outside_bytes:
            print(f"memory outside PyTorch's allocator (context, libraries): {m.outside_bytes / GIB:.2f} GiB "
                  f"(planner assumes {CONTEXT_BYTES / GIB:.2f} GiB)")
        print(f"{'micro-batch':>11} {'outcome':>8} {'allocated':>10} {'reserved':>10} {'device':>10} "
              f"{'estimate':>10} {'est/alloc':>9}")
        rows = []
        for t in m.trials:
            est = estimate_memory(shape, micro_batch=t.micro_batch, seq_len=SEQ, gradient_checkpointing=ckpt)
            ratio = est.allocated_peak_bytes / t.peak_allocated if t.peak_allocated else None
            print(f"{t.micro_batch:>11} {t.outcome:>8} {(t.peak_allocated or 0) / GIB:>10.2f} "
                  f"{(t.peak_reserved or 0) / GIB:>10.2f} {(t.device_peak or 0) / GIB:>10.2f} "
                  f"{est.allocated_peak_bytes / GIB:>10.2f} {ratio if ratio else float('nan'):>9.3f}")
            rows.append({**t.to_dict(), "estimate_allocated_bytes": int(est.allocated_peak_bytes),
                         "estimate_total_bytes": int(est.total_bytes), "estimate_peak_phase": est.peak_phase})
        report["runs"].append({"label": label, "gradient_checkpointing": ckpt, "verdict": verdict.to_dict(),
                               "measured": m.to_dict(), "rows": rows})
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_plan.json").write_text(json.dumps(report, indent=2))
        print(f"\nwrote {Path(out) / 'bench_plan.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
