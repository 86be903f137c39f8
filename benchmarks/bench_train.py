"""Smoke-train benchmark for the lent GPU (one call):

    python benchmarks/bench_train.py            # writes into $OUT (or ./bench-out)

1. time-to-verdict of the default `rocmcheck smoke-train` from process start (cold, then warm);
2. `smoke-train --bench` on the 1.1B LLaMA shape: plain loop vs HF Trainer vs --compile, checkpointing
   off and on alike (targets: loop >= 1.0x Trainer tok/s, --compile >= 1.3x, same loss curve);
3. records this GPU's reference loss curve of the default run into $OUT/reference_curves.json
   (the bundled file plus a "cuda"/"rocm" entry) for the lead to copy next to the bundled model.

Prints a table. On a machine without a GPU it measures step 1 and skips 2 and 3 with a note.
Every run is a child process with a timeout, so one hang cannot eat the whole call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child, last_json  # noqa: E402

sys.path.insert(0, str(REPO))


def has_gpu() -> bool:
    _, rc, out, _ = child(["-c", "import torch; print(torch.cuda.is_available())"], 120)
    return rc == 0 and out.strip().endswith("True")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--skip-default", action="store_true",
                    help="only the --bench part (no time-to-verdict, no reference curve)")
    ap.add_argument("--bench-ckpt", choices=["off", "on", "both"], default="both")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT") or REPO / "bench-out")
    out.mkdir(parents=True, exist_ok=True)
    gpu = has_gpu()
    rows: list[tuple[str, str]] = []
    record: dict = {"gpu": gpu}

    # 1. time to verdict, from process start
    for label in () if args.skip_default else ("cold", "warm"):
        wall, rc, stdout, stderr = child(["-m", "rocmcheck", "smoke-train", "--json",
                                          "--out", str(out / f"default-{label}")], 300)
        rep = last_json(stdout) or {}
        statuses = {r["id"]: r["status"] for r in rep.get("results", [])}
        thr = next((r["data"] for r in rep.get("results", []) if r["id"] == "train.throughput"), {})
        record[f"default_{label}"] = {"wall_s": wall, "rc": rc, "statuses": statuses, "info": rep.get("info", {}),
                                      "stderr_tail": stderr[-2000:]}
        rows.append((f"default smoke-train ({label}) time to verdict",
                     f"{wall:.1f} s (rc {rc}; target <= 20 s on H200)"))
        rows.append((f"  verdicts ({label})", " ".join(f"{k.split('.', 1)[1]}={v}" for k, v in statuses.items())))
        if thr:
            rows.append((f"  tiny-model throughput ({label})", f"{thr.get('tokens_per_s', 0):,.0f} tok/s"))

    # 2. --bench on the 1.1B shape
    if not gpu:
        rows.append(("--bench 1.1B", "skipped: no GPU here"))
    elif not args.skip_bench:
        for ckpt in (["off", "on"] if args.bench_ckpt == "both" else [args.bench_ckpt]):
            argv = (["-m", "rocmcheck", "smoke-train", "--bench", "--json"]
                    + (["--gradient-checkpointing"] if ckpt == "on" else []))
            wall, rc, stdout, stderr = child(argv, 420)
            rep = last_json(stdout) or {}
            record[f"bench_ckpt_{ckpt}"] = {"wall_s": wall, "rc": rc, "report": rep, "stderr_tail": stderr[-3000:]}
            for r in rep.get("info", {}).get("bench", []):
                if "error" in r:
                    rows.append((f"bench ckpt={ckpt} {r['mode']}", r["error"]))
                    continue
                mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "n/a"
                rows.append((f"bench ckpt={ckpt} {r['mode']}",
                             f"{r['tokens_per_s']:,.0f} tok/s, MFU {mfu}, step {r['step_s'] * 1e3:.0f} ms, "
                             f"peak {r.get('peak_gib') or 0:.1f} GiB, "
                             f"loss {r['first_loss']:.3f}->{r['last_loss']:.3f}"))
            for r in rep.get("results", []):
                rows.append((f"  {r['id']} (ckpt={ckpt})", f"{r['status']}: {r['summary']}"))
            if not rep:
                rows.append((f"bench ckpt={ckpt}", f"no report (rc {rc}): {stderr.strip().splitlines()[-1:] }"))

    # 3. this GPU's reference curve
    if gpu and not args.skip_default:
        ref_out = out / "reference_curves.json"
        bundled = REPO / "rocmcheck" / "train" / "assets" / "tiny-llama" / "reference_curves.json"
        if bundled.is_file():
            shutil.copy(bundled, ref_out)
        wall, rc, stdout, stderr = child([str(REPO / "scripts" / "record_reference.py"), "--out", str(ref_out)], 300)
        rows.append(("reference curve recorded",
                     f"{ref_out} (rc {rc}, {wall:.0f} s)" if rc == 0 else f"failed: {stderr[-300:]}"))
    elif not gpu:
        rows.append(("GPU reference curve", "skipped: no GPU here"))

    (out / "bench_train.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  result")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
