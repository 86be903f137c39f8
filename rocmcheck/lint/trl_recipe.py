"""lint_trl_recipe: a TRL recipe (the YAML of `trl sft|dpo|grpo|... --config FILE`) judged by the installed TRL's own
parser, in a child process (rocmcheck.lint.trl_child: importing TRL imports torch).

TRL reads a --config file its own way (TrlParser.set_defaults_with_config), not with HfArgumentParser.parse_dict:
a key none of the trainer's classes define is not "Some keys are not used by the HfArgumentParser". `trl COMMAND
--config` hands such keys to accelerate launch (trl/cli/commands/training.py), which takes its own options
(`num_processes`) and stops with "unrecognized arguments" on the rest; TRL's scripts run directly drop them
(fail_with_unknown_args=False), so a misspelt key is a setting silently not applied. Hence:
- a key TRL's classes do not define that is close to one they do: an error with a "did you mean";
- other such keys: one note (a script of your own may define them: `--script` makes the parser whole, and then they
  are errors unless the script defines them); accelerate launch's own options are fine;
- the values, by TRL's own parser: argparse's type conversion and the dataclasses' own checks (an unknown
  lr_scheduler_type, GRPO's batch divisibility), the first error in its own words. A check that depends on the
  run's process count is judged with `--gpus`, else with the file's own `num_processes` (which `trl COMMAND
  --config` hands to accelerate launch); with neither, a warning says which counts fail.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from rocmcheck.child import child_env, run_child
from rocmcheck.fixes import note
from rocmcheck.lint import known_keys
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.safe.text import excerpt

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO
CHILD_TIMEOUT_S = 180.0  # importing TRL (transformers, torch, datasets) took 20-30 s on a loaded 2-core CPU box
TRL_PYTHON_ENV = "ROCMCHECK_TRL_PYTHON"
ACCELERATE_REFUSES = "accelerate launch: error: unrecognized arguments"


def trl_python() -> str | None:
    """ROCMCHECK_TRL_PYTHON (a Python of the environment that will train, with trl), else this Python if it can
    import trl."""
    explicit = os.environ.get(TRL_PYTHON_ENV)
    if explicit:
        return explicit
    return sys.executable if importlib.util.find_spec("trl") else None


@functools.lru_cache(maxsize=64)
def _ask_cached(config_json: str, processes: int | None, python: str) -> tuple[str, str]:
    env = child_env()
    env.setdefault("DS_ACCELERATOR", "cpu")
    request = {"config": json.loads(config_json), "command": None, "processes": processes}
    run = run_child("rocmcheck.lint.trl_child", request, CHILD_TIMEOUT_S, env=env, python=python)
    payload = run.last("trl")
    if payload is None:
        return "", f"the TRL check process gave no answer: {run.command.describe_failure()}"
    if "skipped" in payload:
        return "", str(payload["skipped"])
    return json.dumps(payload), ""


def ask_trl(data: dict, processes: int | None = None) -> tuple[dict[str, Any] | None, str]:
    """TRL's own parser's answer for the recipe (once per content, process count and Python), or (None, why)."""
    python = trl_python()
    if python is None:
        return None, "TRL is not installed in this Python (set ROCMCHECK_TRL_PYTHON to a Python that has it)"
    text, why = _ask_cached(json.dumps(data, sort_keys=True, default=str), processes, python)
    return (json.loads(text), "") if text else (None, why)


def lint_trl_recipe(data: dict, path: Path, *, label: str, world_size: int | None = None,
                    script: tuple[str, frozenset[str]] | None = None) -> list[LintMessage]:
    """script: (the training script's name, the arguments it defines) when named (rocmcheck.lint.script_args)."""
    file = str(path)

    def msg(severity: Severity, code: str, key_path: str, message: str, **kw: Any) -> LintMessage:
        return LintMessage(severity, code, file, key_path, message, consumer=label, **kw)

    processes, counted = world_size, "--gpus"
    in_file = data.get("num_processes")
    if processes is None and isinstance(in_file, int) and not isinstance(in_file, bool) and in_file > 0:
        processes, counted = in_file, "num_processes in the file"  # `trl COMMAND --config` hands it to accelerate
    payload, why = ask_trl(data, processes)
    if payload is None:
        return [msg(W, "lint.trl.not_asked", "", f"not judged: TRL's own parser could not be asked: {excerpt(why)}",
                    fix=note("install trl where the recipe will run, or point ROCMCHECK_TRL_PYTHON at that Python"))]
    command, version = str(payload.get("command")), str(payload.get("trl_version"))
    owner = f"TRL {version}'s `trl {command}` classes"
    keys = set(payload.get("keys") or [])
    handed = payload.get("accelerate_refuses")  # None: this TRL's CLI hands no key to accelerate launch
    refused = set(handed or [])
    out: list[LintMessage] = []
    leftover = []
    if handed is None:  # a TRL whose CLI hands nothing to accelerate launch: its scripts drop the key
        fate, others = "TRL drops it, so the setting is not applied", "TRL drops them"
    else:
        fate = (f"`trl {command} --config` hands it to accelerate launch, which stops ('{ACCELERATE_REFUSES}'); "
                f"TRL's {command}.py run directly drops it, so the setting is not applied")
        others = f"`trl {command} --config` stops ('{ACCELERATE_REFUSES}')"
    for key in (str(k) for k in payload.get("unread") or []):
        if handed is not None and key not in refused:
            continue  # an option of accelerate launch (num_processes, accelerate_config): `trl` hands it over
        guess = known_keys.closest(key, keys - set(data))
        if guess:
            out.append(msg(E, "lint.trl.unknown_key", key, f"unknown key: {owner} do not define it: {fate}",
                           did_you_mean=guess, fix=key_edit(file, key, f'rename it to "{guess}"')))
        elif script is not None and key not in script[1]:
            out.append(msg(E, "lint.trl.unknown_key", key, f"unknown key: neither {owner} nor "
                           f"{excerpt(script[0])} define it: {fate}", fix=key_edit(file, key, "delete it")))
        elif script is None:
            leftover.append(key)
    if leftover:
        out.append(msg(I, "lint.trl.script_keys", "", f"keys {owner} do not define: {excerpt(', '.join(leftover), 600)}"
                       f"; fine if your own training script defines them (name it with --script), otherwise {others}"))
    problem = payload.get("problem")
    if isinstance(problem, dict):
        key, words = str(problem.get("key") or ""), str(problem.get("message") or "")
        fails, works = problem.get("fails_with"), problem.get("works_with")
        if works is not None:
            out.append(msg(W, "lint.trl.processes", key,
                           f"depends on the run's process count: TRL {version} stops with "
                           f"{', '.join(map(str, fails or [1]))} processes and starts with {works}: {excerpt(words)}",
                           detail=[f"TRL {version}: {words}"],
                           fix=note("pass the run's GPU count with --gpus N to judge it, or change the values the "
                                    "message names")))
        else:
            count = f" with {processes} processes ({counted})" if processes else ""
            out.append(msg(E, "lint.trl.rejected", key, f"`trl {command}` stops{count}: {excerpt(words)}",
                           detail=[f"TRL {version}: {words}"],
                           fix=key_edit(file, key, "change it as TRL's message says") if key
                           else note("change the file as TRL's message says")))
    return out
