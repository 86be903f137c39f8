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
PEFT_LORA = "https://github.com/huggingface/peft/blob/main/src/peft/tuners/lora/layer.py"
TORCH_DROPOUT = "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/Dropout.cpp"
QLORA_PAPER = "https://arxiv.org/abs/2305.14314"
BNB_4BIT = "https://huggingface.co/docs/bitsandbytes/main/reference/nn/linear4bit"

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


# Logits and the loss, per token per vocabulary entry (HF_LOSS). ForCausalLMLoss upcasts the bf16 logits (2 B) to
# fp32 (4 B) and log_softmax saves its fp32 result (4 B): 10 B while the loss runs, at the end of the forward.
# HF Trainer's compute_loss returns only the loss, so the model output and its bf16 logits are gone before
# backward, and the fp32 copy too (log_softmax saves its output, not its input). In backward nll_loss's input
# gradient (4 B) and log_softmax's input gradient (4 B) join the saved result: 12 B. A loop that keeps the model
# output across backward (out = model(...); out.loss.backward()) holds the bf16 logits too: 14 B.
# Measured: live bytes counted by torch's memory profiler over ForCausalLMLoss forward + backward on the CPU
# (tests/test_plan_lora.py), and the H200 peaks of tests/fixtures/h200-plan-lora-2026-11-30.json, where 14 B
# came out 2 B x tokens x vocab above every peak at the start of backward.
LOGITS_FORWARD_BYTES = 10
LOGITS_BACKWARD_BYTES = 12
LOGITS_KEPT_OUTPUT_BYTES = 2  # the bf16 logits, when the caller still holds the model output in backward


# --- LoRA (peft) over a frozen bf16 base ------------------------------------------------------------------

# Each LlamaDecoderLayer Linear peft can wrap, and which input it reads: "attn" (the input RMSNorm's output),
# "mlp" (the post-attention RMSNorm's output), "o" (the attention output, q wide) or "down" (I wide).
LORA_MODULES = {"q_proj": "attn", "k_proj": "attn", "v_proj": "attn", "o_proj": "o",
                "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "down"}
# --lora-target: peft's target_modules="all-linear" (every Linear but lm_head), and the q/v pair that peft
# picks for LLaMA when target_modules is left out (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
LORA_TARGETS = {"all-linear": tuple(LORA_MODULES), "qv": ("q_proj", "v_proj")}
# A dropout mask saved for backward: the fused CUDA/HIP kernel (at::native_dropout) keeps a bool mask, 1 B per
# element; the CPU path (at::_dropout_impl) keeps a noise tensor in the input's dtype (the CPU tests pass None).
DROPOUT_MASK_BYTES_GPU = 1


def lora_in_out(h: int, q: int, kv: int, inter: int) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of each Linear a LoRA adapter can wrap."""
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, inter), "up_proj": (h, inter), "down_proj": (inter, h)}


def lora_layer_bytes_per_token(h: int, q: int, kv: int, inter: int, heads: int, s: int, rank: int,
                               targets: tuple[str, ...], adapter_fp32: bool, autocast: bool, dropout: bool,
                               attention: str = "sdpa", first_layer: bool = False,
                               mask_bytes: int | None = DROPOUT_MASK_BYTES_GPU) -> int:
    """Bytes autograd keeps per token in one LlamaDecoderLayer whose bf16 base weights are frozen and whose
    Linear modules in `targets` carry a peft LoRA adapter (a count of the saved tensors; tests check it against
    real peft on a real LlamaForCausalLM on the CPU).

    Frozen base Linears save nothing (no weight gradient, so no input). What is saved:
    - two RMSNorms: the fp32 input (4h) and the fp32 rsqrt (4); their bf16 outputs only feed frozen weights;
    - attention: as llama_layer_bytes_per_token (flash/SDPA: 4q + 4kv + 4 per head);
    - SwiGLU MLP: gate, silu(gate) and up (3 x 2I); the product feeds the frozen down_proj;
    - per adapter, the input lora_A saves for its weight gradient. peft casts x to the adapter's dtype
      (_cast_input_dtype): fp32 adapters (peft's default, autocast_adapter_dtype=True) get their own fp32 copy
      of x, 4 B per input feature, or, under bf16 autocast, autocast's bf16 cast of that copy, 2 B. bf16
      adapters read the bf16 input itself, one storage shared by the adapters on the same input (q, k, v read
      the same normalised x; o_proj's input is the attention output SDPA already saved);
    - per adapter, lora_A's output (r wide) that lora_B saves: 4 B fp32, 2 B under autocast or bf16;
    - with lora_dropout > 0, each adapter's own dropout mask (mask_bytes per input feature; None: the size of
      the dropped tensor's dtype, as on the CPU), and lora_A then saves the dropout output (a new tensor per
      adapter even for bf16 adapters).
    first_layer: layer 0 without enable_input_require_grads, whose input does not require grad: its input
    norm saves nothing and its q/k/v dropouts keep no mask."""
    sizes = lora_in_out(h, q, kv, inter)
    norms = 2 * (4 * h + 4) - ((4 * h + 4) if first_layer else 0)
    if attention == "eager":
        attn = 4 * 2 * q + 6 * heads * s
    else:
        attn = 2 * 2 * q + 2 * 2 * kv + 4 * heads
    mlp = 3 * 2 * inter
    compute_bytes = 2 if (autocast or not adapter_fp32) else 4
    adapters = 0
    shared: set[str] = set()
    for name in targets:
        fan_in = sizes[name][0]
        group = LORA_MODULES[name]
        if dropout and not (first_layer and group == "attn"):
            adapters += (mask_bytes if mask_bytes is not None else (4 if adapter_fp32 else 2)) * fan_in
        if adapter_fp32 or dropout:
            adapters += compute_bytes * fan_in
        elif group in ("attn", "mlp") and group not in shared:
            shared.add(group)
            adapters += 2 * fan_in
        elif group == "down":
            adapters += 2 * fan_in
        adapters += compute_bytes * rank
    return norms + attn + mlp + adapters


def lora_head_bytes_per_token(h: int) -> int:
    """The final RMSNorm over a frozen head: the fp32 input and rsqrt (its output feeds the frozen lm_head)."""
    return 4 * h + 4


# --- QLoRA: the frozen base's Linear weights in bitsandbytes 4-bit (NF4/FP4) ----------------------------
# QLoRA paper, section 3 and "Double Quantization": 4-bit weights in blocks of 64, one absmax per block. Without
# double quantization the absmax is fp32 (32/64 = 0.5 bit per weight); with it, the absmax is quantized to 8 bit
# in blocks of 256 with one fp32 second-level constant (8/64 + 32/(64*256) = 0.127 bit per weight).
QLORA_BLOCK = 64
QLORA_BLOCK2 = 256


def qlora_bytes_per_weight(double_quant: bool = True) -> float:
    if double_quant:
        return 0.5 + 1 / QLORA_BLOCK + 4 / (QLORA_BLOCK * QLORA_BLOCK2)
    return 0.5 + 4 / QLORA_BLOCK
