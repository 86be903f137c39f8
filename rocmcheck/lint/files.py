"""lint_file: recognise what a config file is, choose who reads it (rocmcheck.lint.consumers), and lint it (and the
DeepSpeed config it points to) for that consumer."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from rocmcheck.errors import BadInput
from rocmcheck.fixes import FixKind, edit
from rocmcheck.fixes import note as note_fix
from rocmcheck.lint import consumers, known_keys, owners
from rocmcheck.lint.accelerate_config import lint_accelerate_config
from rocmcheck.lint.axolotl_config import axolotl_python, lint_axolotl_config
from rocmcheck.lint.consumers import (
    ACCELERATE,
    AXOLOTL,
    AXOLOTL_TRAIN,
    DEEPSPEED,
    LLAMAFACTORY,
    TRAINING_ARGS,
    TRL,
    TRL_CLI,
    Consumer,
    ConsumerChoice,
)
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.hf_auto import TrainingSettings
from rocmcheck.lint.lines import key_lines, line_for
from rocmcheck.lint.llamafactory_rules import LfContext, lint_llamafactory_values
from rocmcheck.lint.loading import load_mapping, resolve_named_file
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.lint.stack import Stack, this_stack
from rocmcheck.lint.training_keys import (
    check_keys,
    hf_vocabulary,
    llamafactory_train_only_keys,
    llamafactory_vocabulary,
)
from rocmcheck.lint.training_values import check_values
from rocmcheck.lint.trl_recipe import lint_trl_recipe, trl_python
from rocmcheck.safe.files import expand_user
from rocmcheck.safe.structured import YAML_SUFFIXES, load_file, yaml_scalar
from rocmcheck.safe.text import excerpt


def detect_kind(data: dict) -> str | None:
    """"llamafactory", "accelerate", "training_args", "deepspeed", "trl" or "axolotl" (judged only where their own
    parser or schema can be asked: kind_of), or None (none of them, or a config of a program lint does not judge:
    owners.foreign_owner names it)."""
    keys = set(map(str, data))
    owner = owners.foreign_owner(data)
    if owner in (TRL, AXOLOTL):
        return owner
    if owner is not None:
        return None
    if keys & owners.ACCELERATE_KEYS:
        return ACCELERATE
    if owners.is_llamafactory(keys):
        return LLAMAFACTORY
    if keys & owners.TRAINING_ARGS_KEYS:
        return TRAINING_ARGS
    vocabulary = known_keys.top_level_keys()
    if any(k in vocabulary or known_keys.closest(k, vocabulary) for k in keys):
        return DEEPSPEED
    return None


class UnknownKind(BadInput):
    """A file that parses but is none of the kinds lint judges (no DeepSpeed, LLaMA-Factory, accelerate or
    TrainingArguments keys): lint cannot judge it (a skip, never a pass)."""


class NotJudged(UnknownKind):
    """A config of a program lint does not judge (axolotl, TRL, ms-swift, Megatron-Core, torchtune, LLaMA-Factory
    v1): a skip that names the program."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner


def kind_of(data: dict, path: Path, *, deep: bool = True) -> str:
    """The kind lint judges the file as; NotJudged for a config of a program it does not judge (a TRL recipe is
    judged only with deep, where TRL's own parser can be asked), UnknownKind for none of them."""
    owner = owners.foreign_owner(data)
    if owner == TRL and deep and trl_python() is not None:
        return TRL
    if owner == AXOLOTL and deep and axolotl_python() is not None:
        return AXOLOTL
    if owner is not None:
        why = "rocmcheck lint judges DeepSpeed, accelerate, LLaMA-Factory 0.9 and HF TrainingArguments files"
        if owner == TRL:  # never HfArgumentParser's rule: TRL's parser reads the file its own way
            why = ("TRL's own parser judges it, and " + ("deep validation is turned off" if not deep else
                   "TRL is not installed in this Python: install trl, or set ROCMCHECK_TRL_PYTHON to the Python "
                   "that will train"))
        if owner == AXOLOTL:
            why = ("axolotl's own config schema judges it, and " + ("deep validation is turned off" if not deep else
                   "axolotl is not installed in this Python: install axolotl, or set ROCMCHECK_AXOLOTL_PYTHON to "
                   "the Python that will train"))
        raise NotJudged(f"{excerpt(path)}: {owners.NOT_JUDGED[owner]}: not judged ({why})", owner)
    kind = detect_kind(data)
    if kind is None:
        raise UnknownKind(f"{excerpt(path)}: not a DeepSpeed config, LLaMA-Factory YAML, accelerate config or "
                          "TrainingArguments file (none of their keys found)")
    return kind


def choose_consumer(data: dict, kind: str, path: Path, *, named: Consumer | None = None,
                    deep: bool = True) -> ConsumerChoice:
    """The consumer a file is judged for: the one named (BadInput when it reads no such file), else the one the
    file's kind and keys imply (rocmcheck.lint.consumers)."""
    if named is not None:
        return consumers.for_named(named, kind, str(path))
    if kind == DEEPSPEED:
        return consumers.for_deepspeed_config(data)
    if kind == LLAMAFACTORY:
        return consumers.for_llamafactory(data, llamafactory_train_only_keys(use_installed=deep))
    if kind == ACCELERATE:
        return ConsumerChoice(consumers.ACCELERATE_LAUNCH, "an accelerate config: accelerate launch reads it")
    if kind == TRL:
        return ConsumerChoice(TRL_CLI, "a TRL recipe: TRL's own parser reads it")
    if kind == AXOLOTL:
        return ConsumerChoice(AXOLOTL_TRAIN, "an axolotl config: axolotl's own schema reads it")
    return ConsumerChoice(consumers.HF_TRAINER, "a TrainingArguments file: the HF Trainer reads it")


def lint_file(
    path: str | Path,
    *,
    world_size: int | None = None,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
    deep: bool = True,
    hidden_size: int | None = None,
    consumer: Consumer | ConsumerChoice | None = None,
    training: TrainingSettings | None = None,
    stack: Stack | None = None,
) -> list[LintMessage]:
    """Lint a DeepSpeed JSON, a LLaMA-Factory YAML, an accelerate config or a TrainingArguments JSON/YAML file,
    for its consumer (named, or chosen from the file: rocmcheck.lint.consumers; every message names it).
    deep=False: no child processes (DeepSpeed's, accelerate's, transformers' or LLaMA-Factory's own classes);
    rocmcheck's own rules and key tables only. hidden_size: the model's (otherwise read from the config.json that
    model_name_or_path names, when it is on this machine). training: the training arguments an accelerate config
    is launched with (a training file linted alongside). stack: this machine's Python stack (default: read here).
    Raises BadInput when the file itself cannot be read or parsed, or the named consumer reads no such file;
    UnknownKind (a BadInput) when it is none of the kinds above."""
    path = Path(path)
    data = load_mapping(path)
    kind = kind_of(data, path, deep=deep)
    if isinstance(consumer, ConsumerChoice):
        choice = consumer
    else:
        choice = choose_consumer(data, kind, path, named=consumer, deep=deep)
    return lint_loaded(data, path, kind, choice, world_size=world_size, micro_batch=micro_batch,
                       grad_accum=grad_accum, deep=deep, hidden_size=hidden_size, training=training, stack=stack)


def lint_loaded(data: dict, path: Path, kind: str, choice: ConsumerChoice, *, world_size: int | None = None,
                micro_batch: int | None = None, grad_accum: int | None = None, deep: bool = True,
                hidden_size: int | None = None, training: TrainingSettings | None = None,
                stack: Stack | None = None, check_paths: bool = True,
                script: tuple[str, frozenset[str]] | None = None) -> list[LintMessage]:
    """check_paths=False: the datasets a LLaMA-Factory YAML names are not looked up from here (the files were just
    written somewhere else than where they will run: `rocmcheck recipes write`). script: (the training script's
    name, the arguments it defines) for a TrainingArguments file (rocmcheck.lint.script_args)."""
    if kind == DEEPSPEED:
        messages = lint_deepspeed_config(data, world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum,
                                         deep=deep, label=str(path), hidden_size=hidden_size,
                                         consumer=choice.consumer)
    elif kind == TRL:
        messages = lint_trl_recipe(data, path, label=choice.consumer.label, world_size=world_size, script=script)
    elif kind == AXOLOTL:
        messages = lint_axolotl_config(data, path, label=choice.consumer.label)
    elif kind == ACCELERATE:
        settings = training or TrainingSettings.from_command_line(micro_batch, grad_accum, world_size)
        messages = lint_accelerate_config(data, path, deep=deep, training=settings, world_size=world_size,
                                          hidden_size=hidden_size)
    else:
        messages = lint_training_file(data, path, kind, world_size=world_size, deep=deep, hidden_size=hidden_size,
                                      choice=choice, stack=stack, check_paths=check_paths, script=script)
    for m in messages:
        if m.consumer is None:
            m.consumer = choice.consumer.label
    if choice.assumed:
        messages.append(LintMessage(Severity.INFO, "lint.file.consumer_assumed", str(path), "",
                                    f"judged for {choice.consumer.label}, {choice.why}",
                                    consumer=choice.consumer.label))
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
    quantization_config: dict | None = None  # a PTQ-quantized checkpoint's (GPTQ, AWQ, FP8, ...)


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
        quantization = config.get("quantization_config") if isinstance(config, dict) else None
        quantization = quantization if isinstance(quantization, dict) and quantization else None
        for node in (config, config.get("text_config") if isinstance(config, dict) else None):
            if not isinstance(node, dict):
                continue
            size = node.get("hidden_size")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                return ModelConfig(size, str(candidate), quantization_config=quantization)
            sizes = node.get("hidden_sizes")
            if isinstance(sizes, list) and sizes and all(isinstance(x, int) and not isinstance(x, bool)
                                                         for x in sizes):
                return ModelConfig(max(sizes), str(candidate), quantization_config=quantization)
        if isinstance(config, dict):
            return ModelConfig(source=str(candidate), quantization_config=quantization)
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


def _elsewhere(command: str, deep: bool) -> dict[str, str]:
    """For a LLaMA-Factory YAML: keys another subcommand reads, and which (hiyouga/LlamaFactory#5633: a predict
    YAML given to a chat subcommand; the maintainer's answer: `llamafactory-cli train`)."""
    if command == "train":
        train = llamafactory_vocabulary("train", use_installed=deep).keys
        return {k: "an EvaluationArguments key: `llamafactory-cli eval` reads it"
                for k in llamafactory_vocabulary("eval", use_installed=deep).keys - train}
    return {k: "a TrainingArguments key: only `llamafactory-cli train` reads it, and a training or predict file "
               "runs with that" for k in llamafactory_train_only_keys(use_installed=deep)}


def _lf_version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _megatron_keys(data: dict, vocabulary: set[str]) -> list[str]:
    """In a LLaMA-Factory YAML for its Megatron trainer (Megatron-Core parallelism keys: examples/megatron,
    examples/megatron_bridge), the keys its own classes lack: Megatron's, and the trainer's (mixed_precision,
    use_packed_sequences). A key close to one of LLaMA-Factory's own that is not Megatron-named stays a typo."""
    if not owners.megatron_keys(data):
        return []
    out = []
    for key in (k for k in data if isinstance(k, str) and k not in vocabulary):
        if owners.is_megatron_key(key) or known_keys.closest(key, vocabulary - set(data)) is None:
            out.append(key)
    return out


def lint_training_file(data: dict, path: Path, kind: str, *, world_size: int | None, deep: bool,
                       hidden_size: int | None = None, choice: ConsumerChoice | None = None,
                       stack: Stack | None = None, check_paths: bool = True,
                       script: tuple[str, frozenset[str]] | None = None) -> list[LintMessage]:
    file = str(path)
    if choice is None:
        choice = choose_consumer(data, kind, path, deep=deep)
    command = choice.consumer.llamafactory_command
    if kind == LLAMAFACTORY:
        vocab = llamafactory_vocabulary(command or "train", use_installed=deep)
        megatron = _megatron_keys(data, vocab.keys) if (command or "train") == "train" else []
        keyed = {k: v for k, v in data.items() if k not in megatron}
        messages: list[LintMessage] = check_keys(keyed, vocab, file, kind, _elsewhere(command or "train", deep))
        if megatron:
            messages.append(LintMessage(
                Severity.INFO, "lint.llamafactory.megatron_keys", file, "",
                f"Megatron-Core keys, not checked here: {excerpt(', '.join(megatron), 600)}. LLaMA-Factory reads them "
                "only with its Megatron trainer: USE_MCA=1 (mcore_adapter's training arguments) or, after 0.9.5, "
                "USE_MEGATRON_BRIDGE=1; without it its parser stops with 'Some keys are not used by the "
                "HfArgumentParser'", consumer=choice.consumer.label))
    else:
        vocab = hf_vocabulary(use_installed=deep)
        if script is not None:  # the script named: its arguments and TrainingArguments' are the whole parser
            vocab = replace(vocab, keys=vocab.keys | script[1], owner=f"{vocab.owner} with {excerpt(script[0])}'s "
                            "arguments", complete=True)
        messages = check_keys(data, vocab, file, kind)
    if kind == TRAINING_ARGS or command == "train":  # the subcommands that parse TrainingArguments
        messages.extend(check_values(data, file, sorted(vocab.transformers_versions), choice.consumer.label))
    model = model_config(data.get("model_name_or_path"), path)
    if hidden_size is None:
        hidden_size = model.hidden_size
        if model.problem:
            messages.append(LintMessage(Severity.INFO, "lint.training.model_config_unreadable", file,
                                        "model_name_or_path", f"the model's config.json was not read: {model.problem}"))
    if data.get("bf16") is True and data.get("fp16") is True:
        messages.append(LintMessage(Severity.ERROR, "lint.training.bf16_and_fp16", file, "bf16",
                                    "bf16 and fp16 are both true: TrainingArguments refuses that",
                                    fix=key_edit(file, "fp16", "set it to false", "keep bf16 on MI300X/H100")))
    ds_messages, ds_config = [], None
    if kind == TRAINING_ARGS or command == "train":  # only `train` parses TrainingArguments' deepspeed
        ds_messages, ds_config = _linked_deepspeed(data, path, kind, world_size=world_size, deep=deep,
                                                   hidden_size=hidden_size)
    if kind == LLAMAFACTORY:
        lf = LfContext(file=file, command=command or "train", consumer=choice.consumer.label,
                       llamafactory_version=_lf_version(vocab.version), version_installed=vocab.installed,
                       deepspeed=ds_config, quantization_config=model.quantization_config,
                       model_config_source=model.source, world_size=world_size,
                       stack=stack if stack is not None else this_stack(), check_paths=check_paths)
        messages.extend(lint_llamafactory_values(data, lf))
    return messages + ds_messages


def _linked_deepspeed(data: dict, path: Path, kind: str, *, world_size: int | None, deep: bool,
                      hidden_size: int | None) -> tuple[list[LintMessage], dict | None]:
    """The DeepSpeed config `deepspeed:` names (or holds), linted for the HF Trainer with this file's training
    arguments; and that config, for the rules that depend on its ZeRO stage (None when it could not be read)."""
    file = str(path)
    ds = data.get("deepspeed")
    if ds is None:
        return [], None
    ds_consumer = consumers.HF_TRAINER_UNDER_LLAMAFACTORY if kind == LLAMAFACTORY else consumers.HF_TRAINER
    settings = TrainingSettings.from_args(data, world_size)
    settings.source = f"the training arguments ({excerpt(path.name)})"
    if isinstance(ds, dict):  # TrainingArguments also takes the config inline
        return _inside(lint_deepspeed_config(ds, world_size=world_size, training=settings, deep=deep, label=file,
                                             hidden_size=hidden_size, consumer=ds_consumer), file, "deepspeed"), ds
    if not isinstance(ds, str):
        return [LintMessage(Severity.ERROR, "lint.training.deepspeed_value", file, "deepspeed",
                            f"expected a path to a DeepSpeed JSON file, got {type(ds).__name__}",
                            fix=key_edit(file, "deepspeed", "set it to the path of a DeepSpeed JSON file"))], None
    messages: list[LintMessage] = []
    target, note = resolve_deepspeed_path(ds, path)
    if target is None:
        where = note or f"looked in the working directory {excerpt(os.getcwd())} and next to {excerpt(path.name)}"
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_missing", file, "deepspeed",
                                    f"DeepSpeed config '{excerpt(ds)}' not found ({where})",
                                    fix=key_edit(file, "deepspeed", "point it at an existing DeepSpeed JSON file",
                                                 "e.g. one written by `rocmcheck recipes write NAME DIR`")))
        return messages, None
    if note:
        messages.append(LintMessage(Severity.WARNING, "lint.training.deepspeed_relative", file, "deepspeed", note,
                                    fix=edit(file, "change the line to "
                                             + _deepspeed_value(path, str(target.resolve())),
                                             "an absolute path is found from any working directory")))
    try:
        config = load_mapping(target)
        messages.extend(lint_deepspeed_config(config, world_size=world_size, training=settings, deep=deep,
                                              label=str(target), hidden_size=hidden_size, consumer=ds_consumer))
    except BadInput as exc:
        messages.append(LintMessage(Severity.ERROR, "lint.training.deepspeed_unreadable", file, "deepspeed", str(exc),
                                    fix=note_fix(f"repair or replace the DeepSpeed config {excerpt(target)}: "
                                                 "the message names what is wrong with it")))
        return messages, None
    return messages, config


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
    """LLaMA-Factory hands the string to TrainingArguments, which opens it relative to the working directory (that
    is how its examples/ paths work): loading.resolve_named_file."""
    return resolve_named_file(value, training_file, "when training starts", "run")
