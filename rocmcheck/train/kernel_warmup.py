"""The first use of the run's kernels, begun in a thread of its own while the run imports transformers and loads
the model.

A process pays for each kernel's first use. Some torch builds ship their attention kernels for a GPU only as PTX,
which the driver compiles at the kernels' first use on a machine and keeps in its cache (~/.nv/ComputeCache, or
CUDA_CACHE_PATH): torch 2.11+cu130 on an H200, bf16 attention forward and backward in a fresh process, 0.21-0.25 s
with that cache and 1.97-2.18 s with CUDA_CACHE_DISABLE=1, so a run's first use of a head size paid about 2 s in
its numerics pass (the Mistral-shaped 2B's bf16 pass: 2.0-2.8 s on fresh VMs, 0.65-0.87 s later;
benchmarks/RESULTS.md section 18). Every other kernel's module is loaded at its first launch too (CUDA's lazy
loading, the default since CUDA 12.2), and the BLAS library makes its handle and workspace. All of that happens
inside the ops, which torch's bindings run with the GIL let go, so this thread pays it while the main thread
imports and loads, and the run's own first use then finds it done.

What it runs is what a decoder's training step runs, in the run's dtypes (fp32 weights under bf16 autocast):
- the attention as transformers' sdpa path runs it with no attention mask (a run's packed rows have none): torch's
  scaled_dot_product_attention, causal, bf16, at the config's head size, heads and key/value heads (enable_gqa
  where they differ), then an output projection, forward and backward;
- one decoder layer's other kernels, written out in torch's own ops as transformers' LLaMA-family code computes
  them (embedding, RMS norm in fp32, rotary embedding, SiLU-gated MLP, residual adds, the head's logits in fp32,
  cross entropy with ignored positions), backward, gradient clipping over all of its weights at once, and one
  fused AdamW step;
- every projection's GEMMs (query, key/value, output, gate/up, down, head) at the model's own sizes and the run's
  numbers of rows (its numerics pass, its micro-batch), forward and both gradients: the BLAS library picks a kernel
  per shape, and loads it at that shape's first use.
A config whose attention takes a mask (a sliding window shorter than the sequence) runs other attention kernels:
those are not warmed, the rest is. The run waits for the thread before its numerics pass (join), so nothing of it
is on the GPU when the run measures memory (its blocks go back to the driver). It uses no random numbers: the
device's random generator, which the run seeds meanwhile (a LoRA adapter's initial weights come from it), stays
untouched. Anything that goes wrong here is only recorded: the run pays the first use itself, as without this.
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
WARM_BATCH = 1  # rows of the warm-up: the kernels loaded do not depend on the batch
WARM_VALUE = 0.01  # every input's value
# The decoder layer's sizes: the config's, up to these (its weights, gradients and AdamW moments in fp32: 63 MB at
# most, where a 70B's MLP at full size would be ~8 GB); a kernel's module is loaded by any launch of one of its
# kernels, whatever the size. The GEMMs' own kernels are warmed at the model's sizes by warm_gemms.
WARM_MAX_HIDDEN, WARM_MAX_INTERMEDIATE, WARM_MAX_VOCAB = 512, 1024, 2048
# The projections' GEMMs are run at the model's own sizes (the BLAS library picks, and loads, a kernel per shape),
# but none whose weight is over this many elements (256 MiB in bf16, 512 MiB with its gradient: a 7B's 32k head
# is under it, Llama 3's 128k head is not) ...
WARM_MAX_GEMM_WEIGHT = 2**27
# ... nor one whose tensors would take more than this share of the device's free memory as the thread starts: the
# run loads its model meanwhile.
WARM_MAX_FREE_SHARE = 1 / 16
IGNORE_INDEX = -100  # transformers' label for positions without a loss


def _heads(config: dict[str, Any]) -> tuple[int, int, int] | None:
    try:
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if heads <= 0 or kv_heads <= 0 or head_dim <= 0 or heads % kv_heads:
        return None
    return heads, kv_heads, head_dim


def attention_shape(config: dict[str, Any], seq_len: int) -> tuple[int, int, int] | None:
    """(heads, key/value heads, head size) of a decoder config.json, or None when the config does not say them
    plainly or its attention takes a mask at this sequence length (a sliding window no longer than it). Never
    raises."""
    # transformers passes sdpa no mask where the keys are fewer than the window (masking_utils'
    # _ignore_causal_mask_sdpa): a window longer than the sequence is plain causal attention
    window = config.get("sliding_window")
    if has_sliding_window(SimpleNamespace(**config)) and not (type(window) is int and window > seq_len):
        return None
    return _heads(config)


def linear_shapes(config: dict[str, Any]) -> list[tuple[int, int]]:
    """The (in, out) sizes of a LLaMA-family decoder's projections (query, key/value, output, gate/up, down,
    head), each once, leaving out any whose weight is over WARM_MAX_GEMM_WEIGHT; empty when the config does not
    say its sizes plainly. Never raises."""
    heads = _heads(config)
    try:
        hidden, intermediate, vocab = (int(config[k]) for k in ("hidden_size", "intermediate_size", "vocab_size"))
    except (KeyError, TypeError, ValueError):
        return []
    if heads is None or min(hidden, intermediate, vocab) <= 0:
        return []
    n_heads, kv_heads, head_dim = heads
    shapes = [(hidden, n_heads * head_dim), (hidden, kv_heads * head_dim), (n_heads * head_dim, hidden),
              (hidden, intermediate), (intermediate, hidden), (hidden, vocab)]
    return [shape for shape in dict.fromkeys(shapes) if shape[0] * shape[1] <= WARM_MAX_GEMM_WEIGHT]


def layer_sizes(config: dict[str, Any]) -> tuple[int, int, int] | None:
    """(hidden, intermediate, vocabulary) sizes of the decoder layer the warm-up runs, the config's up to the
    caps above, or None when the config does not say them as positive integers. Never raises."""
    try:
        sizes = (int(config["hidden_size"]), int(config["intermediate_size"]), int(config["vocab_size"]))
    except (KeyError, TypeError, ValueError):
        return None
    if min(sizes) <= 0:
        return None
    hidden, intermediate, vocab = sizes
    hidden = min(hidden, WARM_MAX_HIDDEN) // 2 * 2  # the rotary embedding halves it
    return (hidden, min(intermediate, WARM_MAX_INTERMEDIATE), min(vocab, WARM_MAX_VOCAB)) if hidden else None


def warm_attention(device: torch.device, shape: tuple[int, int, int], seq_len: int) -> None:
    """The causal bf16 attention at the config's heads and head size, and a projection of its output (fp32
    weights under bf16 autocast: the BLAS library's load and its handle, which torch hands to the run's thread
    from its pool once this one ends), forward and backward."""
    heads, kv_heads, head_dim = shape
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


def warm_layer(device: torch.device, sizes: tuple[int, int, int], seq_len: int) -> None:
    """One decoder layer's kernels besides the attention, as transformers' LLaMA-family modeling computes them
    under bf16 autocast over fp32 weights, forward and backward, then clipping and a fused AdamW step."""
    F = torch.nn.functional
    hidden, intermediate, vocab = sizes
    ids = torch.arange(WARM_BATCH * seq_len, device=device).remainder(vocab).view(WARM_BATCH, seq_len)
    labels = F.pad(ids, (0, 1), value=IGNORE_INDEX)[..., 1:]  # the loss's shift, the last position ignored

    def weight(*shape: int) -> torch.Tensor:
        return torch.full(shape, WARM_VALUE, device=device, requires_grad=True)

    embed, norm, query, gate_up, down, head = (weight(vocab, hidden), weight(hidden), weight(hidden, hidden),
                                               weight(2 * intermediate, hidden), weight(hidden, intermediate),
                                               weight(vocab, hidden))
    with torch.autocast(device.type, dtype=WARM_DTYPE):
        x = F.embedding(ids, embed)
        normed = norm * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        # the rotary embedding: fp32 angles, their cosine and sine in bf16, applied to a bf16 projection by halves
        positions = torch.arange(seq_len, device=device, dtype=torch.float32)
        angles = positions[:, None] * torch.full((hidden // 2,), WARM_VALUE, device=device)[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(WARM_DTYPE), angles.sin().to(WARM_DTYPE)
        q = F.linear(normed, query)
        rotated = q * cos + torch.cat((-q[..., hidden // 2:], q[..., :hidden // 2]), dim=-1) * sin
        gate, up = F.linear(normed + rotated, gate_up).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, down)
        logits = F.linear(x, head).float()
        loss = F.cross_entropy(logits.view(-1, vocab), labels.reshape(-1), ignore_index=IGNORE_INDEX)
    loss.backward()
    params = [embed, norm, query, gate_up, down, head]
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    # the fused AdamW kernel itself: torch.optim's first step imports torch._dynamo, which the main thread may
    # be importing meanwhile (two threads in one package's imports can deadlock)
    grads = [p.grad for p in params]
    moments, squares = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    steps = [torch.ones((), device=device) for _ in params]
    with torch.no_grad():
        torch._fused_adamw_(params, grads, moments, squares, [], steps, lr=1e-3, beta1=0.9, beta2=0.999,
                            weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)


def gemm_bytes(fan_in: int, fan_out: int, rows: int) -> int:
    """What one warmed GEMM holds at once: its input, weight and output and the two gradients, in bf16."""
    return 2 * (2 * rows * fan_in + 2 * fan_out * fan_in + rows * fan_out)


def warm_gemms(device: torch.device, shapes: list[tuple[int, int]], seq_len: int, rows: tuple[int, ...],
               max_bytes: float = float("inf")) -> int:
    """Each projection's GEMMs as the run computes them (bf16, forward and both gradients) at the run's numbers of
    rows: the kernel the BLAS library picks for a shape is loaded at that shape's first use. A GEMM that would
    hold more than max_bytes is left out; returns how many were."""
    left_out = 0
    for n_rows in dict.fromkeys(rows):
        for fan_in, fan_out in shapes:
            if gemm_bytes(fan_in, fan_out, n_rows * seq_len) > max_bytes:
                left_out += 1
                continue
            x = torch.full((n_rows * seq_len, fan_in), WARM_VALUE, device=device, dtype=WARM_DTYPE, requires_grad=True)
            w = torch.full((fan_out, fan_in), WARM_VALUE, device=device, dtype=WARM_DTYPE, requires_grad=True)
            # a scalar's backward: backward() given a gradient imports sympy (torch.fx's symbolic shapes)
            torch.nn.functional.linear(x, w).sum().backward()
            del x, w
    return left_out


class KernelWarmup:
    """The thread, started at once, on the GPU a rank of this local_rank uses (distributed.bind_device's choice);
    join() waits for it and returns what it did, for info: {"attention": [heads, kv_heads, head_dim] or why not,
    "layer": [hidden, intermediate, vocab] or why not, "gemms": {"shapes": [[in, out], ...], "rows": [...],
    "left_out": how many for the free memory}, "seconds": s}, or {"skipped": why}, or {"error": its first line}."""

    def __init__(self, model_dir: Path, seq_len: int, local_rank: int = 0, attention: bool = True,
                 rows: tuple[int, ...] = ()) -> None:
        """attention: the run's attention is torch's sdpa (another implementation runs other kernels). rows: the
        numbers of rows the run's forward passes take (its numerics pass, its micro-batch)."""
        self.info: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        try:
            config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.info["skipped"] = f"config.json not readable: {type(exc).__name__}"
            return
        config = config if isinstance(config, dict) else {}
        shape, sizes = attention_shape(config, seq_len) if attention else None, layer_sizes(config)
        gemms = linear_shapes(config) if rows else []
        if shape is None and sizes is None and not gemms:
            self.info["skipped"] = "the config says neither its attention's shape nor its layer's sizes"
            return
        self.info["attention"] = (list(shape) if shape else "not the plain causal kind this warms" if attention
                                  else "not torch's sdpa")
        self.info["layer"] = list(sizes) if sizes else "sizes not said"
        self.info["gemms"] = {"shapes": [list(g) for g in gemms], "rows": list(dict.fromkeys(rows))}
        self._thread = threading.Thread(target=self._run, args=(shape, sizes, gemms, seq_len, rows, local_rank),
                                        daemon=True, name="rocmcheck-kernel-warmup")
        self._thread.start()

    def _run(self, shape: tuple[int, int, int] | None, sizes: tuple[int, int, int] | None,
             gemms: list[tuple[int, int]], seq_len: int, rows: tuple[int, ...], local_rank: int) -> None:
        t0 = time.perf_counter()
        try:
            if not torch.cuda.is_available():
                self.info["skipped"] = "no GPU"
                return
            device = torch.device("cuda", local_rank % torch.cuda.device_count())
            with torch.cuda.device(device):
                free, _ = torch.cuda.mem_get_info(device)
                if shape is not None:
                    warm_attention(device, shape, seq_len)
                if gemms:
                    self.info["gemms"]["left_out"] = warm_gemms(device, gemms, seq_len, rows,
                                                                WARM_MAX_FREE_SHARE * free)
                if sizes is not None:  # last: its fused AdamW kernel is what a build most likely lacks
                    warm_layer(device, sizes, seq_len)
                torch.cuda.synchronize(device)
                torch.cuda.empty_cache()  # its blocks back to the driver: the run's memory is the run's own
            self.info["seconds"] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001 - recorded only: the run's own first use loads them instead
            self.info["error"] = f"{type(exc).__name__}: {first_line(exc)}"

    def join(self) -> dict[str, Any]:
        if self._thread is not None:
            self._thread.join()
        return self.info
