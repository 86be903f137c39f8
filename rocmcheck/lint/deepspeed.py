"""lint_deepspeed_config: DeepSpeed's own config classes (in a child process) plus the checks they miss."""

from __future__ import annotations

import copy
from pathlib import Path

from packaging.version import InvalidVersion, Version

from rocmcheck.fixes import shell
from rocmcheck.lint import consumers, known_keys
from rocmcheck.lint.consumers import Consumer
from rocmcheck.lint.deepspeed_deep import DeepResult, run_deep_validation
from rocmcheck.lint.deepspeed_rules import RULES, Context
from rocmcheck.lint.hf_auto import TrainingSettings, resolve_auto, resolve_batch_only
from rocmcheck.lint.loading import load_mapping
from rocmcheck.lint.messages import LintMessage, Severity, one_fix_per_key
from rocmcheck.lint.training_keys import installed_transformers_version
from rocmcheck.safe.text import excerpt

BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
# How to get DeepSpeed's own config classes here (docs/lint.md): against the installed torch, no ops built.
DEEPSPEED_INSTALL = shell("DS_BUILD_OPS=0 pip install --no-cache-dir --no-build-isolation deepspeed",
                          "install torch first; then lint also validates with DeepSpeed's own config classes")


def lint_deepspeed_config(
    path_or_dict: str | Path | dict,
    *,
    world_size: int | None = None,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
    training: TrainingSettings | None = None,
    deep: bool = True,
    label: str | None = None,
    hidden_size: int | None = None,
    consumer: Consumer | None = None,
) -> list[LintMessage]:
    """Lint one DeepSpeed config (a path to JSON, or a dict) for its consumer.

    world_size/micro_batch/grad_accum: the run's batch settings, used to resolve "auto" and check
    train_batch_size == micro x accumulation x world_size. training: TrainingArguments values when
    the config is used through the HF Trainer (then "auto" is resolved exactly as the Trainer does).
    consumer: who reads it (rocmcheck.lint.consumers): the HF Trainer when training is given, else assumed
    from the config (consumers.for_deepspeed_config). deep=False skips DeepSpeed's own classes (no child
    process, no "skipped" message). hidden_size: the model's, for the checks of values the integrations derive
    from it. Raises BadInput when a path cannot be read or parsed."""
    if isinstance(path_or_dict, dict):
        config, file = path_or_dict, label
    else:
        file = label or str(path_or_dict)
        config = load_mapping(Path(path_or_dict))
    if consumer is None:
        consumer = consumers.HF_TRAINER if training is not None else consumers.for_deepspeed_config(config).consumer
    if training is None and consumer.fills_auto:  # --micro-batch / --grad-accum: compared as the Trainer would
        training = TrainingSettings.from_command_line(micro_batch, grad_accum, world_size)
    ctx = Context(file=file, world_size=world_size, deepspeed_version=known_keys.installed_deepspeed_version(),
                  consumer=consumer, transformers_version=installed_transformers_version(), hidden_size=hidden_size,
                  training_known=training is not None)
    messages: list[LintMessage] = []

    if training is not None and consumer.fills_auto:
        resolution = resolve_auto(config, training)
        for key_path, ds_value, hf_name, hf_value in resolution.mismatches:
            messages.append(ctx.msg(
                Severity.ERROR, "lint.hf.mismatch", key_path,
                f"{excerpt(repr(ds_value))} here but {hf_name}={excerpt(repr(hf_value))} in {training.source}: "
                "the HF Trainer stops with 'Please correct the following DeepSpeed config values that mismatch "
                "TrainingArguments values'",
                fix=ctx.edit(key_path, "set it to \"auto\"",
                             "the HF Trainer then fills it from the training arguments")))
    elif consumer.fills_auto:
        resolution = resolve_batch_only(config, micro_batch, grad_accum, world_size)
    else:  # deepspeed.initialize fills nothing: the config is judged as written
        resolution = resolve_batch_only(config, None, None, world_size)
    resolved = resolution.config

    deep_result = _deep(resolved, world_size, ctx.file) if deep else DeepResult(False, "deep validation turned off")
    if deep_result.ran and deep_result.deepspeed_version:
        try:
            ctx.deepspeed_version = Version(deep_result.deepspeed_version)
        except InvalidVersion:
            pass
    ctx.extra_top_level = deep_result.top_level_keys

    for rule in RULES:
        messages.extend(rule(resolved, ctx))
    if deep:  # a caller that turned it off knows; say "skipped" only when it was wanted
        messages.extend(_merge_deep(deep_result, messages, ctx))
    return one_fix_per_key(messages)


def _deep(resolved: dict, world_size: int | None, label: str | None) -> DeepResult:
    """DeepSpeed cannot parse top-level "auto" (TypeError) or a config without batch keys; give it
    a placeholder batch so the rest is still validated (check_batch reports the batch itself).
    Without --world-size, DeepSpeed is told the world size the batch values imply."""
    sent = copy.deepcopy(resolved)
    for key in BATCH_KEYS + ("gradient_clipping",):
        if sent.get(key) == "auto":
            del sent[key]
    values = [sent.get(k) for k in BATCH_KEYS]
    if world_size is None and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        train, micro, accum = values
        world_size = train // (micro * accum) if train % (micro * accum) == 0 else None
        if world_size is None or world_size == 0:
            world_size = None
            for key in BATCH_KEYS:
                sent.pop(key)
    if "train_batch_size" not in sent and "train_micro_batch_size_per_gpu" not in sent:
        for key in BATCH_KEYS:
            sent.pop(key, None)
        sent["train_micro_batch_size_per_gpu"] = 1
    return run_deep_validation(sent, world_size, label=label)


def _merge_deep(deep: DeepResult, static: list[LintMessage], ctx: Context) -> list[LintMessage]:
    if not deep.ran:
        return [ctx.msg(Severity.INFO, "lint.deepspeed.deep_skipped", "",
                        f"validation by DeepSpeed's own config classes skipped: {deep.skipped_reason}; "
                        "the checks below are rocmcheck's own",
                        fix=DEEPSPEED_INSTALL)]
    out: list[LintMessage] = []
    by_path = {m.key_path: m for m in static if m.severity is not Severity.INFO}
    for item in deep.messages:
        words = f"DeepSpeed {deep.deepspeed_version}: {item['message']}"
        same = by_path.get(item["key_path"]) or by_path.get(item["key_path"].split(".", 1)[0])
        if same is not None and item["severity"] == "error":
            same.detail.append(words)  # rocmcheck already says it, with a suggestion; keep DeepSpeed's words
            continue
        severity = Severity.ERROR if item["severity"] == "error" else Severity.WARNING
        out.append(ctx.msg(severity, "lint.deepspeed.rejected" if severity is Severity.ERROR else "lint.deepspeed.says",
                           item["key_path"], f"DeepSpeed {deep.deepspeed_version} says: {item['message']}",
                           fix=ctx.edit(item["key_path"], "change the value as DeepSpeed's message says",
                                        "https://www.deepspeed.ai/docs/config-json/"),
                           detail=[words]))
    return out
