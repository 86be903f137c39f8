"""lint_file: recognise what a config file is and lint it (and the DeepSpeed config it points to)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rocmcheck.errors import BadInput
from rocmcheck.lint import known_keys
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.hf_auto import TrainingSettings
from rocmcheck.lint.lines import key_lines, line_for
from rocmcheck.lint.loading import load_mapping
from rocmcheck.lint.messages import LintMessage, Severity
from rocmcheck.lint.training_keys import check_keys, hf_vocabulary, llamafactory_vocabulary

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
    hidden_size: int | None = None,
) -> list[LintMessage]:
    """Lint a DeepSpeed JSON, a LLaMA-Factory YAML or a TrainingArguments JSON/YAML file.
    deep=False: no child processes (DeepSpeed's classes, the installed TrainingArguments or
    LLaMA-Factory classes); rocmcheck's own rules and key tables only. hidden_size: the model's
    (otherwise read from the config.json that model_name_or_path names, when it is on this machine).
    Raises BadInput when the file itself cannot be read, parsed or recognised."""
    path = Path(path)
    data = load_mapping(path)
    kind = detect_kind(data)
    if kind == "deepspeed":
        messages = lint_deepspeed_config(data, world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum,
                                         deep=deep, label=str(path), hidden_size=hidden_size)
    elif kind is None:
        raise BadInput(f"{path}: not a DeepSpeed config, LLaMA-Factory YAML or TrainingArguments file "
                             "(none of their keys found)")
    else:
        messages = lint_training_file(data, path, kind, world_size=world_size, deep=deep, hidden_size=hidden_size)
    return _with_lines(messages)


def _with_lines(messages: list[LintMessage]) -> list[LintMessage]:
    """Point each message at the line its key is written on (files on disk only)."""
    by_file: dict[str, dict[str, int]] = {}
    for m in messages:
        if m.file and m.key_path and m.line is None and Path(m.file).is_file():
            lines = by_file.setdefault(m.file, key_lines(m.file))
            m.line = line_for(lines, m.key_path)
    return messages


def model_hidden_size(model: Any, training_file: Path) -> tuple[int | None, str | None]:
    """The hidden size the HF integration reads (config.hidden_size, else max(hidden_sizes), else the
    same under text_config: transformers/integrations/deepspeed.py trainer_config_finalize), from the
    config.json of a local model directory or of the Hugging Face cache. Never downloads."""
    if not isinstance(model, str) or not model:
        return None, None
    candidates = [Path(model).expanduser() / "config.json", training_file.parent / model / "config.json"]
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
        if isinstance(cached, str):
            candidates.append(Path(cached))
    except Exception:  # not installed, or not a repo id: the local paths are still tried
        pass
    for candidate in candidates:
        try:
            config = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for node in (config, config.get("text_config") if isinstance(config, dict) else None):
            if not isinstance(node, dict):
                continue
            if isinstance(node.get("hidden_size"), int):
                return node["hidden_size"], str(candidate)
            sizes = node.get("hidden_sizes")
            if isinstance(sizes, list) and sizes and all(isinstance(x, int) for x in sizes):
                return max(sizes), str(candidate)
    return None, None


def lint_training_file(data: dict, path: Path, kind: str, *, world_size: int | None, deep: bool,
                       hidden_size: int | None = None) -> list[LintMessage]:
    file = str(path)
    vocab = llamafactory_vocabulary(use_installed=deep) if kind == "llamafactory" else hf_vocabulary(use_installed=deep)
    messages: list[LintMessage] = check_keys(data, vocab, file, kind)
    if hidden_size is None:
        hidden_size, _ = model_hidden_size(data.get("model_name_or_path"), path)
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
                                                label=f"{file} (deepspeed)", hidden_size=hidden_size)
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
        messages.extend(lint_deepspeed_config(target, world_size=world_size, training=settings, deep=deep,
                                              hidden_size=hidden_size))
    except BadInput as exc:
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
