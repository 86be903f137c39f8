"""The DeepSpeed config of `smoke-train --deepspeed`: lint it, then fill "auto" as the HF Trainer would.

No torch here: the CLI refuses a bad config before paying for torch, DeepSpeed or a launcher.

The fill mirrors transformers.integrations.deepspeed.HfTrainerDeepSpeedConfig: trainer_config_process
(batch, clipping, optimizer and bf16/fp16 values from the TrainingArguments, rocmcheck.lint.hf_auto) and
trainer_config_finalize (the hidden-size keys and the scheduler's step counts, filled once the model is
known). tests/test_train_ds_config.py checks the result against the real class.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmcheck.errors import BadInput
from rocmcheck.train.config import ADAM_BETAS, ADAM_EPS, TrainConfig

OFFLOAD_KEYS = ("offload_optimizer", "offload_param")


@dataclass
class DeepSpeedPlan:
    """A DeepSpeed config ready for deepspeed.initialize, and what the run needs to know about it."""

    path: str
    config: dict[str, Any]  # "auto" filled as the HF Trainer fills it
    stage: int
    offload: dict[str, str]  # {"offload_optimizer": "cpu", "offload_param": "none"}
    filled: dict[str, Any] = field(default_factory=dict)  # key path -> value put in place of "auto"
    warnings: list[str] = field(default_factory=list)  # lint warnings, rendered

    @property
    def offloads(self) -> bool:
        return any(device != "none" for device in self.offload.values())

    @property
    def offloads_optimizer(self) -> bool:
        return self.offload.get("offload_optimizer", "none") != "none"

    @property
    def has_optimizer(self) -> bool:
        return "optimizer" in self.config

    @property
    def has_scheduler(self) -> bool:
        return "scheduler" in self.config

    @property
    def label(self) -> str:
        off = "+".join(k.split("_")[1] for k, v in self.offload.items() if v != "none")
        return f"ZeRO-{self.stage}" + (f" + {off} offload" if off else "")

    def without_offload(self) -> "DeepSpeedPlan":
        """The same config with offloading off: the step-time baseline of train.offload_cost."""
        config = copy.deepcopy(self.config)
        for key in OFFLOAD_KEYS:
            config.get("zero_optimization", {}).pop(key, None)
        return DeepSpeedPlan(self.path + " (offload off)", config, self.stage, dict.fromkeys(OFFLOAD_KEYS, "none"),
                             self.filled, [])

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "stage": self.stage, "offload": self.offload, "label": self.label,
                "filled": self.filled, "lint_warnings": self.warnings, "config": self.config}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DeepSpeedPlan":
        """The inverse of to_dict (the plan a launched rank receives; "label" is derived, so dropped)."""
        return cls(data["path"], data["config"], data["stage"], data["offload"], data.get("filled", {}),
                   data.get("lint_warnings", []))


def training_settings(cfg: TrainConfig, world_size: int):
    """The TrainingArguments a person would pass to the HF Trainer for this run."""
    from rocmcheck.lint.hf_auto import TrainingSettings

    return TrainingSettings(per_device_train_batch_size=cfg.micro_batch, gradient_accumulation_steps=cfg.grad_accum,
                            world_size=world_size, max_grad_norm=cfg.grad_clip, learning_rate=cfg.lr,
                            adam_beta1=ADAM_BETAS[0], adam_beta2=ADAM_BETAS[1], adam_epsilon=ADAM_EPS,
                            weight_decay=cfg.weight_decay, bf16=True, fp16=False)


def prepare_deepspeed_config(path: Path, cfg: TrainConfig, world_size: int, hidden_size: int | None) -> DeepSpeedPlan:
    """Lint the file for this run's batch settings; BadInput (one line per error) if it has errors.

    Then fill "auto" exactly as the Trainer does. hidden_size: the model's (config.json), for the
    hidden-size "auto" keys; None leaves them for DeepSpeed's defaults."""
    from rocmcheck.lint import lint_deepspeed_config
    from rocmcheck.lint.hf_auto import resolve_auto

    path = Path(path)
    from rocmcheck.safe.structured import load_file

    try:
        raw = load_file(path, what="DeepSpeed config", fmt="json")
    except ValueError as exc:  # BadInput: missing, a FIFO or device, too large, too deep, not JSON
        raise BadInput(f"--deepspeed {exc}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"--deepspeed {path}: not a JSON object (a DeepSpeed config is one)")
    settings = training_settings(cfg, world_size)
    try:
        messages = lint_deepspeed_config(raw, world_size=world_size, training=settings, label=str(path))
    except BadInput as exc:
        raise BadInput(str(exc)) from None
    errors = [m.render() for m in messages if m.is_error]
    if errors:
        raise BadInput("\n".join(errors + [f"--deepspeed {path}: {len(errors)} lint error(s); see "
                                           f"`rocmcheck lint {path}`"]))
    warnings = [m.render() for m in messages if m.severity.value == "warning"]

    resolution = resolve_auto(raw, settings)
    config = resolution.config
    filled = dict(resolution.filled)
    filled.update(finalize_auto(config, hidden_size, cfg.steps, cfg.warmup_steps))
    zero = config.get("zero_optimization") or {}
    stage = int(zero.get("stage", 0))
    offload = {key: str((zero.get(key) or {}).get("device", "none")) for key in OFFLOAD_KEYS}
    return DeepSpeedPlan(str(path), config, stage, offload, filled, warnings)


def finalize_auto(config: dict[str, Any], hidden_size: int | None, steps: int, warmup_steps: int) -> dict[str, Any]:
    """trainer_config_finalize: the "auto" values that need the model and the step count. In place."""
    filled: dict[str, Any] = {}
    zero = config.get("zero_optimization")
    if isinstance(zero, dict) and hidden_size:
        values = {"reduce_bucket_size": hidden_size * hidden_size}
        if int(zero.get("stage", 0)) == 3:
            values["stage3_prefetch_bucket_size"] = int(0.9 * hidden_size * hidden_size)
            values["stage3_param_persistence_threshold"] = 10 * hidden_size
        for key, value in values.items():
            if zero.get(key) == "auto":
                zero[key] = value
                filled[f"zero_optimization.{key}"] = value
    params = (config.get("scheduler") or {}).get("params")
    if isinstance(params, dict):
        # deepspeed >= 0.19.6 rejects warmup_num_steps <= 0, so the Trainer fills at least 1.
        for key, value in (("total_num_steps", steps), ("warmup_num_steps", max(1, warmup_steps))):
            if params.get(key) == "auto":
                params[key] = value
                filled[f"scheduler.params.{key}"] = value
    return filled


def model_hidden_size(model_config: dict[str, Any]) -> int | None:
    """hidden_size as the Trainer finds it (largest of hidden_sizes, or the text_config's)."""
    for node in (model_config, model_config.get("text_config") or {}):
        if isinstance(node.get("hidden_size"), int):
            return node["hidden_size"]
        if isinstance(node.get("hidden_sizes"), list) and node["hidden_sizes"]:
            return max(node["hidden_sizes"])
    return None
