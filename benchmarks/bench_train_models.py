"""smoke-train on people's own models, on a GPU machine without network (one call):

    python benchmarks/bench_train_models.py            # writes into $OUT (or ./bench-out)

Makes two random-init LLaMA folders here (bf16 safetensors, the bundled tokenizer, no download): the
TinyLlama 1.1B shape and the Llama-2 7B shape (13 GB). Then runs, each from process start to verdict:
  1. `smoke-train --model 1.1B --steps 30`
  2. `smoke-train --model 7B --steps 30 --gradient-checkpointing`
  3. `smoke-train --model 7B --steps 30 --gradient-checkpointing --lora-rank 16`
  4. `smoke-train` (the bundled model), cold and warm
  5. the planted numerics fault (tests/test_train_own_model.py -k numerics) on this GPU
printing every verdict, the exit code and the wall time as it goes. Each run is a child with a timeout.
Every run must exit 0; step 5 must pass (the faulty attention fails train.numerics, the healthy one passes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child, last_json  # noqa: E402

SHAPES = {
    "llama-1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                       num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048),
    "llama-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096),
}

MAKE = """
import shutil, sys, torch, transformers
from pathlib import Path
out, shape = Path(sys.argv[1]), __import__("json").loads(sys.argv[2])
bundled = Path(sys.argv[3])
tok = transformers.AutoTokenizer.from_pretrained(bundled)
torch.manual_seed(0)
conf = transformers.LlamaConfig(**shape, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                pad_token_id=tok.pad_token_id, tie_word_embeddings=False)
with torch.device("cuda"):
    model = transformers.LlamaForCausalLM(conf).to(torch.bfloat16)
model.save_pretrained(out)
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(bundled / name, out / name)
print(sum(p.numel() for p in model.parameters()))
"""


def make_folder(root: Path, name: str) -> Path:
    path = root / name
    if (path / "config.json").is_file():
        return path
    t0 = time.perf_counter()
    wall, rc, out, err = child(["-c", MAKE, str(path), json.dumps(SHAPES[name]),
                                str(REPO / "rocmcheck" / "train" / "assets" / "tiny-llama")], 900)
    size = sum(f.stat().st_size for f in path.glob("*.safetensors")) / 1e9 if path.is_dir() else 0
    print(f"made {name}: rc {rc}, {out.strip()[-20:]} params, {size:.1f} GB safetensors, "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    if rc != 0:
        print(err[-2000:], flush=True)
    return path


def smoke(label: str, args: list[str], out: Path, timeout: float, record: dict) -> None:
    print(f"--- {label}: rocmcheck smoke-train {' '.join(args)}", flush=True)
    wall, rc, stdout, stderr = child(["-m", "rocmcheck", "smoke-train", "--json", *args], timeout)
    rep = last_json(stdout) or {}
    record[label] = {"args": args, "wall_s": wall, "rc": rc, "report": rep, "stderr_tail": stderr[-3000:]}
    for r in rep.get("results", []):
        print(f"    {r['status']:<5} {r['id']:<22} {r['summary'][:150]}", flush=True)
        if r["status"] in ("fail", "warn", "crash") and r.get("fix"):
            print(f"          fix: {r['fix'][:200]}", flush=True)
    info = rep.get("info", {})
    print(f"    exit {rc}, {wall:.1f} s from process start (run {info.get('total_s', 0):.1f} s, loop "
          f"{info.get('loop_s') or 0:.1f} s, lr {info.get('config', {}).get('lr')})", flush=True)
    if not rep:
        print("    no report:", stderr.strip().splitlines()[-5:], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/rocmcheck-models"))
    ap.add_argument("--only", nargs="*", default=None, help="labels to run: 1.1b 7b 7b-lora bundled numerics")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT") or REPO / "bench-out")
    out.mkdir(parents=True, exist_ok=True)
    args.models_dir.mkdir(parents=True, exist_ok=True)
    want = set(args.only or ["1.1b", "7b", "7b-lora", "bundled", "numerics"])
    record: dict = {}
    if "1.1b" in want:
        smoke("1.1b", ["--model", str(make_folder(args.models_dir, "llama-1.1b")), "--steps", "30"], out, 600, record)
    if want & {"7b", "7b-lora"}:
        seven = make_folder(args.models_dir, "llama-7b")
        if "7b" in want:
            smoke("7b", ["--model", str(seven), "--steps", "30", "--gradient-checkpointing"], out, 900, record)
        if "7b-lora" in want:
            smoke("7b-lora", ["--model", str(seven), "--steps", "30", "--gradient-checkpointing", "--lora-rank", "16"],
                  out, 900, record)
    if "bundled" in want:
        for label in ("bundled-cold", "bundled-warm"):
            smoke(label, [], out, 300, record)
    if "numerics" in want:
        print("--- planted numerics fault on this device: pytest tests/test_train_own_model.py -k numerics", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "numerics",
                               str(REPO / "tests" / "test_train_own_model.py")], capture_output=True, text=True,
                              timeout=600, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
        print("\n".join(proc.stdout.strip().splitlines()[-6:]), f"\n    exit {proc.returncode}, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        record["numerics-fault"] = {"rc": proc.returncode, "stdout_tail": proc.stdout[-3000:]}
    (out / "bench_train_models.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    print("\nsummary")
    for label, r in record.items():
        print(f"  {label:<16} exit {r['rc']}" + (f", {r['wall_s']:.1f} s" if "wall_s" in r else ""))
    if os.environ.get("ROCMCHECK_KEEP_MODELS") != "1":
        shutil.rmtree(args.models_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
