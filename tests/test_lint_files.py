"""lint_file and `rocmcheck lint`: file kinds, the deepspeed: pointer, exit codes, and what happens
when DeepSpeed is missing, broken or hangs (real child processes, fake deepspeed modules on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lint_helpers import REPO, by_code, seed_deepspeed_config, write_json

from rocmcheck.errors import BadInput
from rocmcheck.lint import Severity, detect_kind, lint_file
from rocmcheck.lint.deepspeed_deep import run_deep_validation

SEED_YAML = """\
model_name_or_path: meta-llama/Meta-Llama-3-70B-Instruct
stage: sft
do_train: true
finetuning_type: lora
deepspeed: {ds}
dataset: alpaca_en_demo
template: llama3
output_dir: saves/x
per_device_train_batch_size: 12
gradient_accumulation_steps: 8
bf16: true
"""


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (full_env.get("PYTHONPATH"), str(REPO)) if p)
    return subprocess.run([sys.executable, "-m", "rocmcheck", "lint", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO, timeout=120)


def test_detect_kind():
    assert detect_kind({"stage": "sft", "deepspeed": "x.json"}) == "llamafactory"
    assert detect_kind({"output_dir": "o", "per_device_train_batch_size": 2}) == "training_args"
    assert detect_kind({"zero_optimisation": {}}) == "deepspeed"  # recognised by its near-miss too
    assert detect_kind({"hello": 1}) is None


def test_llamafactory_yaml_lints_the_deepspeed_config_it_points_to(tmp_path, monkeypatch):
    ds = write_json(tmp_path / "zero3_offload.json", seed_deepspeed_config())
    yaml_file = tmp_path / "train.yaml"
    yaml_file.write_text(SEED_YAML.format(ds=ds))
    monkeypatch.chdir(tmp_path)
    messages = lint_file(yaml_file, deep=False)
    [typo] = by_code(messages, "lint.deepspeed.unknown_key")
    assert typo.file == str(ds) and typo.key_path == "zero_optimization.stage3_parition_grads"
    assert by_code(messages, "lint.deepspeed.batch_missing")[0].fix.startswith('add "train_micro_batch_size_per_gpu": "auto"')


def test_training_values_resolve_auto_and_catch_mismatch(tmp_path):
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4,
              "train_batch_size": "auto", "bf16": {"enabled": "auto"}}
    ds = write_json(tmp_path / "ds.json", config)
    args = tmp_path / "args.json"
    write_json(args, {"output_dir": "o", "per_device_train_batch_size": 12, "gradient_accumulation_steps": 8,
                      "bf16": True, "deepspeed": str(ds)})
    [mismatch] = by_code(lint_file(args, deep=False), "lint.hf.mismatch")
    assert mismatch.key_path == "gradient_accumulation_steps" and "gradient_accumulation_steps=8" in mismatch.message


def test_deepspeed_path_relative_to_cwd_first_then_to_the_yaml(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    write_json(tmp_path / "cfg" / "ds.json", {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}})
    yaml_file = tmp_path / "cfg" / "train.yaml"
    yaml_file.write_text(SEED_YAML.format(ds="ds.json"))
    monkeypatch.chdir(tmp_path)  # LLaMA-Factory would not find ds.json from here
    [warn] = by_code(lint_file(yaml_file, deep=False), "lint.training.deepspeed_relative")
    assert warn.severity is Severity.WARNING
    monkeypatch.chdir(tmp_path / "cfg")
    assert not by_code(lint_file(yaml_file, deep=False), "lint.training.deepspeed_relative")
    yaml_file.write_text(SEED_YAML.format(ds="missing.json"))
    [err] = by_code(lint_file(yaml_file, deep=False), "lint.training.deepspeed_missing")
    assert err.is_error


def test_training_file_with_bf16_and_fp16(tmp_path):
    args = write_json(tmp_path / "args.json", {"output_dir": "o", "bf16": True, "fp16": True})
    assert by_code(lint_file(args, deep=False), "lint.training.bf16_and_fp16")


@pytest.mark.parametrize("name, content, needle", [
    ("missing.json", None, "no such file"),
    ("bad.json", '{"zero_optimization": {"stage": 3,}}', "not valid JSON (line 1"),
    ("bad.yaml", "stage: sft\n  deepspeed: [", "not valid YAML"),
    ("dup.json", '{"bf16": {"enabled": true}, "bf16": {"enabled": false}}', 'key "bf16" appears twice'),
    ("list.json", "[1, 2]", "expected a mapping"),
    ("other.json", '{"hello": 1}', "not a DeepSpeed config"),
])
def test_unreadable_files_raise_input_error(tmp_path, name, content, needle):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(BadInput, match=needle.replace("(", r"\(").replace("[", r"\[")):
        lint_file(path, deep=False)


def test_cli_exit_codes_and_one_line_for_bad_files(tmp_path):
    seed = write_json(tmp_path / "seed.json", seed_deepspeed_config())
    clean = write_json(tmp_path / "clean.json", {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}})
    fake_ds = tmp_path / "no_ds"
    fake_ds.mkdir()
    (fake_ds / "deepspeed.py").write_text("raise ImportError('simulated: deepspeed not installed')\n")
    quick = {"PYTHONPATH": str(fake_ds)}  # keep these CLI runs fast: DeepSpeed "missing"
    bad = run_cli(str(tmp_path / "nope.json"), env=quick)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert "nope.json: no such file" in bad.stderr
    assert run_cli(str(clean), env=quick).returncode == 0
    result = run_cli(str(seed), "--world-size", "8", env=quick)
    assert result.returncode == 1
    assert "zero_optimization.stage3_parition_grads: error:" in result.stdout
    as_json = json.loads(run_cli(str(seed), "--json", env=quick).stdout)
    assert as_json["errors"] == 2 and as_json["command"] == "lint" and as_json["schema_version"] == 2
    assert {r["status"] for r in as_json["results"]} == {"fail", "skip"}
    assert run_cli(str(seed), "--world-size", "0", env=quick).returncode == 2


def test_without_deepspeed_lint_still_runs_and_says_deep_validation_was_skipped(tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "deepspeed.py").write_text("raise ImportError('No module named deepspeed (simulated)')\n")
    seed = write_json(tmp_path / "seed.json", seed_deepspeed_config())
    result = run_cli(str(seed), env={"PYTHONPATH": str(fake)})
    assert result.returncode == 1
    assert "validation by DeepSpeed's own config classes skipped: import deepspeed failed: ImportError" in result.stdout
    assert "stage3_parition_grads" in result.stdout  # rocmcheck's own checks still ran


def test_hung_deepspeed_becomes_a_skip_not_a_hang(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "deepspeed.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    result = run_deep_validation({"train_micro_batch_size_per_gpu": 1}, 1, timeout=3)
    assert not result.ran and "did not finish within 3 s" in result.skipped_reason


def test_crashing_deepspeed_becomes_a_skip(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "deepspeed.py").write_text("import os\nos.abort()\n")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    result = run_deep_validation({"train_micro_batch_size_per_gpu": 1}, 1, timeout=30)
    assert not result.ran and "crashed (killed by signal" in result.skipped_reason
