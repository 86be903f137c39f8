"""Keys of training files, judged by their owners' parsers.

- HF TrainingArguments files: the installed transformers' TrainingArguments, through
  HfArgumentParser's own rule (rocmcheck.lint.training_child, a child process: it imports torch).
- LLaMA-Factory YAML: LLaMA-Factory's own argument classes when some Python here can import
  llamafactory (ROCMCHECK_LLAMAFACTORY_PYTHON, or this one); otherwise llamafactory_keys.json (made by
  scripts/llamafactory_keys.py from LLaMA-Factory's classes) plus the transformers keys of the
  releases LLaMA-Factory accepts, from transformers_keys.json (scripts/transformers_key_history.py).

transformers_keys.json also says in which release a key was removed (warmup_ratio, overwrite_output_dir).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from rocmcheck.child import child_env, run_child
from rocmcheck.fixes import Fix
from rocmcheck.lint import known_keys
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.package_data import read_json
from rocmcheck.safe.text import excerpt

CHILD_TIMEOUT_S = 120.0  # importing transformers + torch took 11 s on a loaded 2-core CPU box
LLAMAFACTORY_PYTHON_ENV = "ROCMCHECK_LLAMAFACTORY_PYTHON"
# What HfArgumentParser.parse_dict raises for a key no dataclass has (transformers/hf_argparser.py).
PARSE_DICT_ERROR = "Some keys are not used by the HfArgumentParser"

# What to write instead of a key a transformers release removed (transformers 5 migration): (the new key, the
# change, why).
REPLACEMENTS = {
    "warmup_ratio": ("warmup_steps", "rename it to warmup_steps, with the same value",
                     "transformers 5 reads a warmup_steps below 1 as a fraction of the total steps"),
    "overwrite_output_dir": (None, "delete it", ""),
    "evaluation_strategy": ("eval_strategy", "rename it to eval_strategy", ""),
    "no_cuda": ("use_cpu", "replace it with use_cpu: true", ""),
    "per_gpu_train_batch_size": ("per_device_train_batch_size", "rename it to per_device_train_batch_size", ""),
    "per_gpu_eval_batch_size": ("per_device_eval_batch_size", "rename it to per_device_eval_batch_size", ""),
}
_DELETE = (None, "delete it", "")


def _replacement(file: str, key: str) -> tuple[str | None, Fix]:
    newer, change, why = REPLACEMENTS.get(key, _DELETE)
    return newer, key_edit(file, key, change, why)


@functools.lru_cache(maxsize=None)
def _table(name: str) -> dict[str, Any]:
    return read_json("rocmcheck.lint", name)


def transformers_table() -> dict[str, Any]:
    return _table("transformers_keys.json")


def llamafactory_table() -> dict[str, Any]:
    return _table("llamafactory_keys.json")


def installed_transformers_version() -> Version | None:
    """From package metadata: never imports transformers."""
    try:
        return Version(metadata.version("transformers"))
    except (metadata.PackageNotFoundError, InvalidVersion):
        return None


def _releases() -> list[Version]:
    return [Version(v) for v in transformers_table()["releases_read"]]


def _alive(key: str, version: Version) -> bool:
    """Whether transformers `version` accepts `key`, as far as the releases read tell."""
    entry = transformers_table()["history"].get(key)
    if entry is None:
        return False
    first, last = Version(entry["first_seen"]), Version(entry["last_seen"])
    newest = _releases()[-1]
    return first <= version and (version <= last or last == newest)


def accepts(key: str, version: Version) -> bool:
    """Whether transformers `version` has the TrainingArguments key, as far as the releases read tell."""
    return _alive(key, version)


def _last_release_with(key: str) -> str | None:
    entry = transformers_table()["history"].get(key)
    return entry["last_seen"] if entry else None


@dataclass
class Vocabulary:
    keys: set[str]
    owner: str  # "transformers 5.24.0 TrainingArguments", "LLaMA-Factory 0.9.5 (transformers 5.24.0)"
    complete: bool  # True: the parser is the whole parser (LLaMA-Factory); False: scripts add their own dataclasses
    transformers_versions: list[Version] = field(default_factory=list)  # the releases the keys hold for
    note: str | None = None  # how the keys were found, when not from the installed classes
    own: set[str] = field(default_factory=set)  # keys the owner defines itself (not transformers'), in every release
    version: str | None = None  # the owner's release the keys are from (LLaMA-Factory's)
    installed: bool = False  # True: asked of the installed classes, so `version` is the release that will run


def llamafactory_python() -> str | None:
    """ROCMCHECK_LLAMAFACTORY_PYTHON (a venv with llamafactory, see docs/recipes.md), else this Python
    if it can import llamafactory."""
    explicit = os.environ.get(LLAMAFACTORY_PYTHON_ENV)
    if explicit:
        return explicit
    return sys.executable if importlib.util.find_spec("llamafactory") else None


@functools.lru_cache(maxsize=None)
def _ask_child_cached(kind: str, command: str, python: str) -> tuple[str, str]:
    env = child_env()
    env.setdefault("DS_ACCELERATOR", "cpu")
    run = run_child("rocmcheck.lint.training_child", {"kind": kind, "command": command}, CHILD_TIMEOUT_S, env=env,
                    python=python)
    payload = run.last("keys")
    if payload is None:
        return "", f"the key check process gave no answer: {run.command.describe_failure()}"
    if "skipped" in payload:
        return "", payload["skipped"]
    return json.dumps(payload), ""


def _ask_child(kind: str, python: str, command: str = "train") -> tuple[dict | None, str]:
    """The installed classes' keys, asked once per (kind, subcommand, Python) in a process: a lint run over many
    LLaMA-Factory files pays for one import."""
    text, why = _ask_child_cached(kind, command, python)
    return (json.loads(text), "") if text else (None, why)


def hf_vocabulary(*, use_installed: bool = True) -> Vocabulary:
    installed = installed_transformers_version()
    why = "transformers is not installed here"
    if installed is not None and use_installed:
        payload, why = _ask_child("training_args", sys.executable)
        if payload:
            version = Version(payload["transformers_version"])
            return Vocabulary(set(payload["keys"]), f"transformers {version} TrainingArguments", False, [version])
    elif installed is not None:
        why = "the installed classes were not consulted"
    version = installed or _releases()[-1]
    keys = {k for k in transformers_table()["history"] if _alive(k, version)}
    return Vocabulary(keys, f"transformers {version} TrainingArguments", False, [version],
                      note=f"keys from rocmcheck's table of transformers releases; {why}")


# The llamafactory-cli subcommands and the argument list each parses (llamafactory/hparams/parser.py: _TRAIN_ARGS
# for train, _EVAL_ARGS for eval, _INFER_ARGS for export, chat, webchat and api).
LLAMAFACTORY_PARSERS = {"train": "train", "eval": "eval", "export": "infer", "chat": "infer"}


def _subcommand_classes(command: str) -> list[str]:
    table = llamafactory_table()
    return list(table["subcommands"][LLAMAFACTORY_PARSERS.get(command, "train")])


def _parses_training_arguments(classes: list[str]) -> bool:
    return any(name.endswith(".TrainingArguments") for name in classes)


def llamafactory_vocabulary(command: str = "train", *, use_installed: bool = True) -> Vocabulary:
    """The keys `llamafactory-cli COMMAND` parses (train, eval, export or chat): LLaMA-Factory's own classes when a
    Python here imports llamafactory, else the stored table, plus transformers' TrainingArguments keys for `train`
    (the only subcommand that parses them)."""
    table = llamafactory_table()
    classes = _subcommand_classes(command)
    own = {k for name in classes for k in table["keys_by_class"].get(name, ())}
    python = llamafactory_python() if use_installed else None
    why = "LLaMA-Factory is not importable here (set ROCMCHECK_LLAMAFACTORY_PYTHON to a Python that has it)"
    parser = LLAMAFACTORY_PARSERS.get(command, "train")
    if python:
        payload, why = _ask_child("llamafactory", python, parser)
        if payload:
            version = Version(payload["transformers_version"])
            return Vocabulary(set(payload["keys"]), f"LLaMA-Factory {payload['llamafactory_version']}", True, [version],
                              note=f"its own argument classes for `{command}`, with transformers {version}", own=own,
                              version=payload["llamafactory_version"], installed=True)
    if not _parses_training_arguments(classes):
        return Vocabulary(own, f"LLaMA-Factory {table['llamafactory_version']}", True, [],
                          note=f"keys from rocmcheck's table of the argument classes `{command}` parses; {why}",
                          own=own, version=table["llamafactory_version"])
    try:
        allowed = SpecifierSet(table["transformers_requirement"])
    except InvalidSpecifier:
        allowed = SpecifierSet()
    installed = installed_transformers_version()
    if installed is not None and installed in allowed:
        versions = [installed]
    else:  # the training machine runs one of the releases LLaMA-Factory accepts
        versions = [v for v in _releases() if v in allowed] or [_releases()[-1]]
    keys = own | {k for k in transformers_table()["history"] if any(_alive(k, v) for v in versions)}
    span = f"transformers {versions[0]}" if len(versions) == 1 else f"the transformers releases it accepts ({allowed})"
    return Vocabulary(keys, f"LLaMA-Factory {table['llamafactory_version']}", True, versions,
                      note=f"keys from rocmcheck's table of its argument classes, with {span}; {why}", own=own,
                      version=table["llamafactory_version"])


def llamafactory_train_only_keys(*, use_installed: bool = True) -> set[str]:
    """Keys only `train` parses (TrainingArguments'): in a YAML they say it is a training file."""
    train = llamafactory_vocabulary("train", use_installed=use_installed).keys
    others = llamafactory_vocabulary("eval", use_installed=use_installed).keys | \
        llamafactory_vocabulary("chat", use_installed=use_installed).keys
    return train - others


def check_keys(data: dict, vocab: Vocabulary, file: str, kind: str,
               elsewhere: dict[str, str] | None = None) -> list[LintMessage]:
    """Every top-level key the owner's parser would reject, with a suggestion; keys removed from a
    transformers release named with the release. elsewhere: key -> where it is read instead (a TrainingArguments key
    in a file given to `llamafactory-cli chat`: "only `llamafactory-cli train` reads it")."""
    elsewhere = elsewhere or {}
    out: list[LintMessage] = []
    script_keys: list[str] = []
    rejects = f"{vocab.owner} rejects it (HfArgumentParser: '{PARSE_DICT_ERROR}')"
    for key in (k for k in data if isinstance(k, str)):
        if key in vocab.keys:
            warning = _removed_later(key, vocab)
            if warning:
                out.append(LintMessage(Severity.WARNING, "lint.training.removed_later", file, key, warning,
                                       fix=_replacement(file, key)[1]))
            continue
        if key in elsewhere:
            out.append(LintMessage(Severity.ERROR, "lint.training.unknown_key", file, key, f"unknown key: {rejects}",
                                   hint=elsewhere[key], fix=key_edit(file, key, "delete it", elsewhere[key])))
            continue
        last = _last_release_with(key)
        if last is not None and vocab.transformers_versions and Version(last) < _releases()[-1]:
            newer, fix = _replacement(file, key)
            out.append(LintMessage(Severity.ERROR, "lint.training.removed_key", file, key,
                                   f"removed from transformers after {last}: {rejects}",
                                   did_you_mean=newer if newer in vocab.keys else None, fix=fix))
            continue
        guess = known_keys.closest(key, vocab.keys - set(data))
        if guess:
            out.append(LintMessage(Severity.ERROR, "lint.training.unknown_key", file, key, f"unknown key: {rejects}",
                                   did_you_mean=guess, fix=key_edit(file, key, f'rename it to "{guess}"')))
        elif vocab.complete:
            out.append(LintMessage(Severity.ERROR, "lint.training.unknown_key", file, key, f"unknown key: {rejects}",
                                   fix=key_edit(file, key, "delete it",
                                                f'or check the spelling in the {vocab.owner.split(" (")[0]} docs')))
        else:
            script_keys.append(key)
    if script_keys:
        out.append(LintMessage(Severity.INFO, "lint.training.script_keys", file, "",
                               f"not TrainingArguments keys: {excerpt(', '.join(script_keys), 600)}; fine if the "
                               "training script's own argument dataclasses define them, otherwise "
                               f"'{PARSE_DICT_ERROR}'"))
    if vocab.note:
        out.append(LintMessage(Severity.INFO, "lint.training.keys_source", file, "",
                               f"keys checked against {vocab.owner}: {vocab.note}"))
    return out


def _removed_later(key: str, vocab: Vocabulary) -> str | None:
    """A key the judged release accepts but a later (or another allowed) release rejects."""
    last = _last_release_with(key)
    if last is None or Version(last) >= _releases()[-1] or key in vocab.own:
        return None
    failing = [v for v in vocab.transformers_versions if not _alive(key, v)]
    if failing:  # some release the owner allows rejects it
        return (f"transformers {failing[0]} and newer reject it (last accepted in {last}); {vocab.owner} "
                "allows those releases")
    if vocab.complete:  # LLaMA-Factory pins its transformers: a release it does not allow is not an upgrade path
        return None
    return f"accepted here, but transformers releases after {last} reject it: upgrading transformers breaks this file"
