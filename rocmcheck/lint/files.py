"""lint_file: recognise what a config file is and lint it (and the DeepSpeed config it points to)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmcheck.errors import BadInput
from rocmcheck.fixes import FixKind, edit
from rocmcheck.fixes import note as note_fix
from rocmcheck.lint import known_keys
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.hf_auto import TrainingSettings
from rocmcheck.lint.lines import key_lines, line_for
from rocmcheck.lint.loading import load_mapping
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.lint.training_keys import check_keys, hf_vocabulary, llamafactory_vocabulary
from rocmcheck.safe.files import expand_user
from rocmcheck.safe.structured import YAML_SUFFIXES, load_file, yaml_scalar
from rocmcheck.safe.text import excerpt

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


class UnknownKind(BadInput):
    """A file that parses but is none of the kinds lint judges (no DeepSpeed, LLaMA-Factory or TrainingArguments
    keys): lint cannot judge it."""


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
    Raises BadInput when the file itself cannot be read or parsed, UnknownKind (a BadInput) when it is
    none of the kinds above."""
    path = Path(path)
    data = load_mapping(path)
    kind = detect_kind(data)
    if kind == "deepspeed":
        messages = lint_deepspeed_config(data, world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum,
                                         deep=deep, label=str(path), hidden_size=hidden_size)
    elif kind is None:
        raise UnknownKind(f"{excerpt(path)}: not a DeepSpeed config, LLaMA-Factory YAML or TrainingArguments file "
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


@dataclass
class ModelConfig:
    """What lint learnt of the model named by model_name_or_path: its hidden size, from which config.json, and
    why a config.json that exists could not be read (a FIFO, a device, too large or deep, not JSON)."""

    hidden_size: int | None = None
    source: str | None = None
    problem: str | None = None


def _config_candidates(model: str, training_file: Path) -> list[Path]:
    candidates = []
    try:
        candidates.append(expand_user(model) / "config.json")
    except BadInput:  # ~name of a user this machine does not have: not a local folder here
        pass
    if not model.startswith("~"):
        candidates.append(training_file.parent / model / "config.json")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
        if isinstance(cached, str):
            candidates.append(Path(cached))
    except Exception:  # not installed, or not a repo id: the local paths are still tried
        pass
    return candidates


def model_config(model: Any, training_file: Path) -> ModelConfig:
    """The hidden size the HF integration reads (config.hidden_size, else max(hidden_sizes), else the
    same under text_config: transformers/integrations/deepspeed.py trainer_config_finalize), from the
    config.json of a local model directory or of the Hugging Face cache, read through the one capped,
    non-blocking, depth-limited loader (safe.structured.load_file). Never downloads."""
    if not isinstance(model, str) or not model:
        return ModelConfig()
    problem = None
    for candidate in _config_candidates(model, training_file):
        if not os.path.lexists(candidate):
            continue
        try:
            config = load_file(candidate, what="config.json", fmt="json")
        except BadInput as exc:
            problem = problem or str(exc)
            continue
        for node in (config, config.get("text_config") if isinstance(config, dict) else None):
            if not isinstance(node, dict):
                continue
            size = node.get("hidden_size")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                return ModelConfig(size, str(candidate))
            sizes = node.get("hidden_sizes")
            if isinstance(sizes, list) and sizes and all(isinstance(x, int) and not isinstance(x, bool)
                                                         for x in sizes):
                return ModelConfig(max(sizes), str(candidate))
    return ModelConfig(problem=problem)


def model_hidden_size(model: Any, training_file: Path) -> tuple[int | None, str | None]:
    """(hidden size, the config.json it came from), or (None, None) when not known here."""
    found = model_config(model, training_file)
    return found.hidden_size, found.source


def _deepspeed_value(file: Path, value: str) -> str:
    """`deepspeed: VALUE` as the training file's own syntax writes it: a YAML scalar quoted as YAML needs (a
    folder named `ds #1` would otherwise end the value at the `#`), or a JSON string."""
    if file.suffix.lower() in YAML_SUFFIXES:
        return f"deepspeed: {yaml_scalar(value)}"
    return f'"deepspeed": {json.dumps(value, ensure_ascii=False)}'


def lint_training_file(data: dict, path: Path, kind: str, *, world_size: int | None, deep: bool,
                       hidden_size: int | None = None) -> list[LintMessage]:
    file = str(path)
    vocab = llamafactory_vocabulary(use_installed=deep) if kind == "llamafactory" else hf_vocabulary(use_installed=deep)
    messages: list[LintMessage] = check_keys(data, vocab, file, kind)
    if hidden_size is None:
        model = model_config(data.get("model_name_or_path"), path)
        hidden_size = model.hidden_size
        if model.problem:
            messages.append(LintMessage(Severity.INFO, "lint.training.model_config_unreadable", file,
                                        "model_name_or_path", f"the model's config.json was not read: {model.problem}"))
    if data.get("bf16") is True and data.get("fp16") is True:
        messages.append(LintMessage(Severity.ERROR, "lint.training.bf16_and_fp16", file, "bf16",
                                    "bf16 and fp16 are both true: TrainingArguments refuses that",
                                    fix=key_edit(file, "fp16", "set it to false", "keep bf16 on MI300X/H100")))
    ds = data.get("deepspeed")
    if ds is None:
        return messages
    settings = TrainingSettings.from_args(data, world_size)
    if isinstance(ds, dict):  # TrainingArguments also takes the config inline
        return messages + _inside(lint_deepspeed_config(ds, world_size=world_size, training=settings, deep=deep,
                                                        label=file, hidden_size=hidden_size), file, "deepspeed")
    if not isinstance(ds, str):
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_value", file, "deepspeed",
                                    f"expected a path to a DeepSpeed JSON file, got {type(ds).__name__}",
                                    fix=key_edit(file, "deepspeed", "set it to the path of a DeepSpeed JSON file")))
        return messages
    target, note = resolve_deepspeed_path(ds, path)
    if target is None:
        where = note or f"looked in the working directory {excerpt(os.getcwd())} and next to {excerpt(path.name)}"
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_missing", file, "deepspeed",
                                    f"DeepSpeed config '{excerpt(ds)}' not found ({where})",
                                    fix=key_edit(file, "deepspeed", "point it at an existing DeepSpeed JSON file",
                                                 "e.g. one written by `rocmcheck recipes write NAME DIR`")))
        return messages
    if note:
        messages.append(LintMessage(Severity.WARNING, "lint.training.deepspeed_relative", file, "deepspeed", note,
                                    fix=edit(file, "change the line to "
                                             + _deepspeed_value(path, str(target.resolve())),
                                             "an absolute path is found from any working directory")))
    try:
        messages.extend(lint_deepspeed_config(target, world_size=world_size, training=settings, deep=deep,
                                              hidden_size=hidden_size))
    except BadInput as exc:
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_unreadable", file, "deepspeed", str(exc),
                                    fix=note_fix(f"repair or replace the DeepSpeed config {excerpt(target)}: "
                                                 "the message names what is wrong with it")))
    return messages


def _inside(messages: list[LintMessage], file: str, key: str) -> list[LintMessage]:
    """Messages about a DeepSpeed config written inline under `key:` of the training file: their key paths and
    edits are under that key (`deepspeed.zero_optimization.stage`), in that file."""
    for m in messages:
        if m.fix is not None and m.fix.kind is FixKind.EDIT:
            where, sep, _ = m.fix.text.partition(": ")
            at_key = sep and where and " " not in where  # key_edit's "key.path: change"
            m.fix = edit(file, f"{key}.{m.fix.text}" if at_key else f"{key}: {m.fix.text}", m.fix.why)
        m.file, m.key_path = file, f"{key}.{m.key_path}" if m.key_path else key
    return messages


def resolve_deepspeed_path(value: str, training_file: Path) -> tuple[Path | None, str | None]:
    """LLaMA-Factory hands the string to TrainingArguments, which opens it relative to the working
    directory (that is how its examples/ paths work). A path that only exists next to the YAML is
    linted too, with a warning that the run would not find it from here. (None, why) when it is found
    nowhere and there is more to say than "not found" (a ~user this machine does not have)."""
    try:
        given = expand_user(value)
    except BadInput as exc:
        return None, str(exc)
    if given.is_file():
        return given, None
    beside = training_file.parent / given
    if not given.is_absolute() and not value.startswith("~") and beside.is_file():
        return beside, (f"'{excerpt(value)}' is opened relative to the working directory when training starts; "
                        f"it exists only relative to {excerpt(training_file.name)}, so run from "
                        f"{excerpt(training_file.parent)} or use an absolute path")
    return None, None
