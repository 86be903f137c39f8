"""Child process: validate a DeepSpeed config with the installed DeepSpeed's own config classes.

Run as `python -m rocmcheck.lint.deepspeed_child --request '{"config": {...}, "world_size": N}'`.
Importing deepspeed imports torch (about 1.7 s on a CPU box), so rocmcheck never does it in its own
process; the answer is one "validated" event on rocmcheck/child.py's channel (DeepSpeed's own log
lines, printed to stdout, go to stderr there).

What it does, in DeepSpeed's own code:
1. each top-level section alone through DeepSpeedConfig._initialize_params, so every strict
   (pydantic, extra="forbid") section reports all of its errors, not only the first one;
2. the whole config (failing sections left out) through DeepSpeedConfig(...), with the data
   parallel world size patched in (without a process group DeepSpeed assumes 1), which runs the
   removed-key, batch and bf16/fp16 assertions;
3. records which top-level keys DeepSpeedConfig looks up, so the parent knows the installed
   release's vocabulary.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import types
from typing import Any

from rocmcheck.child import leave, open_channel, read_request

BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


class _KeysView:
    def __init__(self, owner: "RecordingDict") -> None:
        self._owner = owner

    def __contains__(self, key: object) -> bool:
        self._owner.looked_up.add(key)
        return dict.__contains__(self._owner, key)

    def __iter__(self):
        return iter(dict.keys(self._owner))

    def __len__(self) -> int:
        return dict.__len__(self._owner)


class RecordingDict(dict):
    """A dict that remembers every key looked up in it (DeepSpeed reads its config by lookups)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.looked_up: set = set()

    def __reduce_ex__(self, protocol):  # copy.copy keeps the same recorder
        return (_rebuild, (dict(self), self.looked_up))

    def get(self, key, *default):
        self.looked_up.add(key)
        return super().get(key, *default)

    def __contains__(self, key) -> bool:
        self.looked_up.add(key)
        return super().__contains__(key)

    def __getitem__(self, key):
        self.looked_up.add(key)
        return super().__getitem__(key)

    def keys(self):  # DeepSpeed writes `if KEY in param_dict.keys()`
        return _KeysView(self)


def _rebuild(data: dict, looked_up: set) -> RecordingDict:
    new = RecordingDict(data)
    new.looked_up = looked_up
    return new


def _key_path_for(message: str) -> str:
    """Which key a whole-config error is about (DeepSpeed raises plain assertions)."""
    lowered = message.lower()
    if "bfloat16" in lowered and "fp16" in lowered:
        return "bf16.enabled"
    if "batch" in lowered:
        return "train_batch_size"
    if "gradient_accumulation" in lowered or "gradient accumulation" in lowered:
        return "gradient_accumulation_steps"
    return ""


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def top_level_keys() -> list[str]:
    from deepspeed.runtime.config import DeepSpeedConfig

    probe = RecordingDict({"train_micro_batch_size_per_gpu": 1})
    DeepSpeedConfig(probe)
    return sorted(k for k in probe.looked_up if isinstance(k, str))


def validate(config: dict, world_size: int) -> dict:
    import deepspeed
    from deepspeed.runtime import config as ds_config
    from pydantic import ValidationError

    capture = _Capture()
    ds_logger = logging.getLogger("DeepSpeed")
    ds_logger.addHandler(capture)
    messages: list[dict] = []

    def add(severity: str, key_path: str, message: str) -> None:
        messages.append({"severity": severity, "key_path": key_path, "message": message})

    failing: set[str] = set()
    for section, value in config.items():
        if section in BATCH_KEYS:
            continue
        capture.records.clear()
        probe = ds_config.DeepSpeedConfig.__new__(ds_config.DeepSpeedConfig)
        probe.world_size, probe.global_rank = world_size, 0
        try:
            probe._initialize_params({section: copy.deepcopy(value)})
        except ValidationError as exc:
            failing.add(section)
            for err in exc.errors():
                loc = ".".join(str(part) for part in err.get("loc", ()))
                add("error", f"{section}.{loc}" if loc else section, f"{err['msg']} [{err['type']}]")
        except Exception as exc:  # DeepSpeed raises assertions and ValueErrors for bad values
            failing.add(section)
            add("error", section, f"{type(exc).__name__}: {exc}")
        for text in capture.records:
            add("warning", section, text)

    whole = {k: copy.deepcopy(v) for k, v in config.items() if k not in failing}
    real_dist = ds_config.dist
    ds_config.dist = types.SimpleNamespace(get_rank=lambda: 0, get_world_size=lambda *a, **k: world_size)
    capture.records.clear()
    try:
        parsed = ds_config.DeepSpeedConfig(whole)
        summary = {
            "train_batch_size": parsed.train_batch_size,
            "train_micro_batch_size_per_gpu": parsed.train_micro_batch_size_per_gpu,
            "gradient_accumulation_steps": parsed.gradient_accumulation_steps,
            "world_size": parsed.world_size,
            "zero_stage": int(parsed.zero_optimization_stage),
            "bf16": _precision_enabled(parsed, "bfloat16_config", "bfloat16_enabled"),
            "fp16": _precision_enabled(parsed, "float16_config", "fp16_enabled"),
        }
    except ValidationError as exc:  # a section that only fails in company of others
        summary = None
        for err in exc.errors():
            add("error", ".".join(str(p) for p in err.get("loc", ())), f"{err['msg']} [{err['type']}]")
    except Exception as exc:
        summary = None
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        add("error", _key_path_for(str(exc)), text)
    finally:
        ds_config.dist = real_dist
        ds_logger.removeHandler(capture)
    return {
        "deepspeed_version": deepspeed.__version__,
        "messages": messages,
        "parsed": summary,
        "top_level_keys": top_level_keys(),
    }


def _precision_enabled(parsed: Any, section: str, flag: str) -> bool:
    """Whether DeepSpeedConfig enabled bf16 / fp16: its `bfloat16_config` / `float16_config` objects (newer
    releases; deepspeed/runtime/config.py), or the `bfloat16_enabled` / `fp16_enabled` flags older releases set
    (0.16 and before)."""
    config = getattr(parsed, section, None)
    return bool(config.enabled) if config is not None else bool(getattr(parsed, flag, False))


def main(argv: list[str] | None = None) -> int:
    """Request: {"config": {...}, "world_size": n}. Answers one "validated" event (rocmcheck/child.py).
    `--top-level-keys` alone prints DeepSpeed's top-level keys (refreshes "top_level" in deepspeed_keys.json)."""
    argv = sys.argv[1:] if argv is None else argv
    if "--top-level-keys" in argv:
        print(json.dumps(top_level_keys()))
        return 0
    request = read_request(argv, prog="python -m rocmcheck.lint.deepspeed_child")
    channel = open_channel()  # DeepSpeed logs to stdout: keep it off the answer
    try:
        import deepspeed  # noqa: F401  (imports torch; that is why this is a child process)
    except Exception as exc:  # not installed, or broken (a torch it cannot load)
        result = {"skipped": f"import deepspeed failed: {type(exc).__name__}: {exc}"}
    else:
        result = validate(request["config"], int(request.get("world_size") or 1))
    channel.emit("validated", **result)
    return 0


if __name__ == "__main__":
    leave(main())
