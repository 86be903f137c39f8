"""The first use of the run's attention kernels, begun in a thread of its own while the run imports transformers
and loads the model.

Some torch builds ship their attention kernels for a GPU only as PTX, which the driver compiles at the kernels'
first use on a machine and keeps in its cache (~/.nv/ComputeCache, or CUDA_CACHE_PATH): torch 2.11+cu130 on an
H200, bf16 attention forward and backward in a fresh process, 0.21-0.25 s with that cache and 1.97-2.18 s with
CUDA_CACHE_DISABLE=1, so a run's first use of a head size paid about 2 s in its numerics pass (the Mistral-shaped
2B's bf16 pass: 2.0-2.8 s on fresh VMs, 0.65-0.87 s later; benchmarks/RESULTS.md section 18). The compile
happens inside the op, which torch's bindings run with the GIL let go, so this thread pays it while the main
thread imports and loads, and the run's own first use then finds the kernels compiled.

What it runs is what the model's attention runs in training (transformers' sdpa path with no attention mask,
as a run's packed rows have none): torch's scaled_dot_product_attention, causal, bf16, at the config's head
size, heads and key/value heads (enable_gqa where they differ), then an output projection under bf16 autocast,
forward and backward, on the run's GPU. A config
whose attention takes a mask (a sliding window shorter than the sequence) runs other kernels: not warmed. The
run waits for the thread before its numerics pass (join), so nothing of it is on the GPU when the run measures
memory. Anything that goes wrong here is only recorded: the run pays the first use itself, as without this.
Imports torch.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from rocmcheck.train.compiled import has_sliding_window
from rocmcheck.train.report import first_line

WARM_DTYPE = torch.bfloat16  # the dtype the run's autocast (and --pure-bf16) computes attention in
WARM_BATCH = 1  # rows of the warm-up: the kernels compiled do not depend on the batch
WARM_VALUE = 0.01  # every input's value


def attention_shape(config: dict[str, Any], seq_len: int) -> tuple[int, int, int] | None:
    """(heads, key/value heads, head size) of a decoder config.json, or None when the config does not say them
    plainly or its attention takes a mask at this sequence length (a sliding window no longer than it). Never
    raises."""
    try:
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    # transformers passes sdpa no mask where the keys are fewer than the window (masking_utils'
    # _ignore_causal_mask_sdpa): a window longer than the sequence is plain causal attention
    window = config.get("sliding_window")
    if has_sliding_window(SimpleNamespace(**config)) and not (type(window) is int and window > seq_len):
        return None
    if heads <= 0 or kv_heads <= 0 or head_dim <= 0 or heads % kv_heads:
        return None
    return heads, kv_heads, head_dim


def warm_attention(device: torch.device, shape: tuple[int, int, int], seq_len: int) -> None:
    """The causal bf16 attention at the config's heads and head size, then a projection of its output as the
    model's layers make it (fp32 weights under bf16 autocast: the BLAS library's load and its handle, which torch
    hands to the run's thread from its pool once this one ends), forward and backward."""
    heads, kv_heads, head_dim = shape
    # Constants, not random numbers: the kernels are the same, and the device's random generator, which the run
    # seeds meanwhile (a LoRA adapter's initial weights come from it), stays untouched.
    q = torch.full((WARM_BATCH, heads, seq_len, head_dim), WARM_VALUE, device=device, dtype=WARM_DTYPE,
                   requires_grad=True)
    k, v = (torch.full((WARM_BATCH, kv_heads, seq_len, head_dim), WARM_VALUE, device=device, dtype=WARM_DTYPE,
                       requires_grad=True) for _ in range(2))
    extra = {"enable_gqa": True} if kv_heads != heads else {}
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, **extra)
    weight = torch.full((heads * head_dim, heads * head_dim), WARM_VALUE, device=device, requires_grad=True)
    rows = out.transpose(1, 2).reshape(WARM_BATCH * seq_len, heads * head_dim)
    with torch.autocast(device.type, dtype=WARM_DTYPE):
        projected = torch.nn.functional.linear(rows, weight)
    projected.float().sum().backward()


class AttentionWarmup:
    """The thread, started at once, on the GPU a rank of this local_rank uses (distributed.bind_device's choice);
    join() waits for it and returns what it did, for info: {"shape": [heads, kv_heads, head_dim], "seconds": s},
    or {"skipped": why}, or {"error": its first line}."""

    def __init__(self, model_dir: Path, seq_len: int, local_rank: int = 0) -> None:
        self.info: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        try:
            config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.info["skipped"] = f"config.json not readable: {type(exc).__name__}"
            return
        shape = attention_shape(config if isinstance(config, dict) else {}, seq_len)
        if shape is None:
            self.info["skipped"] = "the config's attention is not the plain causal kind this warms"
            return
        self.info["shape"] = list(shape)
        self._thread = threading.Thread(target=self._run, args=(shape, seq_len, local_rank), daemon=True,
                                        name="rocmcheck-attention-warmup")
        self._thread.start()

    def _run(self, shape: tuple[int, int, int], seq_len: int, local_rank: int) -> None:
        t0 = time.perf_counter()
        try:
            if not torch.cuda.is_available():
                self.info["skipped"] = "no GPU"
                return
            device = torch.device("cuda", local_rank % torch.cuda.device_count())
            with torch.cuda.device(device):
                warm_attention(device, shape, seq_len)
                torch.cuda.synchronize(device)
            self.info["seconds"] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001 - recorded only: the run's own first use compiles instead
            self.info["error"] = f"{type(exc).__name__}: {first_line(exc)}"

    def join(self) -> dict[str, Any]:
        if self._thread is not None:
            self._thread.join()
        return self.info
