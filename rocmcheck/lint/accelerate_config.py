"""lint_accelerate_config: an `accelerate config` YAML, checked by accelerate's own code (in a child process:
rocmcheck.lint.accelerate_child) and by what accelerate does not check itself: nested keys its launcher never
reads, the DeepSpeed config file it names (linted for accelerate launch), and the DeepSpeed values it hands the
HF Trainer, against the training arguments when they are known.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from rocmcheck.child import child_env, run_child
from rocmcheck.errors import BadInput
from rocmcheck.fixes import edit, note
from rocmcheck.lint import known_keys
from rocmcheck.lint.consumers import ACCELERATE_LAUNCH
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.hf_auto import TrainingSettings, resolve_auto
from rocmcheck.lint.loading import resolve_named_file
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.package_data import read_json
from rocmcheck.safe.files import read_bytes_capped
from rocmcheck.safe.text import excerpt

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO
CHILD_TIMEOUT_S = 120.0  # importing accelerate imports torch: 3-30 s on a loaded 2-core box
UNKNOWN_KEYS_ERROR = "had unknown keys"  # ClusterConfig.from_yaml_file's ValueError
# Where accelerate puts the values of its own keys in the DeepSpeed config it builds (DeepSpeedPlugin.__post_init__
# and set_mixed_precision), so a mismatch the HF Trainer finds there is shown at the key the file has.
ACCELERATE_KEY_FOR = {"gradient_accumulation_steps": "deepspeed_config.gradient_accumulation_steps",
                      "gradient_clipping": "deepspeed_config.gradient_clipping",
                      "zero_optimization.stage": "deepspeed_config.zero_stage",
                      "fp16.enabled": "mixed_precision", "bf16.enabled": "mixed_precision"}


@functools.lru_cache(maxsize=1)
def key_table() -> dict[str, Any]:
    """ClusterConfig's top-level keys per accelerate release (accelerate_keys.json, made by
    scripts/accelerate_key_history.py from the wheels of every supported release)."""
    return read_json("rocmcheck.lint", "accelerate_keys.json")


def installed_accelerate() -> Version | None:
    """The accelerate release this Python would import (None: not installed, or a version packaging cannot read)."""
    try:
        return Version(metadata.version("accelerate"))
    except (metadata.PackageNotFoundError, InvalidVersion, ValueError):
        return None


def removed_keys(data: dict, file: str, label: str, installed: Version | None = None) -> list[LintMessage]:
    """Top-level keys a supported accelerate release still reads and a later one refuses: a file written by an older
    `accelerate config` (`ipex_config`, gone from 1.13.0: huggingface/accelerate#3883) stops under the newer release
    with 'had unknown keys'. An error where the installed release (`installed`) refuses it, a warning where it still
    reads it (the file works until accelerate is upgraded), as DeepSpeed's removed keys are judged. Deleting the key
    is the fix for every release: the ones that still read it take its section's defaults."""
    table = key_table()
    newest = table["releases_read"][-1]
    out = []
    for key in (k for k in data if isinstance(k, str)):
        seen = table["history"].get(key)
        if seen is None or seen["last_seen"] == newest:
            continue
        later = table["releases_read"][table["releases_read"].index(seen["last_seen"]) + 1]
        rejecting = installed is not None and installed >= Version(later)
        where = (f"the installed accelerate {installed} refuses it" if rejecting else
                 f"accelerate {later} and newer no longer have it" + (f"; the installed {installed} still reads it"
                                                                       if installed is not None else ""))
        out.append(LintMessage(E if rejecting else W, "lint.accelerate.removed_key", file, key,
                               f"a key {where}: accelerate launch stops with 'The config file ... had unknown keys' "
                               f"under {later} and newer (accelerate {seen['first_seen']} to {seen['last_seen']} "
                               f"read it)", consumer=label,
                               fix=key_edit(file, key, "delete it", "`accelerate config` of the current releases "
                                                                    "writes no such key")))
    return out


def accelerate_findable() -> bool:
    return importlib.util.find_spec("accelerate") is not None


# One lint run asks the child once for all its accelerate configs (importing accelerate costs seconds): what it
# answered, by (the YAML's absolute path, the working directory it was read from, its content).
_ANSWERS: dict[tuple[str, str, str], tuple[dict[str, Any] | None, str]] = {}


def _key(path: Path, data: dict, cwd: str) -> tuple[str, str, str]:
    return str(path.resolve()), cwd, json.dumps(data, sort_keys=True, default=str)


def check_with_accelerate(items: list[tuple[Path, dict, str]]) -> None:
    """Ask accelerate's own code about every (path, config, working directory) in one child; the answers are kept
    for lint_accelerate_config."""
    todo = [item for item in items if _key(*item) not in _ANSWERS]
    for item in todo:
        if config_file_unusable(item[1], item[0]):
            _ANSWERS[_key(*item)] = (None, "its deepspeed_config_file is not a readable file")
    todo = [item for item in todo if _key(*item) not in _ANSWERS]
    if not todo:
        return
    if not accelerate_findable():
        for item in todo:
            _ANSWERS[_key(*item)] = (None, "accelerate is not installed in this Python")
        return
    env = child_env()
    env.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed's config classes need no accelerator
    request = {"items": [{"path": str(path.resolve()), "config": data, "cwd": cwd} for path, data, cwd in todo]}
    run = run_child("rocmcheck.lint.accelerate_child", request, CHILD_TIMEOUT_S + 10.0 * len(todo), env=env)
    answers = {e.get("path"): e for e in run.of("accelerate")}
    for path, data, cwd in todo:
        payload = answers.get(str(path.resolve()))
        if payload is None:
            _ANSWERS[_key(path, data, cwd)] = (None, "the accelerate check process gave no answer: "
                                                     f"{run.command.describe_failure()}")
        elif "skipped" in payload:
            _ANSWERS[_key(path, data, cwd)] = (None, str(payload["skipped"]))
        else:
            _ANSWERS[_key(path, data, cwd)] = (payload, "")


def _ask(path: Path, data: dict, cwd: str) -> tuple[dict[str, Any] | None, str]:
    check_with_accelerate([(path, data, cwd)])
    return _ANSWERS[_key(path, data, cwd)]


def working_directory(data: dict, path: Path) -> str:
    """Where accelerate will read deepspeed_config_file from: here, or the YAML's folder when the file exists only
    there (then lint_accelerate_config warns)."""
    section = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    value = section.get("deepspeed_config_file")
    if isinstance(value, str):
        target, why = resolve_config_file(value, path)
        if target is not None and why:
            return str(path.parent.resolve())
    return os.getcwd()


def resolve_config_file(value: str, yaml_file: Path) -> tuple[Path | None, str | None]:
    """accelerate opens deepspeed_config_file relative to the working directory of `accelerate launch`
    (HfDeepSpeedConfig reads the path as given): loading.resolve_named_file."""
    return resolve_named_file(value, yaml_file, "of accelerate launch", "launch")


def config_file_unusable(data: dict, path: Path) -> bool:
    """accelerate's own classes open deepspeed_config_file with a plain read: a FIFO there would block the child
    and /dev/zero would fill its memory. True when the config names one that is not a regular file the capped
    reader takes (lint reports it; the child is not asked)."""
    section = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    value = section.get("deepspeed_config_file")
    if data.get("distributed_type") != "DEEPSPEED" or not isinstance(value, str):
        return False
    target, _ = resolve_config_file(value, path)
    if target is None:
        return True
    try:
        read_bytes_capped(target, what="DeepSpeed config")
    except BadInput:
        return True
    return False


def lint_accelerate_config(data: dict, path: Path, *, deep: bool = True, training: TrainingSettings | None = None,
                           world_size: int | None = None, hidden_size: int | None = None) -> list[LintMessage]:
    """training: the training arguments the script will run with (a training file linted alongside, or lint's
    --micro-batch / --grad-accum), compared with the DeepSpeed values accelerate hands the HF Trainer."""
    file = str(path)
    label = ACCELERATE_LAUNCH.label
    out: list[LintMessage] = []

    def msg(severity: Severity, code: str, key_path: str, message: str, **kw: Any) -> LintMessage:
        return LintMessage(severity, code, file, key_path, message, consumer=label, **kw)

    ds_section = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    ds_file_value = ds_section.get("deepspeed_config_file")
    ds_target: Path | None = None
    cwd = working_directory(data, path)
    if data.get("distributed_type") == "DEEPSPEED" and isinstance(ds_file_value, str):
        ds_target, why = resolve_config_file(ds_file_value, path)
        if ds_target is None:
            out.append(msg(E, "lint.accelerate.deepspeed_config_missing", "deepspeed_config.deepspeed_config_file",
                           f"DeepSpeed config '{excerpt(ds_file_value)}' not found"
                           + (f" ({why})" if why else f" (looked in the working directory {excerpt(cwd)} and next "
                                                       f"to {excerpt(path.name)})")
                           + ": accelerate launch stops when the training process builds its DeepSpeed plugin",
                           fix=key_edit(file, "deepspeed_config.deepspeed_config_file",
                                        "point it at an existing DeepSpeed JSON file")))
        elif why:
            out.append(msg(W, "lint.accelerate.deepspeed_config_relative", "deepspeed_config.deepspeed_config_file",
                           why, fix=key_edit(file, "deepspeed_config.deepspeed_config_file",
                                             f"set it to {excerpt(str(ds_target.resolve()))}",
                                             "an absolute path is found from any working directory")))
    processes = data.get("num_processes")
    if data.get("distributed_type") == "NO" and isinstance(processes, int) and processes > 1:
        out.append(msg(W, "lint.accelerate.num_processes_unused", "num_processes",
                       f"distributed_type NO starts one process (accelerate's simple launcher): num_processes "
                       f"{processes} is not used",
                       fix=key_edit(file, "distributed_type", "set it to MULTI_GPU",
                                    f"or set num_processes to 1; MULTI_GPU runs {processes} processes")))

    removed = removed_keys(data, file, label, installed_accelerate())
    out.extend(removed)
    # A deepspeed_config_file that is not a readable file is reported (above, or by lint_deepspeed_config below)
    # and never handed to accelerate's own classes (config_file_unusable).
    file_unusable = config_file_unusable(data, path)
    payload, why = _ask(path, data, cwd) if deep and not file_unusable else (None, "deep validation turned off")
    effective: dict | None = None
    if payload is None:
        if deep and not file_unusable:
            out.append(msg(I, "lint.accelerate.deep_skipped", "",
                           f"validation by accelerate's own config classes skipped: {why}; its keys and values were "
                           "not checked", fix=note("install accelerate in this Python (pip install accelerate)")))
    else:
        version = payload.get("accelerate_version", "?")
        said = _from_accelerate(payload, data, file, version, label)
        for m in removed:  # the installed release refuses it too: one message, with both reasons
            same = [s for s in said if s.key_path == m.key_path and s.code == "lint.accelerate.unknown_key"]
            if same:
                m.detail = m.detail + same[0].detail
                said = [s for s in said if s is not same[0]]
            said = [s for s in said if not s.key_path.startswith(m.key_path + ".")]  # inside the refused section
        out.extend(said)
        effective = (payload.get("deepspeed") or {}).get("config")

    if ds_target is not None:
        try:
            found = lint_deepspeed_config(ds_target, world_size=world_size, training=training, deep=deep,
                                          hidden_size=hidden_size, consumer=ACCELERATE_LAUNCH)
        except BadInput as exc:
            out.append(msg(E, "lint.accelerate.deepspeed_config_unreadable", "deepspeed_config.deepspeed_config_file",
                           str(exc), fix=note(f"repair or replace the DeepSpeed config {excerpt(ds_target)}")))
        else:
            out.extend(found)
    elif isinstance(effective, dict) and training is not None:
        out.extend(_mismatches(effective, training, file, label))
    return out


def _from_accelerate(payload: dict, data: dict, file: str, version: str, label: str) -> list[LintMessage]:
    out: list[LintMessage] = []
    fields = set(payload.get("cluster_fields") or [])
    said = f"accelerate {version}"
    for problem in payload.get("problems") or []:
        text, paths = str(problem.get("message", "")), [str(p) for p in problem.get("key_paths") or []] or [""]
        words = f"{said}: {text}"
        if problem.get("stage") == "load" and UNKNOWN_KEYS_ERROR in text:
            for key in paths:
                guess = known_keys.closest(key, fields - set(data))
                out.append(LintMessage(E, "lint.accelerate.unknown_key", file, key,
                                       "unknown key: accelerate launch stops with 'The config file ... had unknown "
                                       "keys'", did_you_mean=guess, consumer=label, detail=[words],
                                       fix=key_edit(file, key, f'rename it to "{guess}"' if guess else "delete it")))
        elif "will be ignored" in text:
            for key in paths:
                out.append(LintMessage(E, "lint.accelerate.config_file_conflict", file, key,
                                       "set next to deepspeed_config_file: accelerate launch stops with 'When using "
                                       "`deepspeed_config_file`, the following accelerate config variables will be "
                                       "ignored'", consumer=label, detail=[words],
                                       fix=key_edit(file, key, "delete it", "write it in the DeepSpeed config file "
                                                                            "instead")))
        elif paths == ["num_processes"] and problem.get("severity") == "warning":
            out.append(LintMessage(W, "lint.accelerate.num_processes_missing", file, "num_processes",
                                   "no num_processes: accelerate launch stops with 'You need to manually pass in "
                                   "`--num_processes` using this config yaml' unless its command line gives it",
                                   consumer=label, detail=[words],
                                   fix=edit(file, "add num_processes: <GPUs in all>", "or pass --num_processes")))
        else:
            severity = E if problem.get("severity") == "error" else W
            code = "lint.accelerate.rejected" if severity is E else "lint.accelerate.says"
            out.append(LintMessage(severity, code, file, paths[0],
                                   f"{said} " + ("stops: " if severity is E else "says: ") + text,
                                   consumer=label, detail=[words],
                                   fix=key_edit(file, paths[0], "change it as accelerate's message says",
                                                "https://huggingface.co/docs/accelerate/basic_tutorials/launch")))
    for item in payload.get("ignored") or []:
        key_path = str(item.get("key_path", ""))
        section, _, key = key_path.partition(".")
        guess = known_keys.closest(key, set(item.get("suggestions") or []) - set(data.get(section) or {}))
        severity = E if guess else W
        out.append(LintMessage(severity, "lint.accelerate.ignored_key", file, key_path,
                               "accelerate launch reads no such key: it is ignored without a word"
                               + (f", so '{guess}' is not applied" if guess else ""),
                               did_you_mean=guess, consumer=label,
                               fix=key_edit(file, key_path, f'rename it to "{guess}"' if guess else "delete it")))
    return out


def _mismatches(effective: dict, training: TrainingSettings, file: str, label: str) -> list[LintMessage]:
    """The DeepSpeed config accelerate built from the inline keys, as the HF Trainer checks it
    (HfTrainerDeepSpeedConfig.trainer_config_process through propagate_args_to_deepspeed)."""
    out = []
    for key_path, ds_value, hf_name, hf_value in resolve_auto(effective, training).mismatches:
        where = ACCELERATE_KEY_FOR.get(key_path, "deepspeed_config")
        if where == "mixed_precision":
            fix = key_edit(file, where, "set it to the run's precision (bf16, fp16 or no)")
        else:
            fix = key_edit(file, where, "delete it", "accelerate then passes \"auto\", which the HF Trainer fills")
        out.append(LintMessage(E, "lint.hf.mismatch", file, where,
                               f"{excerpt(repr(ds_value))} in the DeepSpeed config accelerate builds ({key_path}) but "
                               f"{hf_name}={excerpt(repr(hf_value))} in {training.source}: the HF Trainer under "
                               "accelerate launch stops with 'Please correct the following DeepSpeed config values "
                               "that mismatch TrainingArguments values'", consumer=label, fix=fix))
    return out
