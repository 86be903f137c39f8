"""lint_file: recognise what a config file is and lint it (and the DeepSpeed config it points to)."""

from __future__ import annotations

import os
from pathlib import Path

from rocmcheck.lint import known_keys
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.hf_auto import TrainingSettings
from rocmcheck.lint.loading import LintInputError, load_mapping
from rocmcheck.lint.messages import LintMessage, Severity

# Keys only LLaMA-Factory's argument dataclasses have (llamafactory/hparams/*_args.py).
LLAMAFACTORY_KEYS = {"stage", "finetuning_type", "template", "dataset", "cutoff_len", "lora_target", "lora_rank"}
# TrainingArguments keys that a DeepSpeed config never has at the top level.
TRAINING_ARGS_KEYS = {"output_dir", "per_device_train_batch_size", "deepspeed", "learning_rate", "num_train_epochs",
                      "max_steps", "do_train", "model_name_or_path"}


def detect_kind(data: dict) -> str | None:
    """"llamafactory", "training_args", "deepspeed", or None."""
    keys = set(map(str, data))
    if keys & LLAMAFACTORY_KEYS:
        return "llamafactory"
    if keys & TRAINING_ARGS_KEYS:
        return "training_args"
    vocabulary = known_keys.top_level_keys()
    if any(k in vocabulary or known_keys.closest(k, vocabulary) for k in keys):
        return "deepspeed"
    return None


def lint_file(
    path: str | Path,
    *,
    world_size: int | None = None,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
    deep: bool = True,
) -> list[LintMessage]:
    """Lint a DeepSpeed JSON, a LLaMA-Factory YAML or a TrainingArguments JSON/YAML file.
    Raises LintInputError when the file itself cannot be read, parsed or recognised."""
    path = Path(path)
    data = load_mapping(path)
    kind = detect_kind(data)
    if kind == "deepspeed":
        return lint_deepspeed_config(data, world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum,
                                     deep=deep, label=str(path))
    if kind is None:
        raise LintInputError(f"{path}: not a DeepSpeed config, LLaMA-Factory YAML or TrainingArguments file "
                             "(none of their keys found)")
    return lint_training_file(data, path, kind, world_size=world_size, deep=deep)


def lint_training_file(data: dict, path: Path, kind: str, *, world_size: int | None, deep: bool) -> list[LintMessage]:
    file = str(path)
    messages: list[LintMessage] = []
    if data.get("bf16") is True and data.get("fp16") is True:
        messages.append(LintMessage(Severity.ERROR, "lint.training.bf16_and_fp16", file, "bf16",
                                    "bf16 and fp16 are both true: TrainingArguments refuses that",
                                    fix="set fp16: false (keep bf16 on MI300X/H100)"))
    ds = data.get("deepspeed")
    if ds is None:
        return messages
    settings = TrainingSettings.from_args(data, world_size)
    if isinstance(ds, dict):  # TrainingArguments also takes the config inline
        return messages + lint_deepspeed_config(ds, world_size=world_size, training=settings, deep=deep,
                                                label=f"{file} (deepspeed)")
    if not isinstance(ds, str):
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_value", file, "deepspeed",
                                    f"expected a path to a DeepSpeed JSON file, got {type(ds).__name__}",
                                    fix="deepspeed: path/to/ds_config.json"))
        return messages
    target, note = resolve_deepspeed_path(ds, path)
    if target is None:
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_missing", file, "deepspeed",
                                    f"DeepSpeed config '{ds}' not found (looked in the working directory "
                                    f"{os.getcwd()} and next to {path.name})",
                                    fix="point deepspeed: at an existing file, e.g. one from `rocmcheck recipes write`"))
        return messages
    if note:
        messages.append(LintMessage(Severity.WARNING, "lint.training.deepspeed_relative", file, "deepspeed", note,
                                    fix=f"deepspeed: {target.resolve()}"))
    try:
        messages.extend(lint_deepspeed_config(target, world_size=world_size, training=settings, deep=deep))
    except LintInputError as exc:
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_unreadable", file, "deepspeed", str(exc),
                                    fix="fix the DeepSpeed JSON file it points to"))
    return messages


def resolve_deepspeed_path(value: str, training_file: Path) -> tuple[Path | None, str | None]:
    """LLaMA-Factory hands the string to TrainingArguments, which opens it relative to the working
    directory (that is how its examples/ paths work). A path that only exists next to the YAML is
    linted too, with a warning that the run would not find it from here."""
    given = Path(value).expanduser()
    if given.is_file():
        return given, None
    beside = training_file.parent / given
    if not given.is_absolute() and beside.is_file():
        return beside, (f"'{value}' is opened relative to the working directory when training starts; "
                        f"it exists only relative to {training_file.name}, so run from {training_file.parent} "
                        "or use an absolute path")
    return None, None
