"""Training files judged by their owners' parsers: LLaMA-Factory YAML and HF TrainingArguments keys
(misspelt, removed in a transformers release), with line numbers and one suggestion; duplicate YAML keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from lint_helpers import REPO, by_code
from packaging.version import Version

from rocmcheck.errors import BadInput
from rocmcheck.fixes import edit
from rocmcheck.lint import Severity, lint_file, training_keys
from rocmcheck.lint.run import LintRun
from rocmcheck.lint.script_args import script_keys
from rocmcheck.lint.training_values import check_values

LF_YAML = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
### method
stage: sft
do_train: true
finetuning_type: lora
lora_rnk: 8
lora_target: all
### dataset
dataset: alpaca_en_demo
template: llama3
cutof_len: 2048
### train
output_dir: saves/x
per_device_train_batch_size: 1
gradient_accumulaton_steps: 8
warmup_ratio: 0.1
overwrite_output_dir: true
bf16: true
"""
HF_ARGS = {"output_dir": "out", "per_device_train_batch_size": 4, "gradient_accumulaton_steps": 8,
           "warmup_ratio": 0.1, "overwrite_output_dir": True, "learning_rate": 2e-5, "bf16": True}


def test_llamafactory_misspellings_are_caught_with_line_and_suggestion(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(LF_YAML)
    messages = lint_file(path, deep=False)
    found = {m.key_path: m for m in by_code(messages, "lint.training.unknown_key")}
    assert {k: (m.line, m.did_you_mean) for k, m in found.items()} == {
        "lora_rnk": (7, "lora_rank"), "cutof_len": (12, "cutoff_len"),
        "gradient_accumulaton_steps": (16, "gradient_accumulation_steps")}
    assert all(m.is_error and "Some keys are not used by the HfArgumentParser" in m.message for m in found.values())
    assert found["lora_rnk"].render().startswith(
        f"{path}:7: lora_rnk: error [lint.training.unknown_key] for llamafactory-cli train:")
    assert found["lora_rnk"].fix == edit(str(path), 'lora_rnk: rename it to "lora_rank"')
    # LLaMA-Factory 0.9.5 accepts transformers <= 5.6.0, which still has warmup_ratio, and defines
    # overwrite_output_dir itself: both fine in its YAML
    assert not {"warmup_ratio", "overwrite_output_dir"} & {m.key_path for m in messages}
    [source] = by_code(messages, "lint.training.keys_source")
    assert "LLaMA-Factory 0.9.5" in source.message and source.severity is Severity.INFO


def test_training_arguments_removed_and_misspelt_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(training_keys, "installed_transformers_version", lambda: Version("5.24.0"))
    path = tmp_path / "args.json"
    path.write_text(json.dumps(HF_ARGS, indent=1))
    messages = lint_file(path, deep=False)
    removed = {m.key_path: m for m in by_code(messages, "lint.training.removed_key")}
    assert set(removed) == {"warmup_ratio", "overwrite_output_dir"}
    assert "removed from transformers after 5.14.0" in removed["warmup_ratio"].message
    assert "transformers 5.24.0 TrainingArguments rejects it" in removed["warmup_ratio"].message
    assert removed["warmup_ratio"].did_you_mean == "warmup_steps" and removed["warmup_ratio"].line == 5
    assert "after 4.57.6" in removed["overwrite_output_dir"].message
    [typo] = by_code(messages, "lint.training.unknown_key")
    assert (typo.key_path, typo.did_you_mean, typo.line) == ("gradient_accumulaton_steps",
                                                             "gradient_accumulation_steps", 4)


def test_training_arguments_judged_by_the_installed_release(tmp_path, monkeypatch):
    # on transformers 4.57.6 both keys still work: warn that transformers 5 breaks the file, no error
    monkeypatch.setattr(training_keys, "installed_transformers_version", lambda: Version("4.57.6"))
    path = tmp_path / "args.json"
    path.write_text(json.dumps({k: v for k, v in HF_ARGS.items() if k != "gradient_accumulaton_steps"}))
    messages = lint_file(path, deep=False)
    assert not [m for m in messages if m.is_error]
    later = {m.key_path for m in by_code(messages, "lint.training.removed_later")}
    assert later == {"warmup_ratio", "overwrite_output_dir"}


def test_script_arguments_are_a_note_not_an_error(tmp_path):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"output_dir": "o", "model_name_or_path": "gpt2", "dataset_name": "wikitext"}))
    messages = lint_file(path, deep=False)
    [note] = by_code(messages, "lint.training.script_keys")
    assert note.severity is Severity.INFO and "model_name_or_path, dataset_name" in note.message


def test_duplicate_yaml_key_refuses_the_file(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(LF_YAML + "bf16: false\n")
    with pytest.raises(BadInput, match=r'key "bf16" appears twice \(lines 19 and 20\)'):
        lint_file(path, deep=False)
    out = subprocess.run([sys.executable, "-m", "rocmcheck", "lint", str(path)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "appears twice" in out.stderr  # bad input


def test_yaml_merge_keys_may_override():
    from pathlib import Path

    from rocmcheck.lint.loading import load_mapping

    path = Path(os.environ.get("TMPDIR", "/tmp")) / "rocmcheck-merge-test.yaml"
    path.write_text("base: &b {lr: 1}\nrun:\n  <<: *b\n  lr: 2\nstage: sft\n")
    try:
        assert load_mapping(path)["run"] == {"lr": 2}
    finally:
        path.unlink()


def test_installed_transformers_keys_are_what_parse_dict_rejects():
    """The child's keys against transformers' real parse_dict(allow_extra_keys=False) on this machine
    (use_cpu so that constructing TrainingArguments works on a CPU box)."""
    vocab = training_keys.hf_vocabulary()
    assert vocab.note is None, vocab.note  # the installed classes answered
    args = dict(HF_ARGS, use_cpu=True, lora_rnk=8)
    code = ("import json, sys\nfrom transformers import HfArgumentParser, TrainingArguments\n"
            "try:\n"
            "    HfArgumentParser(TrainingArguments).parse_dict(json.loads(sys.argv[1]), allow_extra_keys=False)\n"
            "except ValueError as e:\n    print(str(e))\n")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, timeout=300)
    expected = sorted(k for k in args if k not in vocab.keys)
    assert f"{training_keys.PARSE_DICT_ERROR}: {expected}" in out.stdout, out.stderr[-2000:]


@pytest.mark.side_venv
@pytest.mark.skipif(training_keys.llamafactory_python() is None,
                    reason="llamafactory not importable (set ROCMCHECK_LLAMAFACTORY_PYTHON, see docs/recipes.md)")
def test_llamafactory_classes_and_the_stored_table_agree():
    table = training_keys.llamafactory_table()
    for command in ("train", "eval", "export", "chat"):
        real = training_keys.llamafactory_vocabulary(command)
        stored = training_keys.llamafactory_vocabulary(command, use_installed=False)
        assert real.note and real.note.startswith("its own argument classes"), real.note
        assert real.owner == f"LLaMA-Factory {real.version}" and real.installed
        if real.version != table["llamafactory_version"]:  # another supported release (.ci/lint_matrix.sh): its
            continue  # own classes answered, and they are what lint judges with; the table is the newest's
        assert stored.own <= real.keys, (command, sorted(stored.own - real.keys))  # every stored key is parsed
        if command != "train":  # no transformers keys: the table is the whole parser
            assert real.keys == stored.keys, (command, sorted(real.keys ^ stored.keys))


def test_warmup_fractions_and_counts_by_transformers_release():
    """warmup_steps below 1 is a fraction only from transformers 5.0; warmup_ratio above 1 is refused before 5.0
    and copied into warmup_steps by 5.0 to 5.14; a fraction is never a batch size."""
    old, new = [Version("4.57.6")], [Version("5.0.0")]
    [m] = check_values({"warmup_steps": 0.1}, "t.yaml", old, "the HF Trainer")
    assert m.code == "lint.training.fraction_as_count" and m.is_error and "warmup_ratio: 0.1" in m.fix.text
    assert check_values({"warmup_steps": 0.1}, "t.yaml", new, "the HF Trainer") == []
    [m] = check_values({"warmup_steps": 0.1}, "t.yaml", old + new, "llamafactory-cli train")
    assert m.severity is Severity.WARNING  # the release that runs decides
    [m] = check_values({"warmup_ratio": 10}, "t.yaml", old, "the HF Trainer")
    assert m.is_error and "warmup_ratio must lie in range [0,1]" in m.message
    [m] = check_values({"warmup_ratio": 10}, "t.yaml", new, "the HF Trainer")
    assert m.severity is Severity.WARNING and m.code == "lint.training.count_as_fraction"
    [m] = check_values({"gradient_accumulation_steps": 0.5, "max_steps": -1}, "t.yaml", new, "the HF Trainer")
    assert m.code == "lint.training.not_whole" and m.key_path == "gradient_accumulation_steps"


def test_a_named_scripts_arguments_make_the_parser_whole(tmp_path, monkeypatch):
    """Without the script a key TrainingArguments lacks may be the script's own (a note); with `--script`, a key
    neither defines is HfArgumentParser's 'Some keys are not used', with the script's close key suggested."""
    script = tmp_path / "train.py"
    script.write_text("from dataclasses import dataclass, field\nimport argparse\n\n@dataclass\nclass DataArguments:\n"
                      "    dataset_name: str = field(default=None)\n\np = argparse.ArgumentParser()\n"
                      "p.add_argument('--max-seq-length', type=int)\n")
    args = tmp_path / "args.yaml"
    args.write_text("output_dir: o\ndataset_nmae: wikitext\nmax_seq_length: 512\n")
    monkeypatch.chdir(tmp_path)
    alone = LintRun(options={"deep": False})
    alone.lint_all([str(args)])
    assert not [m for m in alone.messages if m.is_error] and by_code(alone.messages, "lint.training.script_keys")
    named = LintRun(options={"deep": False, "script": ("train.py", frozenset(script_keys(script)))})
    named.lint_all([str(args)])
    [m] = [m for m in named.messages if m.is_error]
    assert m.key_path == "dataset_nmae" and m.did_you_mean == "dataset_name" and "train.py's arguments" in m.message
    script.write_text("def broken(:\n")
    out = subprocess.run([sys.executable, "-m", "rocmcheck", "lint", "--script", str(script), str(args)],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 2 and "not a Python script" in out.stderr and "Traceback" not in out.stderr
