"""Child process: a TRL recipe (the YAML of `trl sft|dpo|grpo|... --config FILE`) read by the installed TRL's own
parser, without training or launching anything.

Run as `python -m rocmcheck.lint.trl_child --request-file FILE`, the request being {"config": the YAML's mapping,
"command": "sft"|"dpo"|... or null}. Importing TRL imports transformers and torch (seconds), so rocmcheck never does
it in its own process. Answers one "trl" event on rocmcheck/child.py's channel.

What runs, in TRL's own code:
1. the trainer's parser, as `trl COMMAND` builds it: trl.scripts.COMMAND.make_parser() (a TrlParser over the
   trainer's ScriptArguments, its Config and ModelConfig). With no command named, each trainer's parser is asked and
   the one that leaves the fewest of the file's keys unread is taken (SFT first on a tie).
2. TrlParser.set_defaults_with_config(**config), TRL's own reading of a `--config` file: the keys none of the
   trainer's classes define come back unread. `trl COMMAND --config` (trl/cli/commands/training.py) hands them to
   accelerate launch's parser, which takes its own options (`num_processes`, `accelerate_config`, ...) and stops
   with "unrecognized arguments" on the rest; TRL's scripts run directly drop them (fail_with_unknown_args=False).
   Both are reported: which keys TRL's classes do not define, and which of those accelerate launch refuses.
3. parse_args_into_dataclasses(args=[]): argparse's own type conversion of the values (a string where a number is
   meant) and the dataclasses' own checks (TrainingArguments.__post_init__: an unknown lr_scheduler_type,
   save_steps that is not a multiple of eval_steps, ...), the first error in its own words.
One thing is the training machine's, not the file's: whether this machine's device runs bf16 (TrainingArguments
refuses bf16 without a GPU that supports it). The dataclasses are built with `use_cpu: true` when the file leaves
use_cpu unset, the setting under which TrainingArguments skips that device check and touches no device; nothing else
it checks depends on it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
from collections.abc import Iterator
from typing import Any
from unittest import mock

from rocmcheck.child import leave, open_channel, read_request

# The trainers `trl` runs with a --config file (trl/cli/main.py: TrainingCommand names), SFT first: the most common,
# and the one taken when several parsers read a file equally well.
COMMANDS = ("sft", "dpo", "grpo", "kto", "reward", "rloo")
# Process counts tried when the run's is not known (one GPU to eight nodes of eight).
PROCESS_COUNTS = (2, 4, 8, 16, 32, 64)
_ARGUMENT = re.compile(r"argument (?:--)?([A-Za-z0-9_]+)")
# Settings TRL's own checks name in words, not by their key (trl/trainer/grpo_config.py __post_init__: "must be
# divisible by the number of generations", "the number of generations used for evaluation").
PHRASES = {"number of generations": "num_generations"}


def _parser(command: str) -> Any:
    module = importlib.import_module(f"trl.scripts.{command}")
    return module.make_parser(prog=f"trl {command}")


def _unread(command: str, config: dict[str, Any]) -> tuple[Any, list[str]]:
    parser = _parser(command)
    remaining = parser.set_defaults_with_config(**config)
    return parser, [item[2:] for item in remaining[::2]]  # ["--key", "value", ...] -> keys


def _accelerate_refuses(keys: list[str], config: dict[str, Any]) -> list[str] | None:
    """The unread keys accelerate launch's parser refuses when `trl COMMAND --config` hands them over (its
    trl/cli/accelerate_launcher.py: "unrecognized arguments"); None when the installed TRL hands nothing over. Each
    key is asked alone: after the first option it does not know, argparse takes the rest for the script's
    arguments."""
    try:
        importlib.import_module("trl.cli.accelerate_launcher")
        from accelerate.commands.launch import launch_command_parser
    except ImportError:
        return None
    parser = launch_command_parser()
    refused = []
    for key in keys:
        option = "--config_file" if key == "accelerate_config" else f"--{key}"  # TRL renames that one first
        _, unknown = parser.parse_known_args([option, str(config[key]), "train.py"])
        if unknown:
            refused.append(key)
    return refused


def _key_in(message: str, config: dict[str, Any]) -> str:
    """The file's key an error message is about: the argument argparse names, else a key or a value it quotes."""
    found = _ARGUMENT.search(message)
    if found and found.group(1) in config:
        return found.group(1)
    for phrase, key in PHRASES.items():
        if phrase in message:
            return key
    for key in sorted(config, key=len, reverse=True):
        if re.search(rf"\b{re.escape(str(key))}\b", message):
            return str(key)
    for key, value in config.items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) \
                and re.search(rf"(?<![\w.]){re.escape(str(value))}(?![\w.])", message):
            return str(key)
    return ""


@contextlib.contextmanager
def _processes(count: int) -> Iterator[None]:
    """While it lasts, TrainingArguments.world_size (its public property: "the number of processes used in
    parallel", read by the trainer configs' own checks, e.g. GRPO's batch divisibility) answers `count`."""
    from transformers import TrainingArguments

    with mock.patch.object(TrainingArguments, "world_size", new=property(lambda self: count)):
        yield


def _built(parser: Any, config: dict[str, Any], processes: int) -> dict[str, str] | None:
    """The first error building the dataclasses raises, in its words, with the key it is about; None when they
    build."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), _processes(processes):
            parser.parse_args_into_dataclasses(args=[])
    except SystemExit:  # argparse: "trl sft: error: argument --x: invalid int value: 'eight'" on stderr
        lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
        text = lines[-1] if lines else "the parser stopped"
        return {"key": _key_in(text, config), "message": text}
    except Exception as exc:  # the dataclasses' own checks (__post_init__)
        text = f"{type(exc).__name__}: {exc}"
        return {"key": _key_in(str(exc), config), "message": text}
    return None


def check(config: dict[str, Any], command: str | None, processes: int | None = None) -> dict[str, Any]:
    """processes: the run's process count (lint's --gpus), when known. When not, the dataclasses are built for one
    process; an error that goes away with more (GRPO: the global batch must be divisible by num_generations) is
    answered with the counts that fail and the first that works, for the parent to say it depends on them."""
    import trl

    config = dict(config)
    config.pop("env", None)  # TrlParser sets these environment variables and reads no key from them
    candidates = [command] if command else list(COMMANDS)
    best: tuple[str, Any, list[str]] | None = None
    for name in candidates:
        try:
            parser, unread = _unread(name, config)
        except (ImportError, AttributeError):  # a trainer this TRL does not have, or no make_parser
            continue
        if best is None or len(unread) < len(best[2]):
            best = (name, parser, unread)
    if best is None:
        raise RuntimeError(f"TRL {trl.__version__} has no trainer script with make_parser "
                           f"({', '.join(candidates)}): its `trl COMMAND --config` is not the one this check knows")
    name, parser, unread = best
    refused = _accelerate_refuses(unread, config)
    if "use_cpu" not in config and any(action.dest == "use_cpu" for action in parser._actions):
        parser.set_defaults_with_config(use_cpu=True)
    problem = _built(parser, config, processes or 1)
    if problem is not None and processes is None:
        fails = [1]
        for count in PROCESS_COUNTS:
            if _built(parser, config, count) is None:
                problem["works_with"] = count
                break
            fails.append(count)
        problem["fails_with"] = fails
    known = sorted({a.dest for a in parser._actions if a.dest not in (argparse.SUPPRESS, "help")})
    return {"trl_version": trl.__version__, "command": name, "unread": unread, "accelerate_refuses": refused,
            "problem": problem, "keys": known, "processes": processes}


def main(argv: list[str] | None = None) -> int:
    request = read_request(argv, prog="python -m rocmcheck.lint.trl_child")
    channel = open_channel()
    config = request.get("config") if isinstance(request.get("config"), dict) else {}
    try:
        processes = request.get("processes")
        result = check(config, request.get("command"), processes if isinstance(processes, int) else None)
    except Exception as exc:  # not installed, or broken (a torch it cannot load)
        result = {"skipped": f"{type(exc).__name__}: {exc}"}
    channel.emit("trl", **result)
    return 0


if __name__ == "__main__":
    leave(main())
