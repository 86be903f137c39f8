"""`--compile`: torch.compile the model without losing SDPA's causal fast path.

Eager transformers hands SDPA no mask and `is_causal=True` when a batch has no padding and no packed
position ids, so the flash/cuDNN kernels skip the masked upper triangle. Under torch.compile, with
use_cache=False (the training setting), it cannot prove there are no packed sequences (that check reads
tensor values: transformers.masking_utils.find_packed_sequence_indices), so it builds a dense
[batch, 1, seq, seq] mask and every layer's attention computes the masked half too. On an H200, 1.1B
shape, attention was 28% of a compiled step, and fixing this took --compile from 1.27x to 1.53x HF Trainer.

Our training batches are exactly the case eager transformers skips: no attention_mask, position ids
0..seq-1 made by the model. For those calls only, the compiled model runs under an attention
implementation that is transformers' own SDPA function registered without a mask builder, which
transformers answers with no mask (is_causal=True). Calls with a padding mask, and models with a
sliding window, keep transformers' mask."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

CAUSAL_SDPA = "sdpa_unmasked_causal"  # registered next to "sdpa"; set only during a compiled training call


def compile_model(model: torch.nn.Module, attn: str) -> Callable[..., Any]:
    """torch.compile(model), as a callable that takes the model's keyword arguments."""
    compiled = torch.compile(model)
    if attn != "sdpa" or has_sliding_window(model.config):
        return compiled
    _register()

    def forward(**kwargs: Any) -> Any:
        if kwargs.get("attention_mask") is not None or kwargs.get("position_ids") is not None:
            return compiled(**kwargs)  # padding or packed sequences: the mask carries information
        with attention_implementation(model, CAUSAL_SDPA):
            return compiled(**kwargs)

    return forward


def has_sliding_window(config: Any) -> bool:
    layer_types = getattr(config, "layer_types", None) or ()
    return (getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True)) or \
        any("sliding" in str(t) for t in layer_types)


@contextmanager
def attention_implementation(model: torch.nn.Module, name: str) -> Iterator[None]:
    """The config is shared by every layer of a LLaMA-family model; setting it there switches them all."""
    before = model.config._attn_implementation
    model.config._attn_implementation = name
    try:
        yield
    finally:
        model.config._attn_implementation = before


@functools.cache  # once per process
def _register() -> None:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    AttentionInterface.register(CAUSAL_SDPA, sdpa_attention_forward)
