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
