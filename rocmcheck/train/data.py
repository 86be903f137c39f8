"""Turns task examples into packed training rows (nanoGPT-style contiguous blocks) and eval prompts.

Each example is <bos> prompt response <eos>. Rows are filled with whole examples up to seq_len and
padded; only response and <eos> tokens carry a label (prompt digits are random, so their loss is noise
that would hide whether the run learned the task).
"""

from __future__ import annotations

from itertools import islice
from typing import Iterable

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


# Examples encoded per batched tokenizer call while packing: large enough that the call's own cost vanishes, small
# enough that little is encoded past the last row asked for.
ENCODE_CHUNK = 512
# A first chunk of this many examples per row asked for: the task's examples are 10-16 tokens with the bundled
# tokenizer (13 on average), so a 64-token row holds 4-6 of them and one chunk covers a fixed batch's 16 rows.
EXAMPLES_PER_ROW_AT_MOST = 8


def pack_rows(tokenizer, examples: Iterable[Example], seq_len: int,
              rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, labels), each [rows, seq_len]. Examples never straddle two rows. rows: stop once that many rows
    are full, the same rows that packing every example would put first (`examples` may then be endless: only what
    the rows need is made and encoded); None: every example, the last row padded."""
    _, _, pad = special_ids(tokenizer)
    rows_ids: list[list[int]] = []
    rows_lab: list[list[int]] = []
    ids: list[int] = []
    lab: list[int] = []
    source = iter(examples)
    size = ENCODE_CHUNK if rows is None else min(ENCODE_CHUNK, EXAMPLES_PER_ROW_AT_MOST * rows)
    while rows is None or len(rows_ids) < rows:
        chunk = list(islice(source, size))
        if not chunk:
            break
        for e_ids, e_lab in encode_examples(tokenizer, chunk):
            if len(e_ids) > seq_len:
                raise ValueError(f"--seq-len {seq_len} is shorter than one example ({len(e_ids)} tokens)")
            if len(ids) + len(e_ids) > seq_len:
                rows_ids.append(ids + [pad] * (seq_len - len(ids)))
                rows_lab.append(lab + [IGNORE] * (seq_len - len(lab)))
                ids, lab = [], []
                if rows is not None and len(rows_ids) == rows:
                    break
            ids, lab = ids + e_ids, lab + e_lab
    if ids and (rows is None or len(rows_ids) < rows):
        rows_ids.append(ids + [pad] * (seq_len - len(ids)))
        rows_lab.append(lab + [IGNORE] * (seq_len - len(lab)))
    return torch.tensor(rows_ids, dtype=torch.long), torch.tensor(rows_lab, dtype=torch.long)


def left_padded_prompts(tokenizer, examples: list[Example]) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts for batched greedy generation: left-padded ids and the attention mask."""
    bos, _, pad = special_ids(tokenizer)
    head = [bos] if bos is not None else []
    encoded = [head + tokenizer.encode(e.prompt, add_special_tokens=False) for e in examples]
    width = max(len(e) for e in encoded)
    ids = [[pad] * (width - len(e)) + e for e in encoded]
    mask = [[0] * (width - len(e)) + [1] * len(e) for e in encoded]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)
