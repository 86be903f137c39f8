"""Turns task examples into packed training rows (nanoGPT-style contiguous blocks) and eval prompts.

Each example is <bos> prompt response <eos>. Rows are filled with whole examples up to seq_len and
padded; only response and <eos> tokens carry a label (prompt digits are random, so their loss is noise
that would hide whether the run learned the task).
"""

from __future__ import annotations

import torch

from rocmcheck.train.task import Example

IGNORE = -100


def special_ids(tokenizer) -> tuple[int | None, int, int]:
    """(bos, eos, pad). Llama-2-style tokenizers have no pad token: pad with eos (masked anyway)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("tokenizer has no eos token")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return tokenizer.bos_token_id, eos, pad


def encode_examples(tokenizer, examples: list[Example]) -> list[tuple[list[int], list[int]]]:
    """(ids, labels) of each example. Two batched tokenizer calls (prompts, responses): one call per text
    costs a second per ten thousand examples, a batch a few milliseconds; the ids are the same."""
    bos, eos, _ = special_ids(tokenizer)
    if not examples:
        return []
    head = [bos] if bos is not None else []
    out = []
    for p, r in zip(_ids(tokenizer, [ex.prompt for ex in examples]), _ids(tokenizer, [ex.response for ex in examples])):
        prompt, response = head + p, r + [eos]
        out.append((prompt + response, [IGNORE] * len(prompt) + response))
    return out


def _ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens. A fast tokenizer's Rust backend directly (what
    tokenizer(texts) calls, less the per-text conversion into Python objects, which costs five times the
    encoding itself); any other tokenizer through its own batch call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def pack_rows(tokenizer, examples: list[Example], seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, labels), each [rows, seq_len]. Examples never straddle two rows."""
    _, _, pad = special_ids(tokenizer)
    rows_ids: list[list[int]] = []
    rows_lab: list[list[int]] = []
    ids: list[int] = []
    lab: list[int] = []
    for e_ids, e_lab in encode_examples(tokenizer, examples):
        if len(e_ids) > seq_len:
            raise ValueError(f"--seq-len {seq_len} is shorter than one example ({len(e_ids)} tokens)")
        if len(ids) + len(e_ids) > seq_len:
            rows_ids.append(ids + [pad] * (seq_len - len(ids)))
            rows_lab.append(lab + [IGNORE] * (seq_len - len(lab)))
            ids, lab = [], []
        ids, lab = ids + e_ids, lab + e_lab
    if ids:
        rows_ids.append(ids + [pad] * (seq_len - len(ids)))
        rows_lab.append(lab + [IGNORE] * (seq_len - len(lab)))
    return torch.tensor(rows_ids, dtype=torch.long), torch.tensor(rows_lab, dtype=torch.long)


def examples_per_row(tokenizer, example: Example, seq_len: int) -> int:
    return max(1, seq_len // len(encode_examples(tokenizer, [example])[0][0]))


def left_padded_prompts(tokenizer, examples: list[Example]) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts for batched greedy generation: left-padded ids and the attention mask."""
    bos, _, pad = special_ids(tokenizer)
    head = [bos] if bos is not None else []
    encoded = [head + tokenizer.encode(e.prompt, add_special_tokens=False) for e in examples]
    width = max(len(e) for e in encoded)
    ids = [[pad] * (width - len(e)) + e for e in encoded]
    mask = [[0] * (width - len(e)) + [1] * len(e) for e in encoded]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)
