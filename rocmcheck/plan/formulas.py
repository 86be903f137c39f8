"""The memory formulas, each a pure function with its source. estimate.py combines them per GPU.

Symbols: P params, N data-parallel GPUs, b micro-batch, s sequence length, h hidden size, a attention heads,
kv = key/value heads x head_dim, I intermediate size, V vocabulary, L layers. Bytes throughout."""

from __future__ import annotations

ZERO_PAPER = "https://arxiv.org/abs/1910.02054"
KORTHIKANTI = "https://arxiv.org/abs/2205.05198"
FLASH_ATTENTION = "https://arxiv.org/abs/2205.14135"
HF_LLAMA = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py"
HF_LOSS = "https://github.com/huggingface/transformers/blob/main/src/transformers/loss/loss_utils.py"
TORCH_AMP = "https://pytorch.org/docs/stable/amp.html"
TORCH_OPTIM = "https://pytorch.org/docs/stable/optim.html"
TORCH_DDP = "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html"
DS_ZERO_CONFIG = ("https://github.com/deepspeedai/DeepSpeed/blob/edaa7221267243c7be7fb49c5d5f5c4fb97b4641/"
                  "deepspeed/runtime/zero/config.py")
H200_BASELINES = "../shared/knowledge/gpu-baselines-h200.json (measured peaks, LLaMA 1.1B and 7B shapes)"

# DeepSpeed ZeRO defaults (elements), deepspeed/runtime/zero/config.py.
DS_REDUCE_BUCKET = 500_000_000
DS_ALLGATHER_BUCKET = 500_000_000
DS_PREFETCH_BUCKET = 50_000_000


def zero_model_state_bytes(params: int, stage: int, world_size: int, k: int = 12) -> float:
    """ZeRO paper, Fig. 1: 2P weights + 2P grads + kP optimizer states (k = 12 for mixed-precision Adam),
    partitioned over N GPUs by stage (1: optimizer, 2: + gradients, 3: + weights)."""
    n = world_size
    if stage == 0:
        return (2 + 2 + k) * params
    if stage == 1:
        return 2 * params + 2 * params + k * params / n
    if stage == 2:
        return 2 * params + (2 + k) * params / n
    if stage == 3:
        return (2 + 2 + k) * params / n
    raise ValueError(f"ZeRO stage must be 0-3, got {stage}")


def llama_layer_bytes_per_token(h: int, q: int, kv: int, inter: int, heads: int, s: int,
                                residual_fp32: bool, attention: str) -> int:
    """Bytes autograd keeps for backward per token in one transformers LlamaDecoderLayer (a count of the saved
    tensors; tests check it against a real LlamaForCausalLM on the CPU).

    - two RMSNorms: the fp32 input (4h), the normalised fp32 (autocast, 4h) or its bf16 copy plus the bf16 output
      (bf16 model, 2h + 2h), and the fp32 rsqrt (4 per norm);
    - autocast over fp32 weights also saves the bf16 cast of each Linear input: q, k, v, gate, up (5 x 2h);
    - SwiGLU MLP: gate, silu(gate), up, and their product (4 x 2I);
    - attention, flash/SDPA: rotated q and the output (2 x 2q), k and v (2 x 2kv), fp32 log-sum-exp (4 per head);
      eager: q, repeated k and v and the output (4 x 2q) plus the fp32 softmax and its bf16 copy (6 x heads x s).
    """
    norms = 2 * (4 * h + 4 * h + 4) + 5 * 2 * h if residual_fp32 else 2 * (4 * h + 2 * h + 2 * h + 4)
    mlp = 4 * 2 * inter
    if attention == "eager":
        attn = 4 * 2 * q + 6 * heads * s
    else:
        attn = 2 * 2 * q + 2 * 2 * kv + 4 * heads
    return norms + attn + mlp


def llama_head_bytes_per_token(h: int, residual_fp32: bool) -> int:
    """The final RMSNorm (as above) and, under autocast, the bf16 cast of the lm_head input."""
    return 10 * h + 4 if residual_fp32 else 8 * h + 4


# Logits and the loss, per token per vocabulary entry. transformers' ForCausalLMLoss upcasts the bf16 logits
# (2 B, kept by the model output) to fp32 (4 B) and log-softmax keeps its fp32 result (4 B): 10 B at the end of
# the forward. In backward the loss gradient (4 B) and the log-softmax input gradient (4 B) join the saved
# result and the bf16 logits while the fp32 copy is gone: 14 B.
LOGITS_FORWARD_BYTES = 10
LOGITS_BACKWARD_BYTES = 14
