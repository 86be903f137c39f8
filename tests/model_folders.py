"""Model folders the training tests make: a random-init LLaMA of another shape than the bundled one, saved with
the bundled tokenizer, as a person's own model folder would be."""

from __future__ import annotations

import shutil
from pathlib import Path

from rocmcheck.train.config import BUNDLED_MODEL


def tokenizer_files(dest: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(BUNDLED_MODEL / name, dest / name)


def make_random_llama(folder: Path) -> Path:
    """A LLaMA 96 wide, 3 layers, 6 heads over 2 KV heads, random init (seed 7), saved into folder."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(BUNDLED_MODEL)
    torch.manual_seed(7)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=96, intermediate_size=256, num_hidden_layers=3, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=128, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    model.save_pretrained(folder)
    tokenizer_files(folder)
    return folder


# Tiny random-init configs of the causal-LM families beyond LLaMA that smoke-train trains: 2 layers, 64 wide, 4 heads
# over 2 KV heads, the bundled tokenizer's vocabulary. Each family's own features are kept: Gemma 2's soft-capping
# and sliding window, Gemma 3's text model (QK norms, local/global layers), Phi-3, OLMo 2, Qwen 2 with tied
# embeddings, and the mixture-of-experts shapes (4 experts, 2 per token; Qwen-MoE's shared expert; DeepSeek-V3's
# compressed attention and its dense first layer; GPT-OSS's biased experts and sliding window).
DENSE_FAMILIES = {
    "gemma2": {"head_dim": 16, "sliding_window": 16, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0},
    "gemma3_text": {"head_dim": 16, "sliding_window": 16, "sliding_window_pattern": 2},
    "phi3": {},
    "olmo2": {},
    "qwen2": {"tie_word_embeddings": True},
}
MOE_FAMILIES = {
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                  "shared_expert_intermediate_size": 64},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "head_dim": 16},
    "deepseek_v3": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                    "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 16, "q_lora_rank": 32,
                    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "n_group": 1, "topk_group": 1,
                    "rope_scaling": None},
    "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16, "sliding_window": 16},
}
FAMILIES = {**DENSE_FAMILIES, **MOE_FAMILIES}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 256}


def family_config(model_type: str, size: dict | None = None):
    """The transformers config of a tiny (or `size`d) model of `model_type`, for the bundled tokenizer."""
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(BUNDLED_MODEL)
    values = {**TINY, **(size or {}), **FAMILIES[model_type], "vocab_size": len(tok), "bos_token_id": tok.bos_token_id,
              "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    return transformers.AutoConfig.for_model(model_type, **values)


def make_family(folder: Path, model_type: str, size: dict | None = None, seed: int = 7) -> Path:
    """A random-init model of `model_type` (seed 7), saved with the bundled tokenizer into folder."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(family_config(model_type, size))
    model.save_pretrained(folder)
    tokenizer_files(folder)
    return folder
