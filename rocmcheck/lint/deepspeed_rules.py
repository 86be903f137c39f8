"""Checks DeepSpeed's own config classes do not make: silently ignored keys, version skew,
batch arithmetic for a given world size, precision and offload combinations.

Each rule is `rule(config, ctx) -> list[LintMessage]`; add a rule by adding a function to RULES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from packaging.version import Version

from rocmcheck.lint import known_keys
from rocmcheck.lint.messages import LintMessage, Severity

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass
class Context:
    file: str | None
    world_size: int | None
    deepspeed_version: Version | None  # installed release, None if not installed
    extra_top_level: set[str] = field(default_factory=set)  # keys the installed DeepSpeed reads
    hf_managed: bool = False  # config goes through the HF Trainer (LLaMA-Factory, TrainingArguments)

    def msg(self, severity: Severity, code: str, key_path: str, message: str, **kw: Any) -> LintMessage:
        return LintMessage(severity, code, self.file, key_path, message, **kw)


def _is_on(value: Any) -> bool:
    return value is True


def check_top_level_keys(config: dict, ctx: Context) -> list[LintMessage]:
    known = known_keys.top_level_keys(ctx.extra_top_level)
    out = []
    for key in config:
        gone = known_keys.removed(key, "")
        if gone:
            out.append(_removed(ctx, key, gone))
            continue
        if key in known:
            continue
        guess = known_keys.closest(key, known - set(config))
        if guess:
            out.append(ctx.msg(
                E, "lint.deepspeed.unknown_section", key,
                f"unknown top-level key: DeepSpeed silently ignores it, so '{guess}' is not applied",
                did_you_mean=guess, fix=f"rename \"{key}\" to \"{guess}\"",
            ))
        else:
            out.append(ctx.msg(
                W, "lint.deepspeed.unknown_top_level_key", key,
                "unknown top-level key: DeepSpeed ignores it",
                fix=f"remove \"{key}\" (or check the DeepSpeed docs for the intended name)",
            ))
    return out


def _removed(ctx: Context, key_path: str, gone: dict[str, str]) -> LintMessage:
    rejecting = ctx.deepspeed_version is not None and ctx.deepspeed_version >= Version(gone["first_rejected"])
    where = f"installed DeepSpeed {ctx.deepspeed_version}" if rejecting else f"DeepSpeed >= {gone['first_rejected']}"
    return ctx.msg(
        E if rejecting else W, "lint.deepspeed.removed_key", key_path,
        f"the feature behind this key was removed from DeepSpeed ({where} rejects it; "
        f"{gone['last_accepted']} still accepted it)",
        fix=f"delete \"{key_path.rsplit('.', 1)[-1]}\" or pin deepspeed<={gone['last_accepted']}",
    )


def check_strict_sections(config: dict, ctx: Context) -> list[LintMessage]:
    """Unknown keys inside sections DeepSpeed validates strictly: it raises, but only after the
    model has loaded; here they are found in a second, with a suggestion."""
    out = []
    for section in known_keys.STRICT_SECTIONS:
        node: Any = config
        for part in section.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        accepted = known_keys.section_keys(section)
        for key in node:
            path = f"{section}.{key}"
            gone = known_keys.removed(key, section)
            if gone and key not in accepted:
                out.append(_removed(ctx, path, gone))
                continue
            skew = known_keys.history(path)
            if skew:  # known to some releases only: fine if the installed one is among them
                problem = _version_skew(ctx, path, skew)
                if problem:
                    out.append(problem)
                continue
            if key in accepted:
                continue
            phantom_paths = {p.rsplit(".", 1)[-1] for p in known_keys.table()["phantom"] if p.startswith(section + ".")}
            guess = known_keys.closest(key, (accepted | phantom_paths) - set(node))
            why = known_keys.phantom(f"{section}.{guess}") if guess else None
            text = "unknown key: DeepSpeed rejects it (Extra inputs are not permitted) after the model has loaded"
            hint = f"That key does not exist either: {why}" if why else None
            if why:
                fix = f"delete \"{key}\""
            elif guess:
                fix = f"rename \"{key}\" to \"{guess}\""
            else:
                fix = f"delete \"{key}\""
            out.append(ctx.msg(E, "lint.deepspeed.unknown_key", path, text, did_you_mean=guess, hint=hint, fix=fix))
    return out


def _version_skew(ctx: Context, path: str, skew: dict[str, str]) -> LintMessage | None:
    first, last = Version(skew["first_seen"]), Version(skew["last_seen"])
    newest = Version(known_keys.table()["deepspeed_version"])
    still_there = last >= newest
    span = f"DeepSpeed {first}" + (" and newer" if still_there else f" to {last}")
    key = path.rsplit(".", 1)[-1]
    v = ctx.deepspeed_version
    if v is None:
        return ctx.msg(W, "lint.deepspeed.version_skew", path,
                       f"only {span} knows this key; other releases reject the whole config",
                       fix=f"make sure the training machine runs {span}")
    oldest_read = Version(known_keys.table()["releases_read"][0])
    too_old = v < first and first > oldest_read  # first_seen == oldest release read: no lower bound known
    if too_old or (not still_there and v > last):
        return ctx.msg(E, "lint.deepspeed.version_skew", path,
                       f"only {span} knows this key; the installed DeepSpeed {v} rejects it",
                       fix=f"delete \"{key}\" or install a DeepSpeed that knows it ({span})")
    return None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or value is None or value == "auto":
        return None
    if isinstance(value, (int, float)) and float(value).is_integer():
        return int(value)
    return None


def check_batch(config: dict, ctx: Context) -> list[LintMessage]:
    """DeepSpeed's rule: train_batch_size == micro_batch * gradient_accumulation * world_size
    (deepspeed/runtime/config.py _batch_assertion); it fills a missing one from the others."""
    keys = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    raw = {k: config.get(k) for k in keys}
    out = []
    for key, value in raw.items():
        if value is None or value == "auto":
            continue
        number = _int_or_none(value)
        if number is None or number <= 0:
            out.append(ctx.msg(E, "lint.deepspeed.batch_value", key, f"must be a positive integer, got {value!r}",
                               fix=f"set \"{key}\" to a positive integer (or \"auto\" under the HF Trainer)"))
    if out:
        return out
    autos = [k for k, v in raw.items() if v == "auto"]
    if raw["train_batch_size"] is None and raw["train_micro_batch_size_per_gpu"] is None:
        hint = "\"train_micro_batch_size_per_gpu\": \"auto\" (and the other batch keys \"auto\")" if ctx.hf_managed \
            else "\"train_micro_batch_size_per_gpu\": <per-GPU batch>"
        return [ctx.msg(E, "lint.deepspeed.batch_missing", "train_batch_size",
                        "neither train_batch_size nor train_micro_batch_size_per_gpu is set: DeepSpeed stops with "
                        "'Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided' "
                        "(the HF Trainer fills only keys that are present)",
                        fix=f"add {hint}")]
    if autos == ["train_batch_size"] and ctx.hf_managed:
        return []  # the Trainer computes it as micro x accumulation x its world size: consistent by construction
    if autos:
        return [ctx.msg(I, "lint.deepspeed.auto_unresolved", autos[0],
                        f"{', '.join(autos)} = \"auto\": filled by the HF Trainer from TrainingArguments; "
                        "batch arithmetic not checked (lint the training YAML, or pass --micro-batch/--grad-accum)")]
    train, micro, accum = (_int_or_none(raw[k]) for k in keys)
    ws = ctx.world_size
    if train and micro and accum:
        if ws:
            if train != micro * accum * ws:
                return [ctx.msg(E, "lint.deepspeed.batch_mismatch", "train_batch_size",
                                f"train_batch_size {train} != micro batch {micro} x accumulation {accum} x "
                                f"world size {ws} = {micro * accum * ws}",
                                fix=f"set \"train_batch_size\": {micro * accum * ws} (or drop it: DeepSpeed computes it)")]
        elif train % (micro * accum):
            return [ctx.msg(E, "lint.deepspeed.batch_mismatch", "train_batch_size",
                            f"train_batch_size {train} is not a multiple of micro batch {micro} x accumulation "
                            f"{accum}: no world size satisfies train = micro x accumulation x GPUs",
                            fix="drop \"train_batch_size\" and let DeepSpeed compute it")]
        else:
            implied = train // (micro * accum)
            return [ctx.msg(I, "lint.deepspeed.batch_world_size", "train_batch_size",
                            f"these batch values hold only on {implied} GPU(s); pass --world-size to check")]
    elif train and ws:
        per = (micro or 1) * (accum or 1) * ws
        if train % per:
            return [ctx.msg(E, "lint.deepspeed.batch_mismatch", "train_batch_size",
                            f"train_batch_size {train} is not divisible by {per} (the other batch values x world size {ws})",
                            fix="make train_batch_size a multiple of micro batch x accumulation x world size")]
    return []


def check_precision(config: dict, ctx: Context) -> list[LintMessage]:
    bf16 = config.get("bf16") if isinstance(config.get("bf16"), dict) else config.get("bfloat16")
    fp16 = config.get("fp16")
    if isinstance(bf16, dict) and isinstance(fp16, dict) and _is_on(bf16.get("enabled")) and _is_on(fp16.get("enabled")):
        return [ctx.msg(E, "lint.deepspeed.bf16_and_fp16", "bf16.enabled",
                        "bf16 and fp16 are both enabled: DeepSpeed stops with 'bfloat16 and fp16 modes cannot be "
                        "simultaneously enabled'",
                        fix="set \"fp16\": {\"enabled\": false} (bf16 is the one to keep on MI300X/H100)")]
    return []


def _stage(config: dict) -> int | None:
    zero = config.get("zero_optimization")
    if isinstance(zero, dict):
        return _int_or_none(zero.get("stage", 0))
    return 0 if zero is None else None


def check_offload(config: dict, ctx: Context) -> list[LintMessage]:
    """Where DeepSpeed uses the offload sections (deepspeed/runtime/engine.py _configure_zero_optimizer):
    offload_param only reaches the stage-3 optimizer, offload_optimizer the stage 1/2 and 3 ones;
    at other stages they are ignored without a word. Partial offload (ratio < 1) needs stage 3."""
    zero = config.get("zero_optimization")
    if not isinstance(zero, dict):
        return []
    stage = _stage(config)
    out = []
    for name, needs, label in (("offload_param", {3}, "stage 3"), ("offload_optimizer", {1, 2, 3}, "stage 1, 2 or 3")):
        section = zero.get(name)
        if not isinstance(section, dict):
            continue
        device = section.get("device", "none")
        if device in ("cpu", "nvme") and stage is not None and stage not in needs:
            out.append(ctx.msg(E, "lint.deepspeed.offload_stage", f"zero_optimization.{name}",
                               f"offload to {device} is only used at ZeRO {label}; at stage {stage} DeepSpeed "
                               "ignores it silently and keeps everything on the GPU",
                               fix=f"set \"zero_optimization\": {{\"stage\": {max(needs)}, ...}} or remove \"{name}\""))
        if device == "cpu" and section.get("pin_memory") is False:
            out.append(ctx.msg(W, "lint.deepspeed.pin_memory", f"zero_optimization.{name}.pin_memory",
                               "CPU offload without pinned memory: GPU<->CPU copies are synchronous and slower "
                               "(DeepSpeed's default is true)",
                               fix="set \"pin_memory\": true (needs enough locked memory: check `ulimit -l`)"))
        if device in ("none", None) and section.get("pin_memory") is True:
            out.append(ctx.msg(W, "lint.deepspeed.pin_memory", f"zero_optimization.{name}.pin_memory",
                               "pin_memory has no effect: device is \"none\", so nothing is offloaded",
                               fix=f"set \"device\": \"cpu\" in {name}, or remove the section"))
    if stage is not None and stage != 3:
        stage3_only = sorted(k for k in zero if str(k).startswith("stage3_"))
        for key in stage3_only:
            out.append(ctx.msg(W, "lint.deepspeed.stage3_key", f"zero_optimization.{key}",
                               f"only used at ZeRO stage 3; this config runs stage {stage}",
                               fix=f"remove \"{key}\" or set \"stage\": 3"))
    return out


RULES: list[Callable[[dict, Context], list[LintMessage]]] = [
    check_top_level_keys,
    check_strict_sections,
    check_batch,
    check_precision,
    check_offload,
]
