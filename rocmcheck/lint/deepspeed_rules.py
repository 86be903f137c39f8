"""Checks DeepSpeed's own config classes do not make: silently ignored keys, version skew,
batch arithmetic for a given world size, precision and offload combinations.

Each rule is `rule(config, ctx) -> list[LintMessage]`; add a rule by adding a function to RULES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from packaging.version import Version

from rocmcheck.fixes import Fix, note
from rocmcheck.lint import known_keys
from rocmcheck.lint.consumers import HF_TRAINER, Consumer
from rocmcheck.lint.hf_auto import HF_FILLED_AUTO, auto_paths
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.safe.text import excerpt

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass
class Context:
    file: str | None
    world_size: int | None
    deepspeed_version: Version | None  # installed release, None if not installed
    extra_top_level: set[str] = field(default_factory=set)  # keys the installed DeepSpeed reads
    consumer: Consumer = HF_TRAINER  # who reads the config: deepspeed.initialize, the HF Trainer, accelerate
    transformers_version: Version | None = None  # installed release, None if not installed
    hidden_size: int | None = None  # the model's, when known (its config.json or --hidden-size)
    training_known: bool = False  # the run's training arguments were given (a training file, or the command line)

    @property
    def hf_managed(self) -> bool:
        """The config goes through the HF Trainer or accelerate, which fill "auto"."""
        return self.consumer.fills_auto

    def msg(self, severity: Severity, code: str, key_path: str, message: str, **kw: Any) -> LintMessage:
        return LintMessage(severity, code, self.file, key_path, message, consumer=self.consumer.label, **kw)

    def edit(self, key_path: str, change: str, why: str = "") -> Fix:
        """The fix that changes key_path in this config file."""
        return key_edit(self.file, key_path, change, why)


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
                did_you_mean=guess, fix=ctx.edit(key, f"rename it to \"{guess}\""),
            ))
        else:
            out.append(ctx.msg(
                W, "lint.deepspeed.unknown_top_level_key", key,
                "unknown top-level key: DeepSpeed ignores it",
                fix=ctx.edit(key, "delete it", "or check the DeepSpeed docs for the intended name"),
            ))
    return out


def _removed(ctx: Context, key_path: str, gone: dict[str, str]) -> LintMessage:
    rejecting = ctx.deepspeed_version is not None and ctx.deepspeed_version >= Version(gone["first_rejected"])
    where = f"installed DeepSpeed {ctx.deepspeed_version}" if rejecting else f"DeepSpeed >= {gone['first_rejected']}"
    return ctx.msg(
        E if rejecting else W, "lint.deepspeed.removed_key", key_path,
        f"the feature behind this key was removed from DeepSpeed ({where} rejects it; "
        f"{gone['last_accepted']} still accepted it)",
        fix=ctx.edit(key_path, "delete it",
                     f"or keep it and install deepspeed<={gone['last_accepted']}"),
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
            if guess and not why:
                fix = ctx.edit(path, f"rename it to \"{guess}\"")
            else:
                fix = ctx.edit(path, "delete it")
            out.append(ctx.msg(E, "lint.deepspeed.unknown_key", path, text, did_you_mean=guess, hint=hint, fix=fix))
    return out


def _version_skew(ctx: Context, path: str, skew: dict[str, str]) -> LintMessage | None:
    first, last = Version(skew["first_seen"]), Version(skew["last_seen"])
    newest = Version(known_keys.table()["deepspeed_version"])
    still_there = last >= newest
    span = f"DeepSpeed {first}" + (" and newer" if still_there else f" to {last}")
    v = ctx.deepspeed_version
    if v is None:
        return ctx.msg(W, "lint.deepspeed.version_skew", path,
                       f"only {span} knows this key; other releases reject the whole config",
                       fix=note(f"make sure the training machine runs {span}"))
    oldest_read = Version(known_keys.table()["releases_read"][0])
    too_old = v < first and first > oldest_read  # first_seen == oldest release read: no lower bound known
    if too_old or (not still_there and v > last):
        return ctx.msg(E, "lint.deepspeed.version_skew", path,
                       f"only {span} knows this key; the installed DeepSpeed {v} rejects it",
                       fix=ctx.edit(path, "delete it", f"or install a DeepSpeed that knows it ({span})"))
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
            out.append(ctx.msg(E, "lint.deepspeed.batch_value", key,
                               f"must be a positive integer, got {excerpt(repr(value))}",
                               fix=ctx.edit(key, "set it to a positive integer", "or \"auto\" under the HF Trainer")))
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
                        fix=ctx.edit("", f"add {hint}"))]
    if autos == ["train_batch_size"] and ctx.hf_managed:
        return []  # the Trainer computes it as micro x accumulation x its world size: consistent by construction
    if autos and not ctx.hf_managed:
        return []  # deepspeed.initialize fills no "auto": check_auto_for_deepspeed says what happens
    if autos:
        return [ctx.msg(I, "lint.deepspeed.auto_unresolved", autos[0],
                        f"{', '.join(autos)} = \"auto\": filled from the training arguments by {ctx.consumer.label}; "
                        "batch arithmetic not checked (lint the training YAML, or pass --micro-batch/--grad-accum)")]
    train, micro, accum = (_int_or_none(raw[k]) for k in keys)
    ws = ctx.world_size
    if train and micro and accum:
        if ws:
            if train != micro * accum * ws:
                return [ctx.msg(E, "lint.deepspeed.batch_mismatch", "train_batch_size",
                                f"train_batch_size {train} != micro batch {micro} x accumulation {accum} x "
                                f"world size {ws} = {micro * accum * ws}",
                                fix=ctx.edit("train_batch_size", f"set it to {micro * accum * ws}",
                                             "or delete it: DeepSpeed computes it"))]
        elif train % (micro * accum):
            return [ctx.msg(E, "lint.deepspeed.batch_mismatch", "train_batch_size",
                            f"train_batch_size {train} is not a multiple of micro batch {micro} x accumulation "
                            f"{accum}: no world size satisfies train = micro x accumulation x GPUs",
                            fix=ctx.edit("train_batch_size", "delete it", "DeepSpeed computes it"))]
        else:
            implied = train // (micro * accum)
            return [ctx.msg(I, "lint.deepspeed.batch_world_size", "train_batch_size",
                            f"these batch values hold only on {implied} GPU(s); pass --world-size to check")]
    elif train and ws:
        per = (micro or 1) * (accum or 1) * ws
        if train % per:
            return [ctx.msg(E, "lint.deepspeed.batch_mismatch", "train_batch_size",
                            f"train_batch_size {train} is not divisible by {per} (the other batch values x world "
                            f"size {ws})",
                            fix=ctx.edit("train_batch_size", f"set it to a multiple of {per}",
                                         "micro batch x accumulation x world size"))]
    return []


def check_precision(config: dict, ctx: Context) -> list[LintMessage]:
    bf16 = config.get("bf16") if isinstance(config.get("bf16"), dict) else config.get("bfloat16")
    fp16 = config.get("fp16")
    if isinstance(bf16, dict) and isinstance(fp16, dict) and _is_on(bf16.get("enabled")) \
            and _is_on(fp16.get("enabled")):
        return [ctx.msg(E, "lint.deepspeed.bf16_and_fp16", "bf16.enabled",
                        "bf16 and fp16 are both enabled: DeepSpeed stops with 'bfloat16 and fp16 modes cannot be "
                        "simultaneously enabled'",
                        fix=ctx.edit("fp16.enabled", "set it to false", "bf16 is the one to keep on MI300X/H100"))]
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
                               fix=ctx.edit("zero_optimization.stage", f"set it to {max(needs)}",
                                            f"or remove \"{name}\"")))
        ratio = section.get("ratio")
        if name == "offload_optimizer" and device == "nvme" and isinstance(ratio, (int, float)) and ratio < 1:
            # DeepSpeed accepts the config, then fails building the optimizer ("RuntimeError: expected input
            # to be on cuda"); its maintainers: partial offload needs device cpu
            # (https://github.com/deepspeedai/DeepSpeed/issues/4872).
            out.append(ctx.msg(E, "lint.deepspeed.partial_offload_nvme", f"zero_optimization.{name}.ratio",
                               f"partial optimizer offload (ratio {ratio}) works only to the CPU: with device nvme "
                               "DeepSpeed fails when it builds the optimizer ('expected input to be on cuda')",
                               fix=ctx.edit(f"zero_optimization.{name}",
                                            "set \"device\": \"cpu\" and delete \"nvme_path\"",
                                            "or delete \"ratio\" to offload all of it to NVMe")))
        if device == "cpu" and section.get("pin_memory") is False:
            out.append(ctx.msg(W, "lint.deepspeed.pin_memory", f"zero_optimization.{name}.pin_memory",
                               "CPU offload without pinned memory: GPU<->CPU copies are synchronous and slower "
                               "(DeepSpeed's default is true)",
                               fix=ctx.edit(f"zero_optimization.{name}.pin_memory", "set it to true",
                                            "needs enough locked memory: check `ulimit -l`")))
        if device in ("none", None) and section.get("pin_memory") is True:
            out.append(ctx.msg(W, "lint.deepspeed.pin_memory", f"zero_optimization.{name}.pin_memory",
                               "pin_memory has no effect: device is \"none\", so nothing is offloaded",
                               fix=ctx.edit(f"zero_optimization.{name}.device", "set it to \"cpu\"",
                                            "or remove the section")))
    if stage is not None and stage != 3:
        stage3_only = sorted(k for k in zero if str(k).startswith("stage3_"))
        for key in stage3_only:
            out.append(ctx.msg(W, "lint.deepspeed.stage3_key", f"zero_optimization.{key}",
                               f"only used at ZeRO stage 3; this config runs stage {stage}",
                               fix=ctx.edit(f"zero_optimization.{key}", "delete it",
                                            "or set \"stage\": 3")))
    return out


def check_auto_nobody_fills(config: dict, ctx: Context) -> list[LintMessage]:
    """"auto" is the HF Trainer's and accelerate's word: they fill a fixed set of keys and accelerate
    then walks every key, stopping at any "auto" left ("`zero_optimization.prefetch_bucket_size` not
    found in kwargs. Please specify ... without `auto`": accelerate/utils/dataclasses.py
    DeepSpeedPlugin.fill_match). DeepSpeed alone drops "auto" values and silently uses its defaults
    (DeepSpeedConfigModel, strict=False). The classic case: ZeRO-3 options under DeepSpeed's own field
    names (prefetch_bucket_size) instead of the stage3_ names the integrations fill."""
    if not ctx.hf_managed:
        return []  # deepspeed.initialize: check_auto_for_deepspeed
    out = []
    zero_keys = known_keys.section_keys("zero_optimization")
    for path in auto_paths(config):
        if path in HF_FILLED_AUTO:
            continue
        section, _, key = path.rpartition(".")
        prefixed = f"stage3_{key}"
        if section == "zero_optimization" and prefixed in zero_keys:
            fillable = f"zero_optimization.{prefixed}" in HF_FILLED_AUTO
            out.append(ctx.msg(
                E, "lint.deepspeed.auto_unprefixed", path,
                f"\"auto\" under DeepSpeed's field name: the HF Trainer and accelerate fill only \"{prefixed}\", "
                f"so the run stops at start-up with '`{path}` not found in kwargs' (DeepSpeed alone would "
                "silently use its default)",
                did_you_mean=prefixed if fillable else None,
                fix=ctx.edit(path, f"rename it to \"{prefixed}\"" if fillable else "set it to a number")))
        else:
            out.append(ctx.msg(
                E, "lint.deepspeed.auto_unfilled", path,
                f"nothing fills \"auto\" here (the HF Trainer and accelerate fill a fixed set of keys): the run "
                f"stops at start-up with '`{path}` not found in kwargs'",
                fix=ctx.edit(path, "set it to a value")))
    return out


# Top-level keys deepspeed.initialize reads as plain values (runtime/config.py get_scalar_param): "auto" stays the
# string "auto". Measured with DeepSpeed 0.19.8: DeepSpeedConfig({"train_batch_size": "auto", ...}) raises
# "TypeError: '>' not supported between instances of 'str' and 'int'" in its batch check (the same failure:
# https://github.com/Roblox/FAI-RL/pull/70); "gradient_clipping": "auto" is kept as a string that the engine
# compares with 0 when it clips.
DS_BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
# Sections DeepSpeed parses with its pydantic models (DeepSpeedConfigModel drops every "auto" value before
# validating: runtime/config_utils.py), so "auto" there silently means DeepSpeed's default.
DS_PYDANTIC_SECTIONS = ("zero_optimization", "fp16", "bf16", "bfloat16", "activation_checkpointing", "comms_logger",
                        "flops_profiler", "monitor_config", "tensorboard", "wandb", "csv_monitor", "compile",
                        "aio", "data_types", "checkpoint", "nebula", "elasticity", "autotuning")


def check_auto_for_deepspeed(config: dict, ctx: Context) -> list[LintMessage]:
    """"auto" is the HF Trainer's and accelerate's word; deepspeed.initialize fills none of it."""
    if ctx.hf_managed:
        return []
    out = []
    fix_why = "\"auto\" is filled only by the HF Trainer and accelerate"
    for path in auto_paths(config):
        section = path.split(".", 1)[0]
        if path in DS_BATCH_KEYS:
            out.append(ctx.msg(E, "lint.deepspeed.auto_not_filled", path,
                               "deepspeed.initialize fills no \"auto\": its batch check stops with 'TypeError: '>' "
                               "not supported between instances of 'str' and 'int''",
                               fix=ctx.edit(path, "set it to a positive integer", fix_why)))
        elif path == "gradient_clipping" or section in ("optimizer", "scheduler"):
            user = "the engine compares it with 0 when it clips" if path == "gradient_clipping" else \
                f"the {section} is built with the string \"auto\""
            out.append(ctx.msg(E, "lint.deepspeed.auto_not_filled", path,
                               f"deepspeed.initialize fills no \"auto\": it keeps the string and {user} "
                               "(TypeError at start-up)",
                               fix=ctx.edit(path, "set it to a value", fix_why)))
        elif section in DS_PYDANTIC_SECTIONS:
            default = " (bf16/fp16 then stay off: the run trains in fp32)" if path.endswith(".enabled") else ""
            out.append(ctx.msg(W, "lint.deepspeed.auto_not_filled", path,
                               f"deepspeed.initialize fills no \"auto\": DeepSpeed drops it and silently uses its "
                               f"default{default}",
                               fix=ctx.edit(path, "set it to a value", fix_why)))
        else:
            out.append(ctx.msg(W, "lint.deepspeed.auto_not_filled", path,
                               "deepspeed.initialize fills no \"auto\": DeepSpeed reads the string \"auto\" here",
                               fix=ctx.edit(path, "set it to a value", fix_why)))
    return out


def check_precision_hard_coded(config: dict, ctx: Context) -> list[LintMessage]:
    """The HF Trainer compares fp16.enabled / bf16.enabled with the run's fp16 / bf16 (trainer_config_process:
    fill_match) and stops on a difference. Linted with the training file, that is lint.hf.mismatch; linted alone,
    the run's precision is not known, so a hard-coded true is a warning."""
    if ctx.consumer.id != HF_TRAINER.id or ctx.training_known:
        return []
    out = []
    for section, flag in (("fp16", "fp16"), ("bf16", "bf16")):
        node = config.get(section)
        if isinstance(node, dict) and node.get("enabled") is True:
            out.append(ctx.msg(W, "lint.hf.precision_hard_coded", f"{section}.enabled",
                               f"{section}.enabled is true here: the HF Trainer stops with 'Please correct the "
                               "following DeepSpeed config values that mismatch TrainingArguments values' unless the "
                               f"run sets {flag}: true (or {flag}_full_eval)",
                               fix=ctx.edit(f"{section}.enabled", "set it to \"auto\"",
                                            "the Trainer then follows the run's bf16 / fp16")))
    return out


# deepspeed/runtime/lr_schedules.py VALID_LR_SCHEDULES (DeepSpeed 0.19.8); DeepSpeed's engine looks a
# "scheduler" type up there first, then in torch.optim.lr_scheduler (engine.py _scheduler_from_config).
DEEPSPEED_SCHEDULERS = ("LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR")
# The scheduler classes of torch.optim.lr_scheduler (torch 2.13). They check
# isinstance(optimizer, torch.optim.Optimizer), and DeepSpeed hands them its ZeRO or fp16/bf16 wrapper,
# which is not one: "TypeError: DeepSpeedZeroOptimizer is not an Optimizer"
# (https://github.com/deepspeedai/DeepSpeed/issues/122, https://github.com/deepspeedai/DeepSpeed/issues/3492).
TORCH_SCHEDULERS = ("ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
                    "ExponentialLR", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR",
                    "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR")


def check_scheduler(config: dict, ctx: Context) -> list[LintMessage]:
    scheduler = config.get("scheduler")
    if not isinstance(scheduler, dict) or not isinstance(scheduler.get("type"), str):
        return []
    name = scheduler["type"]
    if name in DEEPSPEED_SCHEDULERS:
        return []
    remedy = (ctx.edit("scheduler", "remove the section", "the HF Trainer then builds its lr_scheduler_type schedule")
              if ctx.hf_managed else ctx.edit("scheduler.type", "set it to one of DeepSpeed's own: \"WarmupCosineLR\" "
                                                                "or \"WarmupDecayLR\""))
    if name not in TORCH_SCHEDULERS:
        guess = known_keys.closest(name, DEEPSPEED_SCHEDULERS + TORCH_SCHEDULERS, cutoff=0.7)
        return [ctx.msg(E, "lint.deepspeed.scheduler_unknown", "scheduler.type",
                        "DeepSpeed stops at initialize with 'DeepSpeed does not recognize LR scheduler "
                        f"{excerpt(name)}'", did_you_mean=guess,
                        fix=ctx.edit("scheduler.type", f"set it to \"{guess}\"") if guess else remedy)]
    stage = _stage(config)
    wrapped = (stage or 0) >= 1 or any(_is_on((config.get(k) or {}).get("enabled")) if isinstance(config.get(k), dict)
                                        else False for k in ("bf16", "fp16", "bfloat16"))
    if not wrapped:
        return []
    why = f"ZeRO stage {stage}" if (stage or 0) >= 1 else "bf16/fp16"
    return [ctx.msg(E, "lint.deepspeed.torch_scheduler", "scheduler.type",
                    f"{name} is torch's scheduler: with {why} DeepSpeed passes it its own optimizer wrapper and "
                    f"torch stops at initialize with 'TypeError: ... is not an Optimizer'",
                    fix=remedy)]


def _any_auto(config: Any) -> bool:
    return bool(auto_paths(config))


def check_client_optimizer_offload(config: dict, ctx: Context) -> list[LintMessage]:
    """ZeRO-Offload with the optimizer passed to deepspeed.initialize (no "optimizer" section):
    DeepSpeed raises ZeRORuntimeException "You are using ZeRO-Offload with a client provided optimizer"
    unless it is DeepSpeedCPUAdam/DeepSpeedCPULion or "zero_force_ds_cpu_optimizer": false
    (deepspeed/runtime/engine.py _configure_basic_optimizer; added in
    https://github.com/deepspeedai/DeepSpeed/pull/2971; e.g. https://github.com/OptimalScale/LMFlow/issues/693).
    Under the HF Trainer/accelerate (a config with "auto" values) accelerate swaps a torch optimizer
    for DeepSpeedCPUAdam itself (accelerate.utils.map_pytorch_optim_to_deepspeed), so only bare
    DeepSpeed use is at risk."""
    zero = config.get("zero_optimization")
    if ctx.hf_managed or _any_auto(config) or not isinstance(zero, dict) or "optimizer" in config:
        return []
    offload = zero.get("offload_optimizer")
    if not isinstance(offload, dict) or offload.get("device") not in ("cpu", "nvme") or (_stage(config) or 0) < 1:
        return []
    if config.get("zero_force_ds_cpu_optimizer") is False:
        return []
    return [ctx.msg(W, "lint.deepspeed.client_optimizer_offload", "zero_optimization.offload_optimizer",
                    "optimizer offload without an \"optimizer\" section: unless the optimizer given to "
                    "deepspeed.initialize is DeepSpeedCPUAdam or DeepSpeedCPULion, DeepSpeed stops with "
                    "'ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer'",
                    fix=ctx.edit("", "add \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": <lr>}}",
                                 "DeepSpeed then builds its CPU Adam itself"))]


# transformers filled "auto" stage3_prefetch_bucket_size with the float 0.9 * hidden^2 up to 4.44.2 and
# with int(...) from 4.45.0 (https://github.com/huggingface/transformers/pull/33402; read from both wheels).
TRANSFORMERS_INT_PREFETCH = Version("4.45.0")
# DeepSpeed's pydantic v2 models (0.15.0) reject a float with a fractional part: "Input should be a valid
# integer, got a number with a fractional part" (https://github.com/hiyouga/LlamaFactory/issues/5252:
# deepspeed 0.15.0 fails, 0.14.4 works; https://github.com/deepspeedai/DeepSpeed/issues/6525).
DEEPSPEED_STRICT_INT = Version("0.15.0")


def check_prefetch_float(config: dict, ctx: Context) -> list[LintMessage]:
    zero = config.get("zero_optimization")
    if not isinstance(zero, dict) or _stage(config) != 3 or zero.get("stage3_prefetch_bucket_size") != "auto":
        return []
    tv, dv = ctx.transformers_version, ctx.deepspeed_version
    if tv is None or dv is None or tv >= TRANSFORMERS_INT_PREFETCH or dv < DEEPSPEED_STRICT_INT:
        return []
    path = "zero_optimization.stage3_prefetch_bucket_size"
    versions = (f"transformers {tv} fills \"auto\" with 0.9 x hidden_size^2, a float, and DeepSpeed {dv} accepts "
                "only an integer")
    if ctx.hidden_size is None:
        return [ctx.msg(W, "lint.deepspeed.prefetch_float", path,
                        f"{versions}: the run stops at start-up ('got a number with a fractional part') for most "
                        "models (hidden size 4096: 15099494.4); pass --hidden-size or keep the model's config.json "
                        "where model_name_or_path points to check",
                        fix=ctx.edit(path, "set it to an integer", "0.9 x hidden_size^2, rounded down"))]
    value = 0.9 * ctx.hidden_size * ctx.hidden_size
    if float(value).is_integer():
        return []
    return [ctx.msg(E, "lint.deepspeed.prefetch_float", path,
                    f"{versions}: with hidden size {ctx.hidden_size} that is {value:.1f}, and the run stops at "
                    "start-up "
                    "('Input should be a valid integer, got a number with a fractional part')",
                    fix=ctx.edit(path, f"set it to {int(value)}"))]


RULES: list[Callable[[dict, Context], list[LintMessage]]] = [
    check_top_level_keys,
    check_strict_sections,
    check_batch,
    check_precision,
    check_offload,
    check_auto_nobody_fills,
    check_auto_for_deepspeed,
    check_precision_hard_coded,
    check_scheduler,
    check_client_optimizer_offload,
    check_prefetch_float,
]
