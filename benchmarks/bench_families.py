"""smoke-train on random-init folders of the causal-LM families beyond LLaMA, full fine-tune and LoRA, on this
machine's GPU (prints as it goes):

    python benchmarks/bench_families.py [--families gemma2,mixtral] [--modes full,lora] [--steps 30] [--keep DIR]
    python benchmarks/bench_families.py --tiny     # CPU-sized folders, --device cpu: the script's own check

Each family's folder is made once with transformers (random init, seed 0, saved in bf16 with the bundled tokenizer):
a realistic shape at about 0.2-0.3B parameters (24 layers would be a 1B; 8-16 keep every run seconds on one H100),
the family's own features kept (Gemma 2's soft-capping and sliding window, Gemma 3's local/global layers, Phi-3's
fused projections, OLMo 2's QK norms, Qwen 2's tied embeddings; Mixtral's 8 experts top-2, Qwen-MoE's shared expert,
DeepSeek-V3's compressed attention, GPT-OSS's biased experts). Then `rocmcheck smoke-train --json --model F
--steps N` and the same with `--lora-rank 16`, each a fresh process as a person runs it. A table row per run: family,
parameters, mode, wall seconds, the verdicts (each that is not a pass named with its status) and the MoE verdicts'
numbers. A family the installed transformers cannot build is a row saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rocmcheck.train.config import BUNDLED_MODEL  # noqa: E402

# ~0.2B dense: 1024 wide, 16 layers, 16 heads over 4 KV heads, a 32k vocabulary.
DENSE = {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 16, "num_attention_heads": 16,
         "num_key_value_heads": 4, "head_dim": 64, "max_position_embeddings": 4096, "vocab_size": 32000}
# ~0.3B MoE: 1024 wide, 8 layers, 8-16 experts of 512-1024. DeepSeek-V3 takes no head_dim: its rotary part is
# qk_rope_head_dim wide, and a head_dim beside it would size the rotary embedding wrongly; its compressed attention
# has as many KV heads as query heads (DeepSeek-V3: 128 and 128).
MOE = {**DENSE, "num_hidden_layers": 8}
FAMILIES = {
    "gemma2": {**DENSE, "sliding_window": 512, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
    "gemma3_text": {**DENSE, "sliding_window": 512},
    "phi3": {**DENSE},
    "olmo2": {**DENSE},
    "qwen2": {**DENSE, "tie_word_embeddings": True},
    "mixtral": {**MOE, "intermediate_size": 1024, "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2_moe": {**MOE, "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 512,
                  "shared_expert_intermediate_size": 1024},
    "qwen3_moe": {**MOE, "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 512},
    "deepseek_v3": {**{k: v for k, v in MOE.items() if k != "head_dim"}, "num_key_value_heads": 16,
                    "n_routed_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 512,
                    "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 256, "q_lora_rank": 512,
                    "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "n_group": 1, "topk_group": 1,
                    "rope_scaling": None},
    "gpt_oss": {**MOE, "intermediate_size": 512, "num_local_experts": 16, "num_experts_per_tok": 4,
                "sliding_window": 512},
}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256, "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64, "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8, "v_head_dim": 16, "sliding_window": 16}
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def say(*parts: object) -> None:
    print(*parts, flush=True)


def make_folder(model_type: str, values: dict, folder: Path, device: str) -> int:
    """A random-init model of model_type saved into folder (bf16); its parameter count."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(BUNDLED_MODEL)
    cfg = transformers.AutoConfig.for_model(model_type, **values, bos_token_id=tok.bos_token_id,
                                            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(BUNDLED_MODEL / name, folder / name)
    del model
    return params


def run(folder: Path, mode: str, args: argparse.Namespace) -> tuple[float, int, dict]:
    cmd = [sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--model", str(folder), "--steps",
           str(args.steps)]
    if mode == "lora":
        cmd += ["--lora-rank", str(args.lora_rank)]
    if args.tiny:
        cmd += ["--device", "cpu", "--micro-batch", "2", "--seq-len", "32", "--lr", "1e-2", "--no-profile"]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=args.timeout)
    wall = time.perf_counter() - t0
    try:
        return wall, proc.returncode, json.loads(proc.stdout)
    except ValueError:
        return wall, proc.returncode, {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}


def summary(doc: dict) -> str:
    if "error" in doc:
        return f"no report: {doc['error']}"
    results = doc.get("results", [])
    counts = doc.get("counts", {})
    head = " ".join(f"{k} {v}" for k, v in counts.items() if v)
    odd = [f"{r['id']} {r['status']}: {r['summary'][:90]}" for r in results if r["status"] not in ("pass",)]
    moe = []
    for r in results:
        if r["id"] == "train.moe_router" and r["status"] == "pass":
            moe.append(f"router shares {r['data']['min_share']:.0%}-{r['data']['max_share']:.0%}")
        if r["id"] == "train.moe_experts" and r["status"] == "pass":
            moe.append(f"expert bf16 rel err {r['data']['rel_error']:.1e}")
    numerics = next((r for r in results if r["id"] == "train.numerics"), None)
    learns = next((r for r in results if r["id"] == "train.learns"), None)
    extra = []
    if numerics and numerics["status"] == "pass":
        d = numerics["data"]
        extra.append(f"numerics loss {d['loss_rel_diff']:.1e} block {d['worst_block_rel_diff']:.1%}")
    if learns and learns["status"] == "pass":
        extra.append(f"loss {learns['data']['first']:.2f}->{learns['data']['last_mean']:.2f}")
    return "; ".join([head] + extra + moe + odd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--modes", default="full,lora")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--tiny", action="store_true", help="CPU-sized folders and --device cpu (checks this script)")
    ap.add_argument("--keep", type=Path, default=None, help="make the folders here and keep them")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    if args.tiny:
        args.steps = max(args.steps if args.steps != 30 else 20, 10)
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    say(f"# bench_families: transformers {transformers.__version__}, torch {torch.__version__}, "
        f"{torch.cuda.get_device_name(0) if device == 'cuda' else 'CPU'}; steps {args.steps}, LoRA rank "
        f"{args.lora_rank}{', tiny' if args.tiny else ''}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-families-"))
    root.mkdir(parents=True, exist_ok=True)
    say(f"{'family':<12} {'params':>8} {'mode':<5} {'wall s':>7} {'exit':>4}  verdicts")
    t_all = time.perf_counter()
    try:
        for family in args.families.split(","):
            values = dict(FAMILIES[family])
            if args.tiny:
                experts = next((k for k in EXPERT_KEYS if k in values), None)
                values.update({k: v for k, v in TINY.items() if k in values})
                values["vocab_size"] = 109
                if family == "deepseek_v3":
                    values["num_key_value_heads"] = values["num_attention_heads"]
                values["num_hidden_layers"] = 2
                if experts:
                    values[experts], values["num_experts_per_tok"] = 4, 2
                    values["intermediate_size"] = 128
            folder = root / family
            t0 = time.perf_counter()
            try:
                params = make_folder(family, values, folder, device)
            except Exception as exc:  # noqa: BLE001 - a family this transformers cannot build is a row
                say(f"{family:<12} {'-':>8} {'-':<5} {'-':>7} {'-':>4}  not built: {type(exc).__name__}: "
                    f"{str(exc)[:120]}")
                continue
            say(f"# {family}: folder made in {time.perf_counter() - t0:.1f} s")
            for mode in args.modes.split(","):
                wall, code, doc = run(folder, mode, args)
                say(f"{family:<12} {params / 1e6:>7.1f}M {mode:<5} {wall:>7.1f} {code:>4}  {summary(doc)}")
            if args.keep is None:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    say(f"# total {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
