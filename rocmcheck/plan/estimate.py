"""estimate_memory: the per-GPU memory of one training step, line by line, and its peak.

A step goes through four moments, and each line is live in some of them:
  forward_end     all stored activations, the loss's logits, autocast's bf16 weight copies;
  backward_start  the same, with the loss gradient at its largest;
  backward_end    every gradient but the embedding's, one layer's activations (recomputed or still stored);
  optimizer_step  weights + gradients + optimizer states (+ the foreach intermediate).
The peak is the largest moment. Optimizer states count everywhere: after the first step they never leave.
Validated against measured H200 peaks (tests/test_plan_estimate.py); the formulas are in formulas.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rocmcheck.plan import formulas as F
from rocmcheck.plan.shapes import ModelShape
from rocmcheck.units import GIB, fmt_bytes

PRECISIONS = ("amp-bf16", "pure-bf16")
ATTENTIONS = ("flash", "sdpa", "eager")
# The planner's attention names and transformers' attn_implementation for each: the one map between them.
ATTN_IMPLEMENTATION = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}
PLAN_ATTENTION = {impl: name for name, impl in ATTN_IMPLEMENTATION.items()}
OPTIMIZERS = ("fused", "foreach")
ADAPTER_DTYPES = ("fp32", "bf16")
LORA_TARGET_CHOICES = tuple(F.LORA_TARGETS)
PHASES = ("forward_end", "backward_start", "backward_end", "optimizer_step")
# CUDA/HIP context, kernel images and library handles: outside PyTorch's allocator, so outside the
# allocated peak, but it takes device memory. Rough [U]; benchmarks/bench_plan.py measures it.
CONTEXT_BYTES = 1 * GIB


@dataclass
class MemoryLine:
    name: str
    phases: dict[str, float]  # bytes live at each moment of the step
    formula: str
    source: str

    @property
    def largest(self) -> float:
        return max(self.phases.values(), default=0.0)


@dataclass
class MemoryEstimate:
    model: ModelShape
    settings: dict[str, Any]
    params: int
    trainable_params: int
    lines: list[MemoryLine]
    host_bytes: float = 0.0  # offloaded states, per GPU, in host memory
    context_bytes: int = CONTEXT_BYTES
    notes: list[str] = field(default_factory=list)

    def phase_totals(self) -> dict[str, float]:
        return {p: sum(line.phases.get(p, 0.0) for line in self.lines) for p in PHASES}

    @property
    def peak_phase(self) -> str:
        totals = self.phase_totals()
        return max(PHASES, key=lambda p: totals[p])

    @property
    def allocated_peak_bytes(self) -> float:
        """What torch.cuda.max_memory_allocated() would report."""
        return self.phase_totals()[self.peak_phase]

    @property
    def total_bytes(self) -> float:
        """The device memory the step needs: allocated peak + runtime context."""
        return self.allocated_peak_bytes + self.context_bytes

    def at_peak(self, line: MemoryLine) -> float:
        return line.phases.get(self.peak_phase, 0.0)

    def line(self, name: str) -> MemoryLine | None:
        return next((ln for ln in self.lines if ln.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": asdict(self.model),
            "settings": dict(self.settings),
            "params": self.params,
            "trainable_params": self.trainable_params,
            "peak_phase": self.peak_phase,
            "allocated_peak_bytes": int(self.allocated_peak_bytes),
            "context_bytes": self.context_bytes,
            "total_bytes": int(self.total_bytes),
            "host_bytes": int(self.host_bytes),
            "phase_totals": {k: int(v) for k, v in self.phase_totals().items()},
            "lines": [{"name": ln.name, "at_peak_bytes": int(self.at_peak(ln)), "largest_bytes": int(ln.largest),
                       "phases": {k: int(v) for k, v in ln.phases.items()}, "formula": ln.formula,
                       "source": ln.source} for ln in self.lines],
            "notes": list(self.notes),
        }


def _check_settings(micro_batch: int, seq_len: int, precision: str, zero_stage: int, world_size: int,
                    offload_optimizer: bool, offload_params: bool, attention: str, lora_rank: int | None,
                    grad_accumulation_steps: int, optimizer: str, lora_target: str = "all-linear",
                    lora_dropout: float = 0.0, adapter_dtype: str = "fp32", qlora: bool = False) -> None:
    def positive(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")

    positive("micro_batch", micro_batch)
    positive("seq_len", seq_len)
    positive("world_size", world_size)
    positive("grad_accumulation_steps", grad_accumulation_steps)
    if lora_rank is not None:
        positive("lora_rank", lora_rank)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if lora_target not in F.LORA_TARGETS:
        raise ValueError(f"lora_target must be one of {', '.join(F.LORA_TARGETS)}, got {lora_target!r}")
    if adapter_dtype not in ADAPTER_DTYPES:
        raise ValueError(f"adapter_dtype must be one of {', '.join(ADAPTER_DTYPES)}, got {adapter_dtype!r}")
    if isinstance(lora_dropout, bool) or not isinstance(lora_dropout, (int, float)) or not 0 <= lora_dropout < 1:
        raise ValueError(f"lora_dropout must be in [0, 1), got {lora_dropout!r}")
    if qlora and lora_rank is None:
        raise ValueError("qlora needs a lora_rank (QLoRA trains LoRA adapters over a 4-bit base)")
    if qlora and zero_stage == 3:
        raise ValueError("qlora with ZeRO-3 is not modeled (bitsandbytes 4-bit weights are not partitioned)")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    if offload_params and zero_stage != 3:
        raise ValueError("offloading parameters needs ZeRO stage 3")
    if offload_optimizer and zero_stage == 0:
        raise ValueError("offloading the optimizer needs DeepSpeed ZeRO (stage 1, 2 or 3)")


def _state_bytes_per_param(precision: str, deepspeed: bool) -> tuple[int, int, int, str]:
    """(weights, grads, optimizer states) bytes per trainable parameter, and what they are."""
    if precision == "pure-bf16":
        return 2, 2, 4, "bf16 weights, bf16 gradients, two bf16 Adam moments, no fp32 master copy"
    if deepspeed:
        return 2, 2, 12, "bf16 weights and gradients; fp32 master weights and two fp32 Adam moments (ZeRO's K = 12)"
    return 4, 4, 8, "fp32 weights and gradients, two fp32 Adam moments, bf16 compute under autocast"


def _all(value: float) -> dict[str, float]:
    return {p: value for p in PHASES}


def estimate_memory(model: ModelShape, *, micro_batch: int, seq_len: int, precision: str = "amp-bf16",
                    zero_stage: int = 0, world_size: int = 1, offload_optimizer: bool = False,
                    offload_params: bool = False, gradient_checkpointing: bool = False, attention: str = "sdpa",
                    lora_rank: int | None = None, grad_accumulation_steps: int = 1,
                    optimizer: str = "fused", lora_target: str = "all-linear", lora_dropout: float = 0.0,
                    adapter_dtype: str = "fp32", autocast: bool = True, qlora: bool = False) -> MemoryEstimate:
    """Per-GPU memory of a LLaMA fine-tuning step with AdamW. Raises ValueError on settings that cannot go together.

    precision: "amp-bf16" = fp32 weights under torch autocast (zero_stage 0) or DeepSpeed bf16 (zero_stage >= 1);
    "pure-bf16" = bf16 weights and moments, no master copy. attention "sdpa" assumes SDPA picks a flash or
    memory-efficient kernel (no s x s matrix); "eager" stores it. grad_accumulation_steps > 1 keeps the gradients
    through the forward. optimizer "fused" (DeepSpeed, HF Trainer's default with torch >= 2.8) or "foreach"
    (torch.optim.AdamW's default), which holds one more copy of the weights during the step.

    LoRA (lora_rank set) is peft over a frozen bf16 base: adapters on lora_target ("all-linear" or "qv") in
    adapter_dtype ("fp32": peft's default autocast_adapter_dtype=True; "bf16"), lora_dropout, and the step
    under bf16 autocast (autocast=True: HF Trainer with bf16=True) or not. precision "pure-bf16" with LoRA means
    bf16 adapters without autocast. qlora: the base's layer Linears in bitsandbytes 4-bit (NF4, double
    quantization), modeled from the format, not measured. autocast only matters for LoRA."""
    _check_settings(micro_batch, seq_len, precision, zero_stage, world_size, offload_optimizer, offload_params,
                    attention, lora_rank, grad_accumulation_steps, optimizer, lora_target, lora_dropout,
                    adapter_dtype, qlora)
    m = model
    params = m.param_count()
    deepspeed = zero_stage >= 1
    lora = lora_rank is not None
    if lora and precision == "pure-bf16":
        adapter_dtype, autocast = "bf16", False
    targets = F.LORA_TARGETS[lora_target]
    trainable = m.lora_params(lora_rank, targets) if lora else params
    # fp32 residual stream: fp32 weights under autocast. A LoRA base or a DeepSpeed bf16 model computes in bf16.
    residual_fp32 = precision == "amp-bf16" and not deepspeed and not lora
    w_b, g_b, k_b, what = _state_bytes_per_param(precision, deepspeed)
    if lora and not deepspeed:
        w_b, g_b, k_b = (4, 4, 8) if adapter_dtype == "fp32" else (2, 2, 4)
        what = (f"frozen {'4-bit' if qlora else 'bf16'} base; {adapter_dtype} adapters, their gradients and two "
                f"AdamW moments in the adapters' dtype ({w_b + g_b + k_b} B per adapter param)")
    n, tokens, h, L, V = world_size, micro_batch * seq_len, m.hidden_size, m.num_hidden_layers, m.vocab_size
    ckpt = gradient_checkpointing
    lines: list[MemoryLine] = []
    notes: list[str] = []
    host = 0.0
    if m.is_moe:
        notes.append(f"mixture of experts: weights, gradients and optimizer states count all {m.num_experts} experts "
                     f"of {m.moe_layers} layers; activations the {m.experts_per_token} a token runs through"
                     + (" and the shared expert" if m.shared_intermediate_size else "")
                     + f" (an MLP {m.active_intermediate_size} wide)")

    # Model states (ZeRO paper): weights, gradients, optimizer states, partitioned by stage over N GPUs.
    if qlora:
        quantized = m.quantizable_linear_params()
        q_bytes = F.qlora_bytes_per_weight(double_quant=True)
        frozen = q_bytes * quantized + 2.0 * (params - quantized)
    else:
        frozen = 2.0 * params if lora else 0.0
    weights = frozen + w_b * trainable
    grads = float(g_b * trainable)
    opt = float(k_b * trainable)
    split = {1: ("optimizer states",), 2: ("optimizer states", "gradients"),
             3: ("optimizer states", "gradients", "weights")}.get(zero_stage, ())
    div = f" / {n} GPUs (ZeRO-{zero_stage})"
    opt_div = div if "optimizer states" in split else ""
    grad_div = div if "gradients" in split else ""
    w_div = div if "weights" in split else ""
    opt /= n if opt_div else 1
    grads /= n if grad_div else 1
    weights /= n if w_div else 1
    if qlora:
        weights_formula = (f"{q_bytes:.4f} B x {quantized:,} 4-bit layer weights (NF4 in blocks of {F.QLORA_BLOCK}, "
                           f"double-quantized absmax) + 2 B x {params - quantized:,} bf16 embedding, head and norms "
                           f"+ {w_b} B x {trainable:,} LoRA params")
    elif lora:
        weights_formula = f"2 B x {params:,} frozen params + {w_b} B x {trainable:,} LoRA params"
    else:
        weights_formula = f"{w_b} B x {params:,} params"
    if offload_params:
        host += weights
        lines.append(MemoryLine("weights", _all(0.0), f"({weights_formula}){w_div}: offloaded to host memory",
                                F.ZERO_PAPER))
    else:
        lines.append(MemoryLine("weights", _all(weights), f"{weights_formula}{w_div}",
                                F.ZERO_PAPER + (f"; {F.QLORA_PAPER}; {F.BNB_4BIT}" if qlora else "")))

    embed_share = 0.0 if lora else m.embedding_params() / params  # the embedding's gradient is the last to appear
    keep_grads = grad_accumulation_steps > 1
    lines.append(MemoryLine(
        "gradients",
        {"forward_end": grads if keep_grads else 0.0, "backward_start": grads if keep_grads else 0.0,
         "backward_end": grads if keep_grads else grads * (1 - embed_share), "optimizer_step": grads},
        f"{g_b} B x {trainable:,} trainable params{grad_div}"
        + ("; kept through the forward by gradient accumulation" if keep_grads else "; freed after each step"),
        F.ZERO_PAPER))
    if offload_optimizer:
        host += opt
        lines.append(MemoryLine("optimizer states", _all(0.0),
                                f"{k_b} B x {trainable:,}{opt_div}: offloaded to host memory (DeepSpeed CPU Adam)",
                                F.ZERO_PAPER))
    else:
        lines.append(MemoryLine("optimizer states", _all(opt), f"{k_b} B x {trainable:,} trainable params{opt_div}",
                                F.ZERO_PAPER))
    if optimizer == "foreach" and not deepspeed:
        tmp = w_b * trainable
        lines.append(MemoryLine("optimizer step intermediate", {"optimizer_step": float(tmp)},
                                f"{w_b} B x {trainable:,}: foreach AdamW's sqrt(v) for all params at once",
                                F.TORCH_OPTIM))
    if zero_stage == 0 and n > 1:
        lines.append(MemoryLine("DDP gradient buckets", _all(grads), f"a copy of the gradients ({fmt_bytes(grads)}) "
                                "unless gradient_as_bucket_view=True", F.TORCH_DDP))
    if deepspeed:
        reduce = 2.0 * min(F.DS_REDUCE_BUCKET, trainable)
        if zero_stage == 3:
            unit = max(m.layer_params(), m.embedding_params())
            gathered = 2.0 * min(params, 2 * unit + F.DS_PREFETCH_BUCKET)
            lines.append(MemoryLine("ZeRO buffers", _all(reduce + gathered),
                                    f"reduce bucket 2 B x min(5e8, P) + gathered bf16 params of the running and the "
                                    f"prefetched layer 2 B x (2 x {unit:,} + 5e7)", F.DS_ZERO_CONFIG))
            notes.append("ZeRO-3's gathered-parameter memory depends on stage3_max_live_parameters and prefetching; "
                         "the estimate assumes two layers live")
        else:
            gather = 2.0 * min(F.DS_ALLGATHER_BUCKET, trainable)
            lines.append(MemoryLine("ZeRO buffers", _all(reduce + gather),
                                    "reduce bucket 2 B x min(5e8, P) + all-gather bucket 2 B x min(5e8, P)",
                                    F.DS_ZERO_CONFIG))

    # Autocast keeps a bf16 copy of every Linear weight from the forward until each layer's backward.
    if residual_fp32:
        full, head = 2.0 * m.linear_params(), 2.0 * V * h
        layer = 2.0 * m.layer_linear_params()
        lines.append(MemoryLine(
            "autocast bf16 weight copies",
            {"forward_end": full, "backward_start": head if ckpt else full, "backward_end": layer},
            f"2 B x {m.linear_params():,} Linear params (cached by autocast, saved for backward)", F.TORCH_AMP))

    # Activations: what autograd saves per token, per layer (see formulas.llama_layer_bytes_per_token).
    if lora:
        lora_lines = _lora_activation_lines(m, tokens, seq_len, lora_rank, targets, adapter_dtype == "fp32",
                                            autocast, lora_dropout > 0, attention, ckpt, qlora)
        lines.extend(lora_lines)
        if not autocast and adapter_dtype == "fp32":
            notes.append("without autocast each fp32 adapter saves a 4 B copy of its input (under bf16 autocast, "
                         "a 2 B one): HF Trainer with bf16=True runs under autocast")
        if qlora:
            notes.append("QLoRA is modeled from bitsandbytes' storage format (4-bit NF4, blocksize 64, double "
                         "quantization) and not measured; peft's prepare_model_for_kbit_training casts the embedding, "
                         f"head and norms to fp32, adding {fmt_bytes(2.0 * (params - m.quantizable_linear_params()))}")
    else:
        per_layer = F.llama_layer_bytes_per_token(h, m.q_dim, m.kv_dim, m.active_intermediate_size,
                                                  m.num_attention_heads, seq_len, residual_fp32, attention)
        stored = (4 if residual_fp32 else 2) * h if ckpt else per_layer
        head_tok = F.llama_head_bytes_per_token(h, residual_fp32)
        act = float(L * stored * tokens + head_tok * tokens)
        if ckpt:
            act_formula = (f"{L} layers x {stored} B/token (the {'fp32' if residual_fp32 else 'bf16'} layer "
                           f"input) x {tokens:,} tokens + head; one layer of {per_layer:,} B/token is recomputed "
                           "in backward")
        else:
            act_formula = f"{L} layers x {per_layer:,} B/token x {tokens:,} tokens + head {head_tok:,} B/token"
        source = f"{F.HF_LLAMA} (saved-tensor count, as {F.KORTHIKANTI})" + (
            "" if attention == "eager" else f"; no s x s term: {F.FLASH_ATTENTION}")
        lines.append(MemoryLine("activations", {"forward_end": act, "backward_start": act,
                                                "backward_end": float(per_layer * tokens)}, act_formula, source))
    lines.append(MemoryLine(
        "logits and loss",
        {"forward_end": float(F.LOGITS_FORWARD_BYTES * tokens * V),
         "backward_start": float(F.LOGITS_BACKWARD_BYTES * tokens * V)},
        f"{F.LOGITS_BACKWARD_BYTES} B x {tokens:,} tokens x {V:,} vocab in backward (the fp32 log-softmax and two "
        f"fp32 gradients; {F.LOGITS_FORWARD_BYTES} B in the forward with the bf16 logits and their fp32 copy)",
        F.HF_LOSS))

    if attention == "sdpa":
        notes.append("sdpa is assumed to run a flash or memory-efficient kernel; if it falls back to the math "
                     "kernel (an arch without AOTriton support) memory grows with s^2 as with --attn eager")
    if precision == "pure-bf16":
        notes.append("pure bf16 has no fp32 master weights: small updates can round away (use Kahan summation "
                     "or stochastic rounding)")
    if m.max_position_embeddings and seq_len > m.max_position_embeddings:
        notes.append(f"seq_len {seq_len} is above the model's max_position_embeddings {m.max_position_embeddings}")
    settings = {"micro_batch": micro_batch, "seq_len": seq_len, "precision": precision, "zero_stage": zero_stage,
                "world_size": world_size, "offload_optimizer": offload_optimizer, "offload_params": offload_params,
                "gradient_checkpointing": gradient_checkpointing, "attention": attention, "lora_rank": lora_rank,
                "grad_accumulation_steps": grad_accumulation_steps, "optimizer": optimizer,
                "lora_target": lora_target, "lora_dropout": lora_dropout, "adapter_dtype": adapter_dtype,
                "autocast": autocast, "qlora": qlora}
    return MemoryEstimate(model=m, settings=settings, params=params, trainable_params=trainable, lines=lines,
                          host_bytes=host, notes=notes + [f"model states: {what}"])


def _lora_activation_lines(m: ModelShape, tokens: int, seq_len: int, rank: int, targets: tuple[str, ...],
                           adapter_fp32: bool, autocast: bool, dropout: bool, attention: str, ckpt: bool,
                           qlora: bool) -> list[MemoryLine]:
    """The base model's activations and the adapters' own, as two lines (formulas.lora_layer_bytes_per_token).
    With checkpointing, HF's gradient_checkpointing_enable also calls enable_input_require_grads, so every
    layer, the first included, saves the same; without it the first layer's input does not require grad."""
    h, L = m.hidden_size, m.num_hidden_layers
    args = (h, m.q_dim, m.kv_dim, m.active_intermediate_size, m.num_attention_heads, seq_len)
    # QLoRA under autocast: peft's 4-bit LoRA layer skips the cast (no fp32 copy), so its adapters read the
    # bf16 input as bf16 adapters do; bitsandbytes' MatMul4Bit keeps each quantized Linear's input (ctx.tensors).
    share = adapter_fp32 and not (qlora and autocast)
    base = F.lora_layer_bytes_per_token(*args, rank, (), share, autocast, False, attention)
    full = F.lora_layer_bytes_per_token(*args, rank, targets, share, autocast, dropout, attention)
    first = F.lora_layer_bytes_per_token(*args, rank, targets, share, autocast, dropout, attention,
                                         first_layer=not ckpt)
    base_first = F.lora_layer_bytes_per_token(*args, rank, (), share, autocast, False, attention,
                                              first_layer=not ckpt)
    bnb = 0
    if qlora:  # bf16 inputs of the 4-bit Linears (attn norm, MLP norm, down_proj's; o_proj's is SDPA's output)
        inputs = {"attn": 2 * h, "mlp": 2 * h, "down": 2 * m.active_intermediate_size}
        if not share and not dropout:  # an adapter on the same input already holds that storage
            for name in targets:
                inputs.pop(F.LORA_MODULES[name], None)
        bnb = sum(inputs.values())
    adapter_layer, adapter_first = full - base + bnb, first - base_first + bnb
    head = F.lora_head_bytes_per_token(h)
    if ckpt:
        stored = 2 * h  # each layer's bf16 input, kept by the checkpoint
        base_fwd = float((L * stored + head) * tokens)
        adapters_fwd = 0.0
        # first layer of backward: its recomputed activations on top of all the stored inputs
        base_bwd, adapters_bwd = base_fwd + base * tokens, float(adapter_layer * tokens)
        base_formula = (f"{L} layers x {stored} B/token (the bf16 layer input) x {tokens:,} tokens + head "
                        f"{head} B/token; backward recomputes one layer: {base:,} B/token")
        adapter_formula = f"one recomputed layer's adapters: {adapter_layer:,} B/token x {tokens:,} tokens"
    else:
        base_fwd = float(((L - 1) * base + base_first + head) * tokens)
        adapters_fwd = float(((L - 1) * adapter_layer + adapter_first) * tokens)
        base_bwd, adapters_bwd = float(base * tokens), float(adapter_layer * tokens)
        base_formula = (f"{L} layers x {base:,} B/token (frozen bf16 layers: fp32 norm inputs, attention, "
                        f"SwiGLU) x {tokens:,} tokens + head {head} B/token")
        what = ("fp32 copy" if not autocast else "bf16 autocast copy") if share else "bf16 input"
        adapter_formula = (f"{L} layers x {adapter_layer:,} B/token x {tokens:,} tokens: each adapter's input "
                           f"({what}) and its rank-{rank} output" + (", dropout masks" if dropout else "")
                           + (", the 4-bit Linears' bf16 inputs" if qlora else ""))
    return [
        MemoryLine("activations", {"forward_end": base_fwd, "backward_start": base_fwd, "backward_end": base_bwd},
                   base_formula, f"{F.HF_LLAMA} (saved-tensor count)" + (
                       "" if attention == "eager" else f"; no s x s term: {F.FLASH_ATTENTION}")),
        MemoryLine("LoRA adapter activations", {"forward_end": adapters_fwd, "backward_start": adapters_fwd,
                                                "backward_end": adapters_bwd}, adapter_formula,
                   f"{F.PEFT_LORA} (Linear.forward, _cast_input_dtype)"
                   + (f"; {F.TORCH_DROPOUT}" if dropout else "") + (f"; {F.BNB_4BIT}" if qlora else "")),
    ]


def largest_micro_batch(model: ModelShape, *, gpu_memory_bytes: float, target_fraction: float = 0.9,
                        max_micro_batch: int = 65536, **settings: Any) -> int:
    """The largest micro-batch whose estimated total stays within target_fraction of gpu_memory_bytes; 0 when
    not even 1 does. Memory grows with the micro-batch, so a bisection finds it."""
    settings.pop("micro_batch", None)
    if not 0 < target_fraction <= 1:
        raise ValueError(f"target_fraction must be in (0, 1], got {target_fraction!r}")
    budget = target_fraction * gpu_memory_bytes

    def fits(b: int) -> bool:
        return estimate_memory(model, micro_batch=b, **settings).total_bytes <= budget

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= max_micro_batch and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, max_micro_batch + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
