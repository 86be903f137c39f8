"""accelerate config YAMLs, judged by accelerate's own code (a real child process that imports the installed
accelerate, once for all the files here) and by the rules for what accelerate does not check: nested keys its
launcher never reads, the DeepSpeed config file it names, and the DeepSpeed values it hands the HF Trainer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from lint_helpers import by_code

from rocmcheck.lint import Severity, lint_file
from rocmcheck.lint.accelerate_config import check_with_accelerate, working_directory
from rocmcheck.lint.loading import load_mapping
from rocmcheck.lint.run import LintRun

BASE = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "mixed_precision": "bf16",
        "num_machines": 1, "num_processes": 8, "machine_rank": 0, "main_training_function": "main"}
INLINE_DS = {**BASE, "distributed_type": "DEEPSPEED", "mixed_precision": "fp16",
             "deepspeed_config": {"gradient_accumulation_steps": 4, "gradient_clipping": 0.5, "zero_stage": 2,
                                  "offload_optimizer_device": "none", "offload_param_device": "none"}}
FP16_DS_FILE = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto"}
FILES = {
    "typo.yaml": {**{k: v for k, v in BASE.items() if k != "num_processes"}, "num_proceses": 8},
    "fsdp.yaml": {**BASE, "distributed_type": "FSDP", "fsdp_config": {
        "fsdp_sharding_stratgy": "FULL_SHARD", "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "colour": "blue"}},
    "inline.yaml": INLINE_DS,
    "bf16_over_fp16_file.yaml": {**BASE, "distributed_type": "DEEPSPEED", "mixed_precision": "bf16",
                                 "deepspeed_config": {"deepspeed_config_file": "fp16_ds.json"}},
    "clean.yaml": BASE,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The configs, asked of accelerate's own code in one child (importing accelerate takes seconds)."""
    root = tmp_path_factory.mktemp("accelerate")
    (root / "fp16_ds.json").write_text(json.dumps(FP16_DS_FILE))
    for name, data in FILES.items():
        (root / name).write_text(yaml.safe_dump(data))
    scratch = tmp_path_factory.mktemp("accelerate-child-tmp")
    home, tmpdir = Path.cwd(), os.environ.get("TMPDIR")
    os.chdir(root)
    os.environ["TMPDIR"] = str(scratch)  # the child's temporary folders, to see that none is left behind
    try:
        check_with_accelerate([(root / n, load_mapping(root / n), working_directory(load_mapping(root / n), root / n))
                               for n in FILES])
    finally:
        os.chdir(home)
        if tmpdir is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = tmpdir
    (root / "child-tmp").symlink_to(scratch)
    return root


def lint_here(folder: Path, name: str, monkeypatch, **kw):
    monkeypatch.chdir(folder)
    return lint_file(folder / name, **kw)


def test_an_unknown_top_level_key_is_accelerates_own_error_with_a_suggestion(folder, monkeypatch):
    [m] = by_code(lint_here(folder, "typo.yaml", monkeypatch), "lint.accelerate.unknown_key")
    assert m.is_error and m.key_path == "num_proceses" and m.did_you_mean == "num_processes"
    assert m.consumer == "accelerate launch" and " for accelerate launch: " in m.render()
    assert any("had unknown keys (['num_proceses'])" in line for line in m.detail)  # accelerate's own words
    assert m.fix.text == 'num_proceses: rename it to "num_processes"'


def test_the_child_leaves_no_temporary_folder_behind(folder):
    """The child checks typo.yaml again from a copy without its unknown key, written in a temporary folder."""
    assert list((folder / "child-tmp").iterdir()) == []


def test_a_nested_key_the_launcher_never_reads_is_named(folder, monkeypatch):
    found = {m.key_path: m for m in by_code(lint_here(folder, "fsdp.yaml", monkeypatch), "lint.accelerate.ignored_key")}
    assert set(found) == {"fsdp_config.fsdp_sharding_stratgy", "fsdp_config.colour"}
    typo = found["fsdp_config.fsdp_sharding_stratgy"]
    assert typo.is_error and typo.did_you_mean == "fsdp_sharding_strategy" and "ignored without a word" in typo.message
    assert found["fsdp_config.colour"].severity is Severity.WARNING  # nothing close: maybe meant for a newer release


def test_mixed_precision_against_the_deepspeed_file_is_accelerates_own_refusal(folder, monkeypatch):
    messages = lint_here(folder, "bf16_over_fp16_file.yaml", monkeypatch)
    [m] = by_code(messages, "lint.accelerate.config_file_conflict")
    assert m.key_path == "mixed_precision" and m.is_error
    assert any("will be ignored" in line for line in m.detail)
    # the DeepSpeed file it names is linted too, for accelerate launch
    assert {x.consumer for x in messages if x.file == "fp16_ds.json"} == {"accelerate launch"}


def test_inline_deepspeed_values_are_checked_against_a_training_file_linted_alongside(folder, monkeypatch):
    """hiyouga/LlamaFactory#201: deepspeed_config.gradient_accumulation_steps 4, the script's 2."""
    monkeypatch.chdir(folder)
    (folder / "args.json").write_text(json.dumps({"output_dir": "o", "per_device_train_batch_size": 4,
                                                  "gradient_accumulation_steps": 2, "max_grad_norm": 0.5,
                                                  "fp16": True}))
    run = LintRun(options={"deep": True})
    run.lint_all([str(folder / "inline.yaml"), str(folder / "args.json")])
    [m] = by_code(run.messages, "lint.hf.mismatch")
    assert m.file == str(folder / "inline.yaml") and m.key_path == "deepspeed_config.gradient_accumulation_steps"
    assert "4 in the DeepSpeed config accelerate builds" in m.message and "gradient_accumulation_steps=2" in m.message
    assert "args.json" in m.message and "Please correct the following DeepSpeed config values" in m.message
    assert m.fix.text == "deepspeed_config.gradient_accumulation_steps: delete it"


def test_mixed_precision_the_training_file_does_not_run_is_a_mismatch(folder, monkeypatch):
    monkeypatch.chdir(folder)
    (folder / "args_bf16.json").write_text(json.dumps({"output_dir": "o", "gradient_accumulation_steps": 4,
                                                       "max_grad_norm": 0.5, "bf16": True}))
    run = LintRun(options={"deep": True})
    run.lint_all([str(folder / "inline.yaml"), str(folder / "args_bf16.json")])
    found = {m.key_path for m in by_code(run.messages, "lint.hf.mismatch")}
    assert found == {"mixed_precision"}  # fp16 here, bf16 in the training arguments (fp16.enabled and bf16.enabled)


def test_the_command_lines_gradient_accumulation_is_compared(folder, monkeypatch):
    [m] = by_code(lint_here(folder, "inline.yaml", monkeypatch, grad_accum=2), "lint.hf.mismatch")
    assert m.key_path == "deepspeed_config.gradient_accumulation_steps" and "lint's command line" in m.message
    assert by_code(lint_here(folder, "inline.yaml", monkeypatch, grad_accum=4), "lint.hf.mismatch") == []
    assert by_code(lint_here(folder, "inline.yaml", monkeypatch), "lint.hf.mismatch") == []  # nothing to compare


def test_a_clean_config_passes_for_accelerate_launch(folder, monkeypatch):
    monkeypatch.chdir(folder)
    run = LintRun(options={"deep": True})
    run.lint_all([str(folder / "clean.yaml")])
    assert [m.render() for m in run.messages] == []
    [clean] = [r for r in run.results() if r.id == "lint.file.clean"]
    assert clean.summary.endswith("no errors or warnings for accelerate launch")


def test_the_deepspeed_config_file_is_found_as_accelerate_finds_it(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ds.json").write_text(json.dumps(FP16_DS_FILE))
    config = {**BASE, "distributed_type": "DEEPSPEED", "deepspeed_config": {"deepspeed_config_file": "ds.json"}}
    (tmp_path / "sub" / "acc.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    [rel] = by_code(lint_file(tmp_path / "sub" / "acc.yaml", deep=False), "lint.accelerate.deepspeed_config_relative")
    assert rel.severity is Severity.WARNING and "launch from" in rel.message
    (tmp_path / "sub" / "ds.json").unlink()
    [missing] = by_code(lint_file(tmp_path / "sub" / "acc.yaml", deep=False),
                        "lint.accelerate.deepspeed_config_missing")
    assert missing.is_error and missing.key_path == "deepspeed_config.deepspeed_config_file"


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_deepspeed_config_file_that_is_no_file_is_an_error_and_never_reaches_accelerate(tmp_path, monkeypatch,
                                                                                          kind):
    """accelerate's own classes would open it with a plain read (a FIFO blocks their child, /dev/zero fills its
    memory): lint names it and does not start the child for it."""
    from rocmcheck.lint import accelerate_config

    def no_child(*args, **kw):
        raise AssertionError("the accelerate child was started for an unreadable deepspeed_config_file")

    monkeypatch.setattr(accelerate_config, "run_child", no_child)
    target = tmp_path / "ds.json"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    config = {**BASE, "distributed_type": "DEEPSPEED", "deepspeed_config": {"deepspeed_config_file": str(target)}}
    (tmp_path / "acc.yaml").write_text(yaml.safe_dump(config))
    check_with_accelerate([(tmp_path / "acc.yaml", config, str(tmp_path))])  # answered without a child
    messages = lint_file(tmp_path / "acc.yaml")
    assert by_code(messages, "lint.accelerate.deepspeed_config_missing")[0].is_error
    assert not by_code(messages, "lint.accelerate.deep_skipped")


def test_distributed_type_no_with_several_processes_warns(tmp_path):
    (tmp_path / "single.yaml").write_text(yaml.safe_dump({**BASE, "distributed_type": "NO"}))
    [m] = by_code(lint_file(tmp_path / "single.yaml", deep=False), "lint.accelerate.num_processes_unused")
    assert m.severity is Severity.WARNING and "num_processes 8 is not used" in m.message


def test_without_accelerate_the_check_says_it_was_skipped(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "accelerate.py").write_text("raise ImportError('simulated: accelerate not installed')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    (tmp_path / "alone.yaml").write_text(yaml.safe_dump({**BASE, "num_machines": 2}))
    [m] = by_code(lint_file(tmp_path / "alone.yaml"), "lint.accelerate.deep_skipped")
    assert m.severity is Severity.INFO and "import accelerate failed: ImportError" in m.message


def test_a_key_a_later_supported_release_removed_fails_where_the_installed_release_refuses_it(tmp_path):
    """An `accelerate config` file of the releases that had IPEX (huggingface/peft's, tests/fixtures/public-configs):
    accelerate 1.13.0 and newer refuse `ipex_config`. The key table (scripts/accelerate_key_history.py, from the
    wheels) says so without asking accelerate: an error where the installed release refuses it, a warning (the
    file works until an upgrade) where it still reads it."""
    from packaging.version import Version

    from rocmcheck.lint.accelerate_config import removed_keys

    fixture = Path(__file__).parent / "fixtures" / "public-configs" / "failing"
    [m] = lint_file(fixture / "accelerate-peft-deepspeed_xpu_config.yaml", deep=False)
    assert m.code == "lint.accelerate.removed_key" and m.key_path == "ipex_config" and m.line == 12
    assert "1.3.0 to 1.12.0 read it" in m.message and m.fix.text == "ipex_config: delete it"
    data = {"ipex_config": {"ipex": False}}
    [new] = removed_keys(data, "c.yaml", "accelerate", Version("1.16.0"))
    [old] = removed_keys(data, "c.yaml", "accelerate", Version("1.12.0"))
    [unknown] = removed_keys(data, "c.yaml", "accelerate", None)
    assert new.is_error and "installed accelerate 1.16.0 refuses it" in new.message
    assert old.severity is Severity.WARNING and "the installed 1.12.0 still reads it" in old.message
    assert unknown.severity is Severity.WARNING and "1.13.0 and newer no longer have it" in unknown.message
    for key in ("parallelism_config", "mixed_precision", "fp16"):  # added later, kept, or converted: not removed
        (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, key: {} if key.endswith("_config") else "no"}))
        assert not by_code(lint_file(tmp_path / "c.yaml", deep=False), "lint.accelerate.removed_key")
