"""DeepSpeed and multi-GPU smoke-train benchmark for the lent 2-GPU H200 machine (one call, ~6 min):

    python benchmarks/bench_deepspeed.py                 # writes $OUT/bench_deepspeed.json (or ./bench-out)
    python benchmarks/bench_deepspeed.py --wheels DIR    # first: pip install --no-index --find-links DIR deepspeed

On 1 GPU, the bundled fine-tune (default 120 steps) through:
  plain vs ZeRO-2 (recipes/zero2.json), and plain vs ZeRO-3 vs ZeRO-3 + CPU offload (recipes/zero3-offload.json,
  its no-offload phase is ZeRO-3): step time, loss parity (largest step / 10-step-window difference), offload cost %.
  Then, time permitting, the offload cost on a ~0.3B LLaMA shape (random init, 20 steps), where the optimizer
  step is big enough for offload to cost what it costs on a real model (the seed reports 15-20%).
On 2 GPUs: --nproc 2 plain (DDP) and --nproc 2 --deepspeed zero3.json: rank agreement, tokens/s.

Every run is `rocmcheck smoke-train ... --json` in a child process with a timeout. DeepSpeed JIT-builds
its ops there on first use (nvcc; cpu_adam for offload), so the first DeepSpeed run is slower: its wall
time is reported apart from its step times. Without a GPU the same flow runs a 10-step CPU variant of
ZeRO-2 and of --nproc 2 (to test this script) and marks the GPU rows skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child, last_json  # noqa: E402

RECIPES = REPO / "recipes"
BUDGET_S = 330.0  # leave room under the 6-minute call for startup and the table


def gpu_count() -> int:
    _, rc, out, _ = child(["-c", "import torch; "
                                 "print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"], 120)
    try:
        return int(out.strip().splitlines()[-1]) if rc == 0 else 0
    except (ValueError, IndexError):
        return 0


def steady_ms(step_s: list[float]) -> float | None:
    steady = step_s[3:] if len(step_s) > 6 else step_s
    return statistics.median(steady) * 1e3 if steady else None


def curve_gap(a: list[float], b: list[float]) -> tuple[float, float]:
    """(largest |step diff|, largest |10-step window mean diff|)."""
    if not a or len(a) != len(b):
        return float("nan"), float("nan")
    steps = max(abs(x - y) for x, y in zip(a, b))
    wins = max(abs(sum(a[i:i + 10]) / len(a[i:i + 10]) - sum(b[i:i + 10]) / len(b[i:i + 10]))
               for i in range(0, len(a), 10))
    return steps, wins


def smoke(label: str, args: list[str], timeout: float, record: dict, rows: list, extra_env: dict | None = None) -> dict:
    wall, rc, stdout, stderr = child(["-m", "rocmcheck", "smoke-train", "--json", "--no-profile", *args],
                                     timeout, extra_env)
    rep = last_json(stdout) or {}
    results = {r["id"]: r for r in rep.get("results", [])}
    entry = {"args": args, "wall_s": wall, "rc": rc, "statuses": {k: r["status"] for k, r in results.items()},
             "summaries": {k: r["summary"] for k, r in results.items()}, "info": rep.get("info", {}),
             "stderr_tail": stderr[-3000:]}
    record[label] = entry
    phases = entry["info"].get("phases", {})
    plain = phases.get("plain", {}).get("losses", [])
    for name, ph in phases.items():
        ms = steady_ms(ph.get("step_s", []))
        baseline = name == "plain" and len(phases) > 1
        gap = curve_gap(ph.get("losses", []), plain) if not baseline else (0.0, 0.0)
        ph["_gap"] = gap
        rows.append((f"{label}: {name}", f"{ms:.1f} ms/step" if ms else "n/a",
                     "(parity baseline)" if baseline else (f"max step diff {gap[0]:.3f}, window {gap[1]:.3f}"
                                                           if name != "plain" else "DDP" if "--nproc" in args else ""),
                     ph.get("strategy", {}).get("optimizer", "")))
    if not phases:
        thr = results.get("train.throughput", {}).get("data", {})
        rows.append((label, f"{thr.get('step_s_median', 0) * 1e3:.1f} ms/step" if thr else "n/a",
                     f"{thr.get('tokens_per_s', 0):,.0f} tok/s" if thr else "", ""))
    for key in ("train.deepspeed_parity", "train.offload_cost", "train.rank_agreement", "train.launch", "train.run"):
        if key in results:
            rows.append((f"  {key}", results[key]["status"], results[key]["summary"][:90], ""))
    rows.append(("  wall / rc", f"{wall:.0f} s", f"rc {rc}", ""))
    return entry


def make_medium_model(dest: Path) -> Path:
    """A ~0.3B LLaMA (random init) with the bundled tokenizer: big enough for offload to show its cost."""
    code = (
        "import sys, shutil, torch\n"
        "from pathlib import Path\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "src, dst = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "c = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,\n"
        "    num_key_value_heads=4, vocab_size=32000, max_position_embeddings=256, tie_word_embeddings=False,\n"
        "    bos_token_id=1, eos_token_id=2, pad_token_id=3)\n"
        "torch.manual_seed(0); LlamaForCausalLM(c).save_pretrained(dst)\n"
        "for f in ('tokenizer.json', 'tokenizer_config.json'): shutil.copy(src / f, dst / f)\n"
    )
    _, rc, _, err = child(["-c", code, str(REPO / "rocmcheck/train/assets/tiny-llama"), str(dest)], 300)
    if rc != 0:
        raise RuntimeError(err[-1000:])
    return dest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", type=Path, help="install deepspeed from this folder of wheels first (no network)")
    ap.add_argument("--steps", type=int, default=120)
    args = ap.parse_args()
    t_start = time.perf_counter()
    out = Path(os.environ.get("OUT") or REPO / "bench-out")
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {}
    rows: list[tuple[str, str, str, str]] = []
    if args.wheels:
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(args.wheels),
                            "--no-build-isolation", "deepspeed"], capture_output=True, text=True, timeout=300)
        record["pip_install"] = {"rc": p.returncode, "tail": (p.stdout + p.stderr)[-2000:]}
    _, rc, ds_out, _ = child(["-c", "import deepspeed; print(deepspeed.__version__)"], 120, {"DS_ACCELERATOR": "cpu"})
    record["deepspeed"] = ds_out.strip().splitlines()[-1] if rc == 0 and ds_out.strip() else None
    gpus = gpu_count()
    record["gpus"] = gpus
    record["tools"] = {t: shutil.which(t) for t in ("nvcc", "ninja", "g++")}
    ext = tempfile.mkdtemp(prefix="rocmcheck-ds-ext-")
    env = {"TORCH_EXTENSIONS_DIR": ext}
    steps = ["--steps", str(args.steps)]

    def left() -> float:
        return BUDGET_S - (time.perf_counter() - t_start)

    if record["deepspeed"] is None:
        rows.append(("deepspeed", "not importable", "pass --wheels DIR, or pip install deepspeed", ""))
    elif gpus == 0:
        cpu = ["--device", "cpu", "--steps", "10", "--micro-batch", "8"]
        env["DS_ACCELERATOR"] = "cpu"
        smoke("cpu zero2 (flow test)", [*cpu, "--deepspeed", str(RECIPES / "zero2.json")], 600, record, rows, env)
        smoke("cpu nproc2 (flow test)", [*cpu, "--nproc", "2"], 300, record, rows, env)
        rows.append(("GPU rows", "skipped", "no GPU visible to torch", ""))
    else:
        one_gpu = {**env, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]}
        smoke("1gpu zero2", [*steps, "--deepspeed", str(RECIPES / "zero2.json")], min(240, left()),
              record, rows, one_gpu)
        smoke("1gpu zero3+offload", [*steps, "--deepspeed", str(RECIPES / "zero3-offload.json")], min(240, left()),
              record, rows, one_gpu)
        if gpus >= 2 and left() > 60:
            smoke("2gpu plain DDP", [*steps, "--nproc", "2"], min(150, left()), record, rows, env)
        if gpus >= 2 and left() > 60:
            smoke("2gpu zero3", [*steps, "--nproc", "2", "--deepspeed", str(RECIPES / "zero3.json")], min(180, left()),
                  record, rows, env)
        if left() > 90:
            medium = make_medium_model(Path(tempfile.mkdtemp(prefix="rocmcheck-medium-")) / "llama-0.3b")
            smoke("1gpu 0.3B zero3+offload",
                  ["--model", str(medium), "--steps", "20", "--micro-batch", "8", "--seq-len", "256",
                   "--deepspeed", str(RECIPES / "zero3-offload.json")], left() - 10, record, rows, one_gpu)
        else:
            rows.append(("1gpu 0.3B zero3+offload", "skipped", f"out of time budget ({left():.0f} s left)", ""))

    record["total_s"] = time.perf_counter() - t_start
    (out / "bench_deepspeed.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"{'run / phase':<{width}}  {'step time':<14}  {'parity / verdict':<60}  optimizer")
    for name, a, b, c in rows:
        print(f"{name:<{width}}  {a:<14}  {b:<60}  {c}")
    print(f"total {record['total_s']:.0f} s; JSON: {out / 'bench_deepspeed.json'}")


if __name__ == "__main__":
    main()
