"""DeepSpeed config lint: the seed's typo, silently ignored sections, batch arithmetic, precision,
offload rules and version skew. deep=False tests exercise rocmcheck's own rules alone (fast);
tests marked needs_deepspeed run DeepSpeed's real config classes in the child process."""

from __future__ import annotations

import copy

import pytest
from lint_helpers import by_code, needs_deepspeed, seed_deepspeed_config

from rocmcheck.fixes import FixKind, edit
from rocmcheck.lint import Severity, has_errors, lint_deepspeed_config
from rocmcheck.lint.consumers import ACCELERATE_LAUNCH, DEEPSPEED_INITIALIZE, HF_TRAINER
from rocmcheck.lint.hf_auto import TrainingSettings

BASE = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2}}


def lint(config, **kw):
    kw.setdefault("deep", False)
    return lint_deepspeed_config(config, **kw)


def test_seed_typo_is_caught_with_key_path_and_suggestion():
    messages = lint(seed_deepspeed_config(), label="zero3_offload.json")
    [typo] = by_code(messages, "lint.deepspeed.unknown_key")
    assert typo.severity is Severity.ERROR
    assert typo.key_path == "zero_optimization.stage3_parition_grads"
    assert typo.did_you_mean == "stage3_partition_grads"
    assert "does not exist either" in typo.hint  # no release has the corrected spelling: say so
    rendered = typo.render()
    assert rendered.startswith("zero3_offload.json: zero_optimization.stage3_parition_grads: "
                               "error [lint.deepspeed.unknown_key] for the HF Trainer:")  # "auto" values: assumed
    assert "did you mean 'stage3_partition_grads'?" in rendered
    assert typo.fix == edit("zero3_offload.json", "zero_optimization.stage3_parition_grads: delete it")


def test_seed_config_also_lacks_batch_keys():
    # cpu-anchors.md 3b/3d: with the typo removed, DeepSpeed (and the HF Trainer) stop on this.
    config = seed_deepspeed_config()
    del config["zero_optimization"]["stage3_parition_grads"]
    messages = lint(config)
    assert [m.code for m in messages if m.is_error] == ["lint.deepspeed.batch_missing"]


def test_misspelt_top_level_section_is_an_error_with_suggestion():
    config = {"train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 3}}
    [msg] = by_code(lint(config), "lint.deepspeed.unknown_section")
    assert (msg.severity, msg.key_path, msg.did_you_mean) == (Severity.ERROR, "zero_optimisation", "zero_optimization")
    assert "silently ignores" in msg.message


def test_unknown_top_level_key_without_a_near_name_is_a_warning():
    config = dict(BASE, comms_config={"verbose": False})
    [msg] = by_code(lint(config), "lint.deepspeed.unknown_top_level_key")
    assert msg.severity is Severity.WARNING and msg.did_you_mean is None


def test_clean_config_has_no_messages():
    assert lint(copy.deepcopy(BASE), world_size=1) == []


@pytest.mark.parametrize("world_size, expect_error", [(8, False), (4, True), (None, False)])
def test_batch_arithmetic_against_world_size(world_size, expect_error):
    config = dict(BASE, train_batch_size=64)  # 2 x 4 x 8
    messages = lint(config, world_size=world_size)
    errors = by_code(messages, "lint.deepspeed.batch_mismatch")
    assert bool(errors) is expect_error
    if expect_error:
        assert "64 != micro batch 2 x accumulation 4 x world size 4 = 32" in errors[0].message
        assert errors[0].fix.kind is FixKind.EDIT and errors[0].fix.text == "train_batch_size: set it to 32"
    if world_size is None:
        [info] = by_code(messages, "lint.deepspeed.batch_world_size")
        assert "8 GPU(s)" in info.message


def test_batch_that_no_world_size_can_satisfy():
    messages = lint(dict(BASE, train_batch_size=20))
    [err] = by_code(messages, "lint.deepspeed.batch_mismatch")
    assert "not a multiple" in err.message


def test_non_positive_batch_value():
    [err] = by_code(lint(dict(BASE, gradient_accumulation_steps=0)), "lint.deepspeed.batch_value")
    assert err.key_path == "gradient_accumulation_steps"


def test_auto_batch_resolved_from_given_batch_settings():
    config = dict(BASE, train_batch_size="auto", train_micro_batch_size_per_gpu="auto",
                  gradient_accumulation_steps="auto")
    unresolved = lint(config, consumer=HF_TRAINER)
    assert [m.code for m in unresolved if m.code != "lint.hf.precision_hard_coded"] == \
        ["lint.deepspeed.auto_unresolved"]
    assert unresolved[0].severity is Severity.INFO
    # resolved as micro 12 x accumulation 8 x 4 GPUs: consistent, so nothing to say
    assert lint(config, micro_batch=12, grad_accum=8, world_size=4, consumer=HF_TRAINER) == []


def test_auto_resolved_like_the_hf_trainer_and_mismatch_reported():
    config = dict(BASE, train_micro_batch_size_per_gpu=4, gradient_accumulation_steps="auto",
                  train_batch_size="auto")
    settings = TrainingSettings(per_device_train_batch_size=12, gradient_accumulation_steps=8, bf16=True)
    [mismatch] = by_code(lint(config, training=settings), "lint.hf.mismatch")
    assert mismatch.key_path == "train_micro_batch_size_per_gpu"
    assert "per_device_train_batch_size=12" in mismatch.message
    config["train_micro_batch_size_per_gpu"] = "auto"
    assert not has_errors(lint(config, training=settings))


def test_bf16_and_fp16_both_enabled():
    config = dict(BASE, fp16={"enabled": True})
    [err] = by_code(lint(config), "lint.deepspeed.bf16_and_fp16")
    assert err.severity is Severity.ERROR and err.key_path == "bf16.enabled"


@pytest.mark.parametrize("stage, section, expect_error", [
    (2, "offload_param", True),   # only the stage-3 optimizer receives offload_param
    (3, "offload_param", False),
    (0, "offload_optimizer", True),  # ZeRO disabled: no ZeRO optimizer to offload
    (1, "offload_optimizer", False),
    (2, "offload_optimizer", False),
])
def test_offload_needs_a_stage(stage, section, expect_error):
    config = dict(BASE, zero_optimization={"stage": stage, section: {"device": "cpu", "pin_memory": True}})
    errors = by_code(lint(config), "lint.deepspeed.offload_stage")
    assert bool(errors) is expect_error
    if errors:
        assert errors[0].key_path == f"zero_optimization.{section}"


def test_pin_memory_checks():
    config = dict(BASE, zero_optimization={"stage": 3, "offload_param": {"device": "cpu", "pin_memory": False},
                                           "offload_optimizer": {"device": "none", "pin_memory": True}})
    warnings = by_code(lint(config), "lint.deepspeed.pin_memory")
    assert {w.key_path for w in warnings} == {"zero_optimization.offload_param.pin_memory",
                                              "zero_optimization.offload_optimizer.pin_memory"}
    assert all(w.severity is Severity.WARNING for w in warnings)


def test_stage3_keys_below_stage_3_warn():
    config = dict(BASE, zero_optimization={"stage": 2, "stage3_max_live_parameters": 1e9})
    [w] = by_code(lint(config), "lint.deepspeed.stage3_key")
    assert w.key_path == "zero_optimization.stage3_max_live_parameters"


def test_removed_key_named_with_the_version():
    config = dict(BASE, zero_optimization={"stage": 3, "zeropp_loco_param": {}})
    [msg] = by_code(lint(config), "lint.deepspeed.removed_key")
    assert "0.19.0 still accepted it" in msg.message


def test_key_newer_than_installed_deepspeed(monkeypatch):
    from packaging.version import Version

    from rocmcheck.lint import deepspeed as lint_module

    monkeypatch.setattr(lint_module.known_keys, "installed_deepspeed_version", lambda: Version("0.16.0"))
    config = dict(BASE, zero_optimization={"stage": 2, "compute_grad_norm": False})
    [msg] = by_code(lint(config), "lint.deepspeed.version_skew")
    assert msg.severity is Severity.ERROR
    assert "only DeepSpeed 0.19.8 and newer knows this key" in msg.message and "0.16.0 rejects it" in msg.message


@needs_deepspeed
def test_deepspeed_itself_confirms_the_seed_typo():
    messages = lint_deepspeed_config(seed_deepspeed_config())
    [typo] = by_code(messages, "lint.deepspeed.unknown_key")
    assert any("extra_forbidden" in d for d in typo.detail)  # DeepSpeed's own verdict, kept as evidence
    assert not by_code(messages, "lint.deepspeed.deep_skipped")


@needs_deepspeed
def test_deepspeed_catches_what_rocmcheck_rules_do_not():
    # partial offload (ratio < 1) is asserted by DeepSpeedZeroConfig itself; stage 7 by its enum
    config = dict(BASE, zero_optimization={"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}})
    [rejected] = by_code(lint_deepspeed_config(config), "lint.deepspeed.rejected")
    assert "Partial offloading only supported for ZeRO Stage 3" in rejected.message
    assert rejected.key_path == "zero_optimization"
    bad_stage = lint_deepspeed_config(dict(BASE, zero_optimization={"stage": 7}))
    [rejected] = by_code(bad_stage, "lint.deepspeed.rejected")
    assert rejected.key_path == "zero_optimization.stage"


@needs_deepspeed
def test_world_size_reaches_deepspeed_batch_assertion():
    config = dict(BASE, train_batch_size=64)
    assert not has_errors(lint_deepspeed_config(config, world_size=8))


def test_batch_mismatch_and_hf_mismatch_on_one_key_give_one_fix():
    # the HF Trainer's check says "auto", the batch arithmetic says 8: one message, one fix, both reasons
    config = dict(BASE, train_batch_size=32, train_micro_batch_size_per_gpu="auto", gradient_accumulation_steps="auto")
    settings = TrainingSettings(per_device_train_batch_size=2, gradient_accumulation_steps=1, bf16=True, world_size=4)
    [msg] = [m for m in lint(config, training=settings, world_size=4) if m.key_path == "train_batch_size"]
    assert msg.code == "lint.hf.mismatch" and msg.fix.text == 'train_batch_size: set it to "auto"'
    assert any("micro batch 2 x accumulation 1 x world size 4 = 8" in d for d in msg.detail)


@pytest.mark.parametrize("scheduler, stage, bf16, code", [
    ("CosineAnnealingLR", 2, False, "lint.deepspeed.torch_scheduler"),
    ("CosineAnnealingLR", 0, True, "lint.deepspeed.torch_scheduler"),  # the bf16 wrapper is no Optimizer either
    ("CosineAnnealingLR", 0, False, None),  # a bare torch optimizer: works
    ("WarmupCosineLR", 3, True, None),
    ("WarmupCosine", 3, True, "lint.deepspeed.scheduler_unknown"),
])
def test_scheduler_rules(scheduler, stage, bf16, code):
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": bf16}, "zero_optimization": {"stage": stage},
              "scheduler": {"type": scheduler}}
    found = [m for m in lint(config) if m.key_path == "scheduler.type"]
    assert [m.code for m in found] == ([code] if code else [])
    if code == "lint.deepspeed.scheduler_unknown":
        assert found[0].did_you_mean == "WarmupCosineLR"


def test_auto_that_nothing_fills():
    config = dict(BASE, zero_optimization={"stage": 3, "sub_group_size": "auto", "stage3_max_live_parameters": "auto",
                                           "max_live_parameters": "auto"})
    found = {m.key_path: m for m in lint(config) if m.code.startswith("lint.deepspeed.auto_un")}
    assert found["zero_optimization.sub_group_size"].code == "lint.deepspeed.auto_unfilled"
    assert found["zero_optimization.stage3_max_live_parameters"].code == "lint.deepspeed.auto_unfilled"
    unprefixed = found["zero_optimization.max_live_parameters"]
    # the stage3_ name is not filled either: no rename suggested, a number is the fix
    assert unprefixed.code == "lint.deepspeed.auto_unprefixed" and unprefixed.did_you_mean is None


def test_client_optimizer_offload_only_outside_the_hf_integration():
    config = dict(BASE, zero_optimization={"stage": 2, "offload_optimizer": {"device": "cpu"}})
    assert by_code(lint(config), "lint.deepspeed.client_optimizer_offload")
    assert not by_code(lint(dict(config, zero_force_ds_cpu_optimizer=False)), "lint.deepspeed.client_optimizer_offload")
    assert not by_code(lint(dict(config, optimizer={"type": "AdamW"})), "lint.deepspeed.client_optimizer_offload")
    # "auto" values: accelerate swaps a torch optimizer for DeepSpeedCPUAdam itself
    assert not by_code(lint(dict(config, gradient_clipping="auto")), "lint.deepspeed.client_optimizer_offload")


@needs_deepspeed
def test_scheduler_names_match_the_installed_deepspeed_and_torch():
    import json
    import os
    import subprocess
    import sys

    from lint_helpers import REPO

    from rocmcheck.lint.deepspeed_rules import DEEPSPEED_SCHEDULERS, TORCH_SCHEDULERS

    code = ("import inspect, json, torch.optim.lr_scheduler as s\n"
            "from deepspeed.runtime.lr_schedules import VALID_LR_SCHEDULES\n"
            "names = sorted(n for n, o in vars(s).items() if inspect.isclass(o) and not n.startswith('_') "
            "and n != 'LRScheduler' and (issubclass(o, s.LRScheduler) or n == 'ReduceLROnPlateau'))\n"
            "print(json.dumps({'ds': list(VALID_LR_SCHEDULES), 'torch': names}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         env=dict(os.environ, DS_ACCELERATOR="cpu", PYTHONPATH=str(REPO)))
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(found["ds"]) == sorted(DEEPSPEED_SCHEDULERS)
    assert found["torch"] == sorted(TORCH_SCHEDULERS)


# --- the consumer decides what "auto" and a hard-coded precision mean -------------------------------------------

HF_STYLE = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
            "gradient_clipping": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2,
                                                                                         "reduce_bucket_size": "auto"},
            "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}


def test_auto_is_an_error_for_deepspeed_initialize_where_it_stays_a_string():
    found = {m.key_path: m for m in by_code(lint(HF_STYLE, consumer=DEEPSPEED_INITIALIZE),
                                            "lint.deepspeed.auto_not_filled")}
    for key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
        assert found[key].is_error and "'>' not supported between instances of 'str' and 'int'" in found[key].message
    assert found["gradient_clipping"].is_error and found["optimizer.params.lr"].is_error
    # pydantic sections drop "auto": a silent default, a warning (bf16 off means fp32)
    assert found["bf16.enabled"].severity is Severity.WARNING and "fp32" in found["bf16.enabled"].message
    assert found["zero_optimization.reduce_bucket_size"].severity is Severity.WARNING
    assert all(m.consumer == "deepspeed.initialize" for m in found.values())
    assert found["train_batch_size"].fix.text == "train_batch_size: set it to a positive integer"


def test_auto_is_fine_for_the_hf_trainer_and_accelerate():
    for consumer in (HF_TRAINER, ACCELERATE_LAUNCH):
        messages = lint(HF_STYLE, consumer=consumer)
        assert not has_errors(messages) and not by_code(messages, "lint.deepspeed.auto_not_filled")
        assert {m.consumer for m in messages} == {consumer.label}


@needs_deepspeed
def test_deepspeed_itself_refuses_auto_batch_values():
    """The reason for the rule, measured with the installed DeepSpeed: its config class does not fill "auto"."""
    import subprocess
    import sys

    code = ("from deepspeed.runtime.config import DeepSpeedConfig\n"
            "try:\n    DeepSpeedConfig({'train_batch_size': 'auto', 'train_micro_batch_size_per_gpu': 'auto', "
            "'gradient_accumulation_steps': 'auto'})\nexcept TypeError as e:\n    print('TypeError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "DS_ACCELERATOR": "cpu"})
    assert "TypeError: '>' not supported between instances of 'str' and 'int'" in out.stdout, out.stderr[-2000:]


def test_a_hard_coded_precision_warns_for_the_hf_trainer_alone():
    config = dict(BASE, fp16={"enabled": True}, bf16={"enabled": False})
    [warn] = by_code(lint(config, consumer=HF_TRAINER), "lint.hf.precision_hard_coded")
    assert warn.severity is Severity.WARNING and warn.key_path == "fp16.enabled"
    assert "unless the run sets fp16: true" in warn.message and warn.fix.text == 'fp16.enabled: set it to "auto"'
    assert not by_code(lint(config, consumer=DEEPSPEED_INITIALIZE), "lint.hf.precision_hard_coded")


@pytest.mark.parametrize("run_bf16, run_fp16, ds_section", [(True, False, "fp16"), (False, True, "bf16")])
def test_a_hard_coded_precision_the_training_file_disagrees_with_fails(run_bf16, run_fp16, ds_section):
    """bf16: true in the training file with fp16.enabled: true in the DeepSpeed config, and the other way round:
    HfTrainerDeepSpeedConfig.trainer_config_process stops on either."""
    other = "bf16" if ds_section == "fp16" else "fp16"
    config = dict(BASE, **{ds_section: {"enabled": True}, other: {"enabled": "auto"}})
    settings = TrainingSettings(per_device_train_batch_size=2, gradient_accumulation_steps=4, bf16=run_bf16,
                                fp16=run_fp16)
    messages = lint(config, training=settings)
    [err] = by_code(messages, "lint.hf.mismatch")
    assert err.is_error and err.key_path == f"{ds_section}.enabled" and err.consumer == "the HF Trainer"
    assert not by_code(messages, "lint.hf.precision_hard_coded")  # the training file says: no guess
