"""The model side of a smoke-train: load a local checkpoint, prepare it for training, its optimizer, what a
step costs in FLOPs, and the held-out accuracy. One place for each, used by the run, both strategies and
the bench. Imports torch."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch

from rocmcheck.train import data as data_mod
from rocmcheck.train import task
from rocmcheck.train.config import ADAM_BETAS, ADAM_EPS, TrainConfig
from rocmcheck.train.device import fused_adamw_ok


def offline_and_quiet() -> None:
    """Never reach the network (the model is local, and a hub lookup on a machine without egress hangs), and
    keep transformers' progress bars and info logs out of the report. Before transformers is imported."""
    for name, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                        ("TRANSFORMERS_VERBOSITY", "error"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(name, value)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


# What loading any causal-LM model and its tokenizer imports, whatever the part of the run that first needs it:
# transformers' weight-loading machinery (the tokenizer's import already pulls it in: transformers 5's
# core_model_loading, with torch.distributed.tensor), its modeling base, and the attention-mask module every
# decoder model imports, which imports torch._dynamo at module level (transformers 5.x). torch's optimizers
# import torch._dynamo on first use too, so no run avoids it: measured, it is the same import either way.
MODEL_CLASS_MODULES = ("transformers.masking_utils", "transformers.modeling_utils", "torch._dynamo")


def import_model_classes() -> None:
    """Import MODEL_CLASS_MODULES now (one timed part of the run, instead of a share of several); a module this
    transformers does not have is left out. scikit-learn is kept out of these imports (sklearn_unseen)."""
    import importlib

    with sklearn_unseen():
        for name in MODEL_CLASS_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401 - the auto classes themselves


@contextmanager
def sklearn_unseen() -> Iterator[None]:
    """While the block runs, transformers sees no scikit-learn. Where it is installed, transformers 4.x to 5.17
    imports sklearn.metrics (and with it scipy) when any model class is imported, at the top of
    generation/candidate_generator.py, for the roc_curve of assisted decoding's confidence threshold, which a
    training step never calls: most of the model classes' import where scikit-learn is installed
    (benchmarks/RESULTS.md, section 18). transformers 5.24 imports it inside the function that
    uses it, and this changes nothing there. Only this process's view changes (the name that module binds at import);
    is_sklearn_available answers truly again after the block."""
    with _answering_no("transformers.utils", "is_sklearn_available"):
        yield


@contextmanager
def deepspeed_unseen() -> Iterator[None]:
    """While the block runs, accelerate's unwrapping sees no DeepSpeed, when this process has not imported it.
    save_pretrained unwraps the model through accelerate's extract_model_from_parallel, which imports deepspeed
    (where it is installed) only to test whether the model is a DeepSpeedEngine: nearly all of a small model's save
    (benchmarks/RESULTS.md, section 18). Without deepspeed imported
    no object can be a DeepSpeedEngine, so the answer, and the saved files, are the same. With deepspeed
    imported (a DeepSpeed run) nothing changes."""
    if "deepspeed" in sys.modules:
        yield
        return
    with _answering_no("accelerate.utils.other", "is_deepspeed_available"):
        yield


@contextmanager
def _answering_no(module: str, name: str) -> Iterator[None]:
    """module.name (an is_..._available function) answers False while the block runs, and is itself again after;
    nothing changes where the module or the name is not there."""
    import importlib

    try:
        found = importlib.import_module(module)
    except ImportError:
        yield
        return
    real = getattr(found, name, None)
    if real is None:
        yield
        return
    setattr(found, name, _unavailable)
    try:
        yield
    finally:
        setattr(found, name, real)


def _unavailable() -> bool:
    return False


def save_checkpoint(model, folder: Path, state_dict: dict | None = None) -> None:
    """The reload check's save: save_pretrained as Trainer calls it (safetensors; `state_dict` where the weights
    to write are not the model's own tensors), with accelerate seeing no DeepSpeed where the run never imported it
    (deepspeed_unseen)."""
    with deepspeed_unseen():
        model.save_pretrained(folder, state_dict=state_dict, safe_serialization=True)


def model_class(path: Path):
    """The class AutoModelForCausalLM builds for the folder's config.json, or None when it cannot tell (an
    unreadable config: loading the model then says what is wrong)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        return MODEL_FOR_CAUSAL_LM_MAPPING[type(AutoConfig.from_pretrained(path, local_files_only=True))]
    except Exception:  # noqa: BLE001 - whatever a damaged config makes transformers raise, the load says it
        return None


def attention_for(cfg: TrainConfig) -> tuple[str, str | None]:
    """The attn_implementation the run uses, and why it is not --attn (None when it is). --attn sdpa on a model
    transformers gives no SDPA path (Gemma 2: SDPA has no attention-logit soft-capping) runs eager, as
    transformers itself picks for it when no implementation is asked for."""
    if cfg.attn != "sdpa":
        return cfg.attn, None
    cls = model_class(Path(cfg.model))
    if cls is None or getattr(cls, "_supports_sdpa", True):
        return cfg.attn, None
    return "eager", f"{cls.__name__} has no SDPA attention in transformers (its _supports_sdpa is False): eager"


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def load_dtype(cfg: TrainConfig) -> torch.dtype:
    """The dtype the run's model is loaded in: bf16 with --pure-bf16, else fp32 (bf16 autocast over it)."""
    return torch.bfloat16 if cfg.pure_bf16 else torch.float32


def load_model(path: Path, cfg: TrainConfig, device: torch.device | None, dtype: torch.dtype | None = None):
    """The checkpoint as AutoModelForCausalLM, in `dtype` (default: load_dtype)."""
    from transformers import AutoModelForCausalLM

    if dtype is None:
        dtype = load_dtype(cfg)
    # Straight onto the GPU (a 7B in fp32 is 27 GB: no detour through host memory)
    where = {"device_map": str(device)} if device is not None and device.type == "cuda" else {}
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype, attn_implementation=cfg.attn,
                                                 **where)
    return model.to(device) if device is not None else model


def prepare_for_training(model, gradient_checkpointing: bool):
    """As the HF Trainer prepares a model: non-reentrant checkpointing when asked, no KV cache, train mode."""
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    return model.train()


def make_optimizer(params, cfg: TrainConfig, device: torch.device) -> tuple[torch.optim.Optimizer, bool]:
    """torch AdamW with the run's settings, fused where this device and dtype support it."""
    fused = fused_adamw_ok(device, cfg.pure_bf16)
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=cfg.weight_decay,
                                  fused=fused if fused else None)
    return optimizer, fused


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError covers CUDA and ROCm ("HIP out of memory"); older builds raised RuntimeError."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text
                                              or "DefaultCPUAllocator: not enough memory" in text)


def param_count(model) -> int:
    """Every parameter, also under ZeRO-3, where each rank holds a shard (ds_numel is the full size)."""
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())


def idle_expert_params(model) -> tuple[int, int]:
    """(trainable, frozen) parameters of the routed experts a token does not run through: of each experts module
    (moe.experts_modules), the share 1 - top_k / num_experts of its per-expert weights. (0, 0) for a dense model."""
    from rocmcheck.train.moe import experts_modules

    top_k = getattr(model.config, "num_experts_per_tok", None)
    idle = [0, 0]
    for _, module in experts_modules(model):
        if not isinstance(top_k, int) or not 0 < top_k < module.num_experts:
            continue
        share = 1 - top_k / module.num_experts
        for p in module.parameters(recurse=False):
            if p.shape and p.shape[0] == module.num_experts:
                idle[0 if p.requires_grad else 1] += int(getattr(p, "ds_numel", p.numel()) * share)
    return idle[0], idle[1]


def flops_per_token(model, seq_len: int) -> float:
    """nanoGPT's estimate: 6N for the matmuls forward+backward plus 12*L*H*T for attention. A frozen weight
    (a LoRA base) costs 4 (forward, and the gradient of its input), not 6: no gradient of its own. A
    mixture of experts counts the experts a token runs through, not the idle ones (idle_expert_params)."""
    c = model.config
    trainable = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
    frozen = param_count(model) - trainable
    idle_trainable, idle_frozen = idle_expert_params(model)
    return (6 * (trainable - idle_trainable) + 4 * (frozen - idle_frozen)
            + 12 * c.num_hidden_layers * c.hidden_size * seq_len)


def recompute_flops_per_token(model, seq_len: int) -> float:
    """What gradient checkpointing adds: one more forward, 2N + 4*L*H*T."""
    c = model.config
    return 2 * (param_count(model) - sum(idle_expert_params(model))) + 4 * c.num_hidden_layers * c.hidden_size * seq_len


def lora_target_modules(model) -> list[str]:
    """The model's own Linear layers LoRA adapts (families.lora_targets): every Linear inside its decoder layers but
    the routers, never lm_head or the embedding."""
    from rocmcheck.train import families

    linears = [families.Linear(name, m.in_features, m.out_features) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear)]
    return families.lora_targets(linears, families.num_experts(model.config.to_dict()))


def add_lora(model, rank: int):
    """LoRA adapters of `rank` on the model's own decoder Linears (lora_target_modules), alpha = 2 x rank, no
    dropout; the adapters in fp32 (peft's default), the rest frozen."""
    import peft

    targets = lora_target_modules(model)
    if not targets:
        raise ValueError(f"{type(model).__name__} has no Linear layer inside its decoder layers for LoRA to adapt")
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=targets,
                             task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


@torch.no_grad()
def accuracy(model, tokenizer, examples: list[task.Example], device: torch.device, batch: int = 64) -> float:
    """Exact match of greedy generation on held-out prompts."""
    was_training = model.training
    model.eval()
    _, eos, pad = data_mod.special_ids(tokenizer)
    max_new = max(len(tokenizer.encode(e.response, add_special_tokens=False)) for e in examples) + 1
    correct = 0
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        ids, mask = data_mod.left_padded_prompts(tokenizer, chunk)
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new,
                             do_sample=False, pad_token_id=pad, eos_token_id=eos, use_cache=True)
        texts = tokenizer.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)
        correct += sum(task.exact_match(t, e) for t, e in zip(texts, chunk))
    model.train(was_training)
    return correct / len(examples)
