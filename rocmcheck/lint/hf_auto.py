"""What the Hugging Face Trainer puts in place of "auto" in a DeepSpeed config.

Mirrors transformers.integrations.deepspeed.HfTrainerDeepSpeedConfig.trainer_config_process
(transformers 5.24): "auto" is replaced by the TrainingArguments value; a value that is not "auto"
but differs from TrainingArguments is a mismatch, which the Trainer raises as ValueError in
trainer_config_finalize. Only keys that are present are filled; missing keys stay missing.
tests/test_lint_hf_auto.py checks this mirror against the real class.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

# Every key the HF Trainer (HfTrainerDeepSpeedConfig.trainer_config_process/_finalize) or accelerate
# (DeepSpeedPlugin.fill_match keys, Accelerator._prepare_deepspeed's config_kwargs) fills in place of
# "auto". accelerate then walks the whole config and stops at any other "auto".
HF_FILLED_AUTO = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping",
    "fp16.enabled", "bf16.enabled",
    "optimizer.params.lr", "optimizer.params.betas", "optimizer.params.eps", "optimizer.params.weight_decay",
    "scheduler.params.warmup_min_lr", "scheduler.params.warmup_max_lr", "scheduler.params.warmup_num_steps",
    "scheduler.params.total_num_steps",
    "zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save",
    "zero_optimization.stage", "zero_optimization.offload_optimizer.device", "zero_optimization.offload_param.device",
    "zero_optimization.offload_optimizer.nvme_path", "zero_optimization.offload_param.nvme_path",
})

@dataclass
class TrainingSettings:
    """The TrainingArguments fields the HF integration reads (defaults = TrainingArguments')."""

    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    world_size: int | None = None  # unknown: train_batch_size is then left as written
    max_grad_norm: float = 1.0
    learning_rate: float = 5e-5
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    weight_decay: float = 0.0
    fp16: bool = False
    bf16: bool = False
    warmup_steps: float = 0  # >= 1: steps; below 1: a fraction of steps unknown before training (transformers 5)
    # The TrainingArguments fields actually known: None for a whole training file (the rest are its defaults); a set
    # for values given on lint's command line (--micro-batch, --grad-accum), where nothing else is known.
    given: frozenset[str] | None = None
    source: str = "the training arguments"  # where the values come from, for the messages

    @classmethod
    def from_args(cls, args: dict[str, Any], world_size: int | None) -> "TrainingSettings":
        known = {k: args[k] for k in cls.__dataclass_fields__ if k in args and args[k] is not None}
        settings = cls(**known)
        settings.fp16 = bool(args.get("fp16") or args.get("fp16_full_eval"))
        settings.bf16 = bool(args.get("bf16") or args.get("bf16_full_eval"))
        settings.world_size = world_size
        return settings

    @classmethod
    def from_command_line(cls, micro_batch: int | None, grad_accum: int | None,
                          world_size: int | None) -> "TrainingSettings | None":
        """--micro-batch / --grad-accum: only those are compared (None when neither was given)."""
        given = {name for name, value in (("per_device_train_batch_size", micro_batch),
                                          ("gradient_accumulation_steps", grad_accum)) if value is not None}
        if not given:
            return None
        settings = cls(world_size=world_size, given=frozenset(given), source="lint's command line")
        if micro_batch is not None:
            settings.per_device_train_batch_size = micro_batch
        if grad_accum is not None:
            settings.gradient_accumulation_steps = grad_accum
        return settings

    def _known(self, *names: str) -> bool:
        return self.given is None or all(n in self.given for n in names)

    def fills(self) -> list[tuple[str, Any, str, bool]]:
        """(ds key path, value, TrainingArguments name, must_match) in HF's order."""
        if self.given is not None:  # values from the command line: only those
            fills = [("train_micro_batch_size_per_gpu", self.per_device_train_batch_size,
                      "per_device_train_batch_size", True)] if self._known("per_device_train_batch_size") else []
            if self._known("gradient_accumulation_steps"):
                fills.append(("gradient_accumulation_steps", self.gradient_accumulation_steps,
                              "gradient_accumulation_steps", True))
            if self.world_size and self._known("per_device_train_batch_size", "gradient_accumulation_steps"):
                fills.append(("train_batch_size", self.world_size * self.per_device_train_batch_size
                              * self.gradient_accumulation_steps, "train_batch_size (calculated)", True))
            return fills
        fills = [
            ("train_micro_batch_size_per_gpu", self.per_device_train_batch_size, "per_device_train_batch_size", True),
            ("gradient_accumulation_steps", self.gradient_accumulation_steps, "gradient_accumulation_steps", True),
        ]
        if self.world_size:
            train_batch = self.world_size * self.per_device_train_batch_size * self.gradient_accumulation_steps
            fills.append(("train_batch_size", train_batch, "train_batch_size (calculated)", True))
        if isinstance(self.warmup_steps, (int, float)) and not isinstance(self.warmup_steps, bool) \
                and self.warmup_steps >= 1:  # trainer_config_finalize: max(1, args.get_warmup_steps(num_steps))
            fills.append(("scheduler.params.warmup_num_steps", int(self.warmup_steps), "warmup_steps", True))
        return fills + [
            ("gradient_clipping", self.max_grad_norm, "max_grad_norm", True),
            ("optimizer.params.lr", self.learning_rate, "learning_rate", True),
            ("optimizer.params.betas", [self.adam_beta1, self.adam_beta2], "adam_beta1+adam_beta2", True),
            ("optimizer.params.eps", self.adam_epsilon, "adam_epsilon", True),
            ("optimizer.params.weight_decay", self.weight_decay, "weight_decay", True),
            ("scheduler.params.warmup_min_lr", 0, "", False),
            ("scheduler.params.warmup_max_lr", self.learning_rate, "learning_rate", True),
            ("fp16.enabled", self.fp16, "fp16|fp16_full_eval", True),
            ("bf16.enabled", self.bf16, "bf16|bf16_full_eval", True),
        ]


def _node(config: dict, key_path: str) -> tuple[dict | None, str]:
    *parents, leaf = key_path.split(".")
    node: Any = config
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None, leaf
    return (node if isinstance(node, dict) else None), leaf


@dataclass
class Resolution:
    config: dict  # a copy with "auto" replaced where the Trainer would replace it
    filled: dict[str, Any]  # key path -> value put in place of "auto"
    mismatches: list[tuple[str, Any, str, Any]]  # (ds key path, ds value, hf name, hf value)


def resolve_auto(config: dict, settings: TrainingSettings) -> Resolution:
    resolved = copy.deepcopy(config)
    filled: dict[str, Any] = {}
    mismatches: list[tuple[str, Any, str, Any]] = []
    for key_path, hf_value, hf_name, must_match in settings.fills():
        node, leaf = _node(resolved, key_path)
        if node is None:
            continue
        if node.get(leaf) == "auto":
            node[leaf] = hf_value
            filled[key_path] = hf_value
        elif must_match and node.get(leaf) is not None and node.get(leaf) != hf_value:
            mismatches.append((key_path, node.get(leaf), hf_name, hf_value))
    return Resolution(resolved, filled, mismatches)


def resolve_batch_only(config: dict, micro_batch: int | None, grad_accum: int | None,
                       world_size: int | None) -> Resolution:
    """For a bare DeepSpeed config linted with --micro-batch/--grad-accum: fill only what was given."""
    resolved = copy.deepcopy(config)
    filled: dict[str, Any] = {}
    values = {"train_micro_batch_size_per_gpu": micro_batch, "gradient_accumulation_steps": grad_accum}
    if micro_batch and grad_accum and world_size:
        values["train_batch_size"] = micro_batch * grad_accum * world_size
    for key, value in values.items():
        if value is not None and resolved.get(key) == "auto":
            resolved[key] = value
            filled[key] = value
    return Resolution(resolved, filled, [])


def auto_paths(config: Any, prefix: str = "") -> list[str]:
    """Every key path whose value is still "auto"."""
    found: list[str] = []
    if isinstance(config, dict):
        for key, value in config.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if value == "auto":
                found.append(path)
            else:
                found.extend(auto_paths(value, path))
    return found
