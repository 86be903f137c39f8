"""Child process: an accelerate config YAML checked by the installed accelerate's own code, as `accelerate launch
--config_file FILE script.py` reads it, without launching anything.

Run as `python -m rocmcheck.lint.accelerate_child --request-file FILE`, the request being {"items": [{"path": the
YAML, "config": its mapping, "cwd": the folder relative paths are read from}, ...]}. Importing accelerate imports
torch (seconds), so rocmcheck never does it in its own process, and one child checks all the configs of a lint run.
Answers one "accelerate" event per item (with its "path") on rocmcheck/child.py's channel.

What runs, in accelerate's own code:
1. accelerate.commands.config.config_args.load_config_from_file: ClusterConfig.from_yaml_file (its unknown-key
   check, its enum values). A file with unknown keys is checked again without them, so the rest is still judged.
2. accelerate.commands.launch: launch_command_parser + _validate_launch_command (the config merged into the
   launcher's arguments), then the environment the launcher would hand the training processes
   (accelerate.utils.launch: prepare_deepspeed_cmd_env, prepare_multi_gpu_env or prepare_simple_launcher_cmd_env).
3. In that environment, the plugin the training process builds: DeepSpeedPlugin() and set_mixed_precision (the
   deepspeed_config_file checks: "When using `deepspeed_config_file`, the following accelerate config variables
   will be ignored"), or FullyShardedDataParallelPlugin().
Two things are the training machine's, not the file's, and are stood in for: whether the launcher's port is in use
here (taken as free) and the GPU FSDP's sync_module_states would place parameters on (torch's own device queries
answer "one CUDA/ROCm GPU" while the FSDP plugin is built: a_gpu_stood_in; no device is touched).
Nested keys the launcher does not read (deepspeed_config / fsdp_config keys with no launcher argument) are
ignored by accelerate without a word; they are listed with the launcher's own argument names to suggest from.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import math
import os
import re
import warnings
from collections.abc import Iterator
from typing import Any
from unittest import mock

from rocmcheck.child import leave, open_channel, read_request
from rocmcheck.safe.scratch_folders import scratch_folder

# How _validate_launch_command turns a nested key into a launcher argument (accelerate/commands/launch.py: the
# defaults loop): an fsdp_config key not starting "fsdp" gets "fsdp_", fp8_config "fp8_", dynamo_config "dynamo_";
# the others stay as written. Section -> (the start that is left alone, the prefix added otherwise).
PREFIXES = {"fsdp_config": ("fsdp", "fsdp_"), "fp8_config": ("fp8", "fp8_"), "dynamo_config": ("dynamo_", "dynamo_")}
# The launcher's argument group each nested section feeds (launch_command_parser's group titles).
GROUPS = {"deepspeed_config": "DeepSpeed Arguments", "fsdp_config": "FSDP Arguments",
          "megatron_lm_config": "Megatron-LM Arguments", "mpirun_config": "MPI Arguments"}
# The deepspeed_config keys the deepspeed_config_file check lets through (DeepSpeedPlugin._deepspeed_config_checks
# names the others); used only when accelerate's message cannot be read for its list.
WITH_CONFIG_FILE = {"deepspeed_config_file", "zero3_init_flag", "deepspeed_multinode_launcher", "deepspeed_hostfile",
                    "deepspeed_exclusion_filter", "deepspeed_inclusion_filter", "deepspeed_moe_layer_cls_names"}
PLACEHOLDER_PROCESSES = "2"  # --num_processes when the file leaves it to the command line


class _Unsupported(Exception):
    """accelerate's launcher is not the one this child knows: the check is skipped, never a verdict on the file."""


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _launcher_vocabulary() -> tuple[set[str], dict[str, list[str]]]:
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    dests = {a.dest for a in parser._actions}
    groups = {g.title: sorted(a.dest for a in g._group_actions) for g in parser._action_groups if g.title}
    return dests, groups


def ignored_nested_keys(data: dict, dests: set[str], groups: dict[str, list[str]]) -> list[dict[str, Any]]:
    out = []
    for section, value in data.items():
        if not isinstance(value, dict) or not str(section).endswith("_config"):
            continue
        kept, prefix = PREFIXES.get(section, ("", ""))
        group = groups.get(GROUPS.get(section, ""), [])
        for key in value:
            read_as = str(key) if not prefix or str(key).startswith(kept) else prefix + str(key)
            if read_as not in dests:
                out.append({"key_path": f"{section}.{key}", "suggestions": group})
    return out


def _ignored_list(message: str) -> list[str] | None:
    """The names accelerate's deepspeed_config_file message lists ("... will be ignored: ['a', 'b']")."""
    m = re.search(r"will be ignored: (\[[^\]]*\])", message)
    try:
        names = ast.literal_eval(m.group(1)) if m else None
    except (ValueError, SyntaxError):
        return None
    return [str(n) for n in names] if isinstance(names, list) else None


def _keys_named(message: str, data: dict) -> list[str]:
    """The file's key paths a message names (accelerate's errors name arguments: --fsdp_sync_module_states)."""
    found = []
    for section, value in data.items():
        keys = value.items() if isinstance(value, dict) else ()
        for key, _ in keys:
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(str(key))}(?![A-Za-z0-9_])", message):
                found.append(f"{section}.{key}")
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(str(section))}(?![A-Za-z0-9_])", message):
            found.append(str(section))
    return found


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


@contextlib.contextmanager
def a_gpu_stood_in() -> Iterator[None]:
    """While it lasts, torch's own device queries answer as on a machine with one CUDA/ROCm GPU (torch's ROCm build
    answers through torch.cuda too): the seam every accelerate release asks through, whatever helper of its own
    it asks with (1.3 to 1.15: is_cuda_available() -> torch.cuda.is_available(), then torch.cuda.current_device();
    1.16: get_torch_accelerator_backend() -> torch.accelerator.current_accelerator(), then
    torch.cuda.is_available()). FSDP's sync_module_states only names the device parameters will be placed on
    (param_init_fn); nothing is placed, and no CUDA call runs. Only torch's public functions are replaced, and only
    for the plugin's construction."""
    import torch

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: True))
        stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: 0))
        accelerator = getattr(torch, "accelerator", None)  # torch 2.6 and newer
        if accelerator is not None and hasattr(accelerator, "current_accelerator"):
            stack.enter_context(mock.patch.object(accelerator, "current_accelerator",
                                                  lambda *a, **k: torch.device("cuda")))
        if accelerator is not None and hasattr(accelerator, "is_available"):
            stack.enter_context(mock.patch.object(accelerator, "is_available", lambda: True))
        yield


def check(path: str, data: dict) -> dict[str, Any]:
    """The config at `path` (parsed as `data`) judged by accelerate; a copy without its unknown keys, when one is
    needed, is written in a temporary folder that is removed afterwards."""
    with scratch_folder("accelerate") as folder:
        return _check(path, data, str(folder))


def _check(path: str, data: dict, folder: str) -> dict[str, Any]:
    import accelerate
    from accelerate.commands.config import config_args
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin
    from accelerate.utils import launch as launch_utils

    launch_utils.is_port_in_use = lambda *a, **k: False  # the training machine's port, not the file's

    problems: list[dict[str, Any]] = []
    result: dict[str, Any] = {"accelerate_version": accelerate.__version__, "problems": problems,
                              "cluster_fields": sorted(config_args.ClusterConfig.__dataclass_fields__)}

    def problem(severity: str, key_paths: list[str], message: str, stage: str) -> None:
        problems.append({"severity": severity, "key_paths": key_paths, "message": message, "stage": stage})

    dests, groups = _launcher_vocabulary()
    result["ignored"] = ignored_nested_keys(data, dests, groups)

    read_path = path
    try:
        config_args.load_config_from_file(read_path)
    except ValueError as exc:
        fields = set(config_args.ClusterConfig.__dataclass_fields__)
        processed = config_args.BaseConfig.process_config(copy.deepcopy(data)) if "distributed_type" in data else {}
        extra = sorted(set(processed) - fields)
        if not extra:
            problem("error", _keys_named(str(exc), data) or ["distributed_type"], _text(exc), "load")
            return result
        problem("error", extra, _text(exc), "load")
        import yaml

        read_path = os.path.join(folder, "without-unknown-keys.yaml")
        with open(read_path, "w", encoding="utf-8") as out:
            yaml.safe_dump({k: v for k, v in data.items() if k not in extra}, out)
        try:
            config_args.load_config_from_file(read_path)
        except Exception as again:
            problem("error", _keys_named(str(again), data) or ["distributed_type"], _text(again), "load")
            return result
    except Exception as exc:
        problem("error", _keys_named(str(exc), data) or ["distributed_type"], _text(exc), "load")
        return result

    defaults = config_args.load_config_from_file(read_path)
    argv = ["--config_file", read_path]
    if defaults.num_processes == -1:
        problem("warning", ["num_processes"], "ValueError: You need to manually pass in `--num_processes` using "
                "this config yaml.", "launch")
        argv += ["--num_processes", PLACEHOLDER_PROCESSES]
    saved = dict(os.environ)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            args = launch_command_parser().parse_args(argv + ["train.py"])
            validated = _validate_launch_command(args)
            if not (isinstance(validated, tuple) and len(validated) == 3):  # another accelerate's launcher
                raise _Unsupported(f"accelerate {accelerate.__version__}'s _validate_launch_command returns "
                                   f"{type(validated).__name__}, not (args, defaults, mp_from_config_flag)")
            args, defaults, from_config = validated
            result.update(distributed_type=str(getattr(defaults.distributed_type, "value", defaults.distributed_type)),
                          mixed_precision=args.mixed_precision, num_processes=args.num_processes,
                          num_machines=args.num_machines)
            if args.use_deepspeed and not args.cpu:
                fields = list(defaults.deepspeed_config.keys()) + (["mixed_precision"] if from_config else [])
                args.deepspeed_fields_from_accelerate_config = ",".join(fields)
                _, env = launch_utils.prepare_deepspeed_cmd_env(args)
                os.environ.clear()
                os.environ.update(env)
                stage = "deepspeed"
                try:
                    plugin = DeepSpeedPlugin()
                    stage = "mixed_precision"
                    plugin.set_mixed_precision(args.mixed_precision)
                except Exception as exc:
                    text = _text(exc)
                    if "will be ignored" in text:
                        named = set(_ignored_list(text) or [])
                        ds_keys = list(defaults.deepspeed_config)
                        keys = [f"deepspeed_config.{k}" for k in ds_keys
                                if (k in named if named else k not in WITH_CONFIG_FILE)]
                        if from_config and (not named or "mixed_precision" in named):
                            keys.append("mixed_precision")
                        problem("error", keys, text, "deepspeed")
                    elif stage == "mixed_precision":
                        problem("error", ["mixed_precision"], text, stage)
                    elif "ZeRO optimization" in text or "deepspeed config" in text.lower():
                        problem("error", ["deepspeed_config.deepspeed_config_file"], text, stage)
                    else:
                        problem("error", _keys_named(text, data) or ["deepspeed_config"], text, stage)
                else:
                    config = copy.deepcopy(plugin.deepspeed_config)
                    config.pop("steps_per_print", None)  # accelerate sets it to infinity (no logging)
                    result["deepspeed"] = {"config": _json_safe(config),
                                           "from_file": isinstance(defaults.deepspeed_config.get(
                                               "deepspeed_config_file"), str)}
            elif args.use_fsdp and not args.cpu:
                env = launch_utils.prepare_multi_gpu_env(args)
                os.environ.clear()
                os.environ.update(env)
                with a_gpu_stood_in():
                    plugin = FullyShardedDataParallelPlugin()
                result["fsdp"] = {"version": getattr(plugin, "fsdp_version", 1)}  # FSDP2 came in accelerate 1.6
            elif args.multi_gpu and not args.cpu:
                launch_utils.prepare_multi_gpu_env(args)
            else:
                launch_utils.prepare_simple_launcher_cmd_env(args)
        for w in caught:
            text = str(w.message)
            if "Port" in text and "already in use" in text:
                continue
            problem("warning", _keys_named(text, data), text, "warning")
    except _Unsupported:
        raise
    except Exception as exc:
        problem("error", _keys_named(str(exc), data) or ["distributed_type"], _text(exc), "launch")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return result


def main(argv: list[str] | None = None) -> int:
    request = read_request(argv, prog="python -m rocmcheck.lint.accelerate_child")
    channel = open_channel()  # accelerate and DeepSpeed log to stdout: keep it off the answer
    items = [i for i in request.get("items") or [] if isinstance(i, dict) and isinstance(i.get("path"), str)]
    try:
        import accelerate  # noqa: F401  (imports torch; that is why this is a child process)
    except Exception as exc:  # not installed, or broken (a torch it cannot load)
        for item in items:
            channel.emit("accelerate", path=item["path"], skipped=f"import accelerate failed: {_text(exc)}")
        return 0
    home = os.getcwd()
    for item in items:
        try:
            os.chdir(item.get("cwd") or home)
            result = check(item["path"], item.get("config") or {})
        except Exception as exc:  # accelerate's code changed under us: say so, never a traceback on the channel
            result = {"skipped": f"the accelerate check failed: {_text(exc)}"}
        finally:
            os.chdir(home)
        channel.emit("accelerate", path=item["path"], **result)
    return 0


if __name__ == "__main__":
    leave(main())
