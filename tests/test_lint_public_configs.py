"""Real configs (tests/fixtures/public-configs, README there): the working ones from accelerate,
LLaMA-Factory, axolotl, DeepSpeedExamples and transformers lint with no error; the ones that broke
real runs (public threads) are each caught, with one fix per key."""

from __future__ import annotations

import shutil

import pytest
from lint_helpers import REPO, by_code
from packaging.version import Version

from rocmcheck.fixes import FixKind
from rocmcheck.lint import Severity, lint_file
from rocmcheck.lint import deepspeed as lint_deepspeed

FIXTURES = REPO / "tests" / "fixtures" / "public-configs"
WORKING = sorted(p.name for p in (FIXTURES / "working").iterdir())


def errors(messages):
    return [m.render() for m in messages if m.severity is Severity.ERROR]


@pytest.fixture
def lf_root(tmp_path, monkeypatch):
    """A LLaMA-Factory checkout's layout: the YAMLs run from the root and name examples/deepspeed/*.json."""
    ds_dir = tmp_path / "examples" / "deepspeed"
    ds_dir.mkdir(parents=True)
    for path in (FIXTURES / "working").glob("llamafactory-ds_*.json"):
        shutil.copy(path, ds_dir / path.name.removeprefix("llamafactory-"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_lists_every_fixture():
    readme = (FIXTURES / "README.md").read_text()
    for folder in ("working", "failing"):
        for path in (FIXTURES / folder).iterdir():
            assert path.name in readme, path.name
    assert len(WORKING) >= 25
    assert {"accelerate", "llamafactory", "axolotl", "deepspeedexamples", "transformers"} == \
        {name.split("-", 1)[0] for name in WORKING}


@pytest.mark.parametrize("name", WORKING)
def test_working_public_config_has_no_error(name, lf_root):
    shutil.copy(FIXTURES / "working" / name, lf_root / name)
    messages = lint_file(lf_root / name, deep=False, hidden_size=4096)  # their GPU counts differ
    assert errors(messages) == []


def test_nvme_partial_offload_is_caught():
    messages = lint_file(FIXTURES / "failing" / "deepspeed-4872-nvme-ratio.json", deep=False)
    [err] = by_code(messages, "lint.deepspeed.partial_offload_nvme")
    assert err.is_error and err.key_path == "zero_optimization.offload_optimizer.ratio" and err.line == 18
    assert err.fix.kind is FixKind.EDIT and '"device": "cpu"' in err.fix.text and err.fix.file == err.file


def test_torch_scheduler_under_zero_is_caught():
    [err] = by_code(lint_file(FIXTURES / "failing" / "deepspeed-3492-torch-scheduler.json", deep=False),
                    "lint.deepspeed.torch_scheduler")
    assert err.is_error and "is not an Optimizer" in err.message and err.line == 5


def test_unprefixed_zero3_auto_is_caught_with_the_stage3_name():
    messages = lint_file(FIXTURES / "failing" / "unprefixed-auto-zero3.json", deep=False)
    found = {m.key_path: m for m in by_code(messages, "lint.deepspeed.auto_unprefixed")}
    assert set(found) == {"zero_optimization.prefetch_bucket_size", "zero_optimization.param_persistence_threshold"}
    assert found["zero_optimization.prefetch_bucket_size"].did_you_mean == "stage3_prefetch_bucket_size"
    assert "not found in kwargs" in found["zero_optimization.prefetch_bucket_size"].message
    assert not by_code(messages, "lint.deepspeed.auto_unfilled")  # reduce_bucket_size "auto" is filled


def test_client_optimizer_offload_is_caught():
    [warn] = by_code(lint_file(FIXTURES / "failing" / "lmflow-693-client-optimizer-offload.json", deep=False),
                     "lint.deepspeed.client_optimizer_offload")
    assert warn.severity is Severity.WARNING and "client provided optimizer" in warn.message


def test_hard_coded_values_contradicting_training_arguments_get_one_fix_each(tmp_path, monkeypatch):
    for name in ("apps-9-mismatch.json", "apps-9-training-args.json"):
        shutil.copy(FIXTURES / "failing" / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    messages = lint_file(tmp_path / "apps-9-training-args.json", world_size=8, deep=False)
    mismatches = {m.key_path for m in by_code(messages, "lint.hf.mismatch")}
    assert mismatches == {"train_batch_size", "optimizer.params.lr", "scheduler.params.warmup_max_lr"}
    keyed = [(m.file, m.key_path) for m in messages if m.fix and m.severity is not Severity.INFO]
    assert len(keyed) == len(set(keyed))  # never two fixes for one key ("auto" and 128)
    [batch] = [m for m in messages if m.key_path == "train_batch_size"]
    assert batch.fix.text == 'train_batch_size: set it to "auto"' and batch.fix.file == batch.file
    assert "128" in batch.message


def test_warmup_steps_contradicting_the_deepspeed_scheduler(tmp_path, monkeypatch):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "scheduler": {"type": "WarmupLR", '
                                      '"params": {"warmup_num_steps": 500}}}')
    (tmp_path / "args.json").write_text('{"output_dir": "o", "warmup_steps": 20, "deepspeed": "ds.json"}')
    monkeypatch.chdir(tmp_path)
    [m] = by_code(lint_file(tmp_path / "args.json", deep=False), "lint.hf.mismatch")
    assert m.key_path == "scheduler.params.warmup_num_steps" and "warmup_steps=20" in m.message


@pytest.mark.parametrize("transformers, deepspeed, hidden, expect", [
    ("4.44.2", "0.15.0", 4096, "error"),    # the thread's stack: 15099494.4
    ("4.44.2", "0.14.4", 4096, None),       # pydantic v1 DeepSpeed coerced the float
    ("4.45.0", "0.15.0", 4096, None),       # transformers casts to int
    ("4.44.2", "0.15.0", None, "warning"),  # hidden size unknown: say what to pass
    ("4.44.2", "0.15.0", 5120, None),       # 0.9 x 5120^2 = 23592960.0: an integer, accepted
])
def test_float_prefetch_bucket_is_version_aware(transformers, deepspeed, hidden, expect, lf_root, monkeypatch):
    monkeypatch.setattr(lint_deepspeed, "installed_transformers_version", lambda: Version(transformers))
    monkeypatch.setattr(lint_deepspeed.known_keys, "installed_deepspeed_version", lambda: Version(deepspeed))
    yaml_file = lf_root / "train.yaml"
    shutil.copy(FIXTURES / "failing" / "llamafactory-v0.9.0-llama3_lora_sft_ds3.yaml", yaml_file)
    found = by_code(lint_file(yaml_file, deep=False, hidden_size=hidden), "lint.deepspeed.prefetch_float")
    assert [m.severity.value for m in found] == ([expect] if expect else [])
    if expect == "error":
        assert "15099494.4" in found[0].message
        assert found[0].fix.text == "zero_optimization.stage3_prefetch_bucket_size: set it to 15099494"


def test_hidden_size_read_from_the_models_config_json(lf_root, monkeypatch):
    monkeypatch.setattr(lint_deepspeed, "installed_transformers_version", lambda: Version("4.44.2"))
    monkeypatch.setattr(lint_deepspeed.known_keys, "installed_deepspeed_version", lambda: Version("0.15.0"))
    model = lf_root / "Meta-Llama-3-8B-Instruct"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096}')
    text = (FIXTURES / "failing" / "llamafactory-v0.9.0-llama3_lora_sft_ds3.yaml").read_text()
    (lf_root / "train.yaml").write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", str(model)))
    [err] = by_code(lint_file(lf_root / "train.yaml", deep=False), "lint.deepspeed.prefetch_float")
    assert err.is_error
