"""Who reads a file decides its verdict: the consumer named with --consumer, implied by the file that points at it,
read from the file's keys, or assumed (and said so); every verdict names it. Real CLI runs where the exit code or the
output is the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lint_helpers import REPO, by_code, llamafactory_data

from rocmcheck.commands.lint import CONSUMER_CHOICES
from rocmcheck.errors import BadInput
from rocmcheck.lint import lint_file
from rocmcheck.lint.consumers import (
    CONSUMER_IDS,
    CONSUMERS,
    DEEPSPEED,
    LLAMAFACTORY,
    for_deepspeed_config,
    for_llamafactory,
    for_named,
)
from rocmcheck.lint.run import LintRun
from rocmcheck.lint.training_keys import llamafactory_train_only_keys

FIXTURES = REPO / "tests" / "fixtures" / "public-configs"
HF_AUTO = FIXTURES / "working" / "transformers-ds_config_zero2-00e12e7.json"
PREDICT = FIXTURES / "working" / "llamafactory-llama3_lora_predict.yaml"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    fake = Path(os.environ.get("TMPDIR", "/tmp")) / f"rocmcheck-no-deepspeed-{os.getuid()}"
    fake.mkdir(exist_ok=True)
    (fake / "deepspeed.py").write_text("raise ImportError('simulated: deepspeed not installed')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "rocmcheck", "lint", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or REPO, timeout=300)


def test_the_command_line_offers_every_consumer():
    assert CONSUMER_CHOICES == CONSUMER_IDS


def test_a_deepspeed_config_alone_is_assumed_from_its_auto_values():
    auto = for_deepspeed_config({"train_micro_batch_size_per_gpu": "auto"})
    plain = for_deepspeed_config({"train_micro_batch_size_per_gpu": 2})
    assert (auto.consumer.id, auto.assumed) == ("hf-trainer", True) and "auto" in auto.why
    assert (plain.consumer.id, plain.assumed) == ("deepspeed", True)


@pytest.mark.parametrize("data, consumer, assumed", [
    ({"model_name_or_path": "m", "do_predict": True, "output_dir": "o"}, "llamafactory-train", False),
    ({"model_name_or_path": "m", "export_dir": "out", "template": "qwen3"}, "llamafactory-export", False),
    ({"model_name_or_path": "m", "task": "mmlu_test", "template": "fewshot"}, "llamafactory-eval", False),
    ({"model_name_or_path": "m", "infer_backend": "vllm", "template": "llama3"}, "llamafactory-chat", False),
    ({"model_name_or_path": "m", "template": "llama3"}, "llamafactory-chat", True),
])
def test_the_llamafactory_subcommand_is_read_from_the_files_keys(data, consumer, assumed):
    choice = for_llamafactory(data, llamafactory_train_only_keys(use_installed=False))
    assert (choice.consumer.id, choice.assumed) == (consumer, assumed), choice.why


def test_a_consumer_that_reads_no_such_file_is_bad_input():
    with pytest.raises(BadInput, match="--consumer deepspeed: deepspeed.initialize reads a DeepSpeed config"):
        for_named(CONSUMERS["deepspeed"], LLAMAFACTORY, "train.yaml")
    assert for_named(CONSUMERS["llamafactory-train"], DEEPSPEED, "ds.json").consumer.label == \
        "the HF Trainer (llamafactory-cli train)"
    proc = run_cli("--consumer", "deepspeed", str(PREDICT))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "reads a DeepSpeed config" in proc.stderr


def test_the_same_auto_json_passes_for_the_hf_trainer_and_fails_for_deepspeed_initialize():
    """Roblox/FAI-RL PR #70: an HF-style "auto" config handed to DeepSpeed alone."""
    assumed = run_cli(str(HF_AUTO))
    assert assumed.returncode == 0 and "judged for the HF Trainer, assumed" in assumed.stdout
    named = run_cli("--consumer", "deepspeed", str(HF_AUTO))
    assert named.returncode == 1
    assert "train_batch_size: error [lint.deepspeed.auto_not_filled] for deepspeed.initialize:" in named.stdout
    assert "judged for" not in named.stdout  # named: nothing was assumed


def test_json_output_names_each_files_consumer(tmp_path):
    llamafactory_data(tmp_path, "identity", "alpaca_en_demo")  # run where its datasets are
    doc = json.loads(run_cli("--json", str(HF_AUTO), str(PREDICT), cwd=tmp_path).stdout)
    by_file = {c["file"]: c for c in doc["consumers"]}
    assert by_file[str(HF_AUTO)]["consumer"] == "hf-trainer" and by_file[str(HF_AUTO)]["assumed"] is True
    assert by_file[str(PREDICT)]["label"] == "llamafactory-cli train" and by_file[str(PREDICT)]["assumed"] is False
    assert all(m["consumer"] for m in doc["messages"])
    clean = {r["data"]["file"]: r for r in doc["results"] if r["id"] == "lint.file.clean"}
    assert clean[str(PREDICT)]["summary"].endswith("for llamafactory-cli train")


def test_a_predict_yaml_for_chat_says_which_subcommand_reads_its_keys():
    """hiyouga/LlamaFactory#5633: the maintainer's whole answer was `llamafactory-cli train`."""
    messages = lint_file(PREDICT, deep=False, consumer=CONSUMERS["llamafactory-chat"])
    found = {m.key_path: m for m in by_code(messages, "lint.training.unknown_key")}
    assert set(found) == {"ddp_timeout", "do_predict", "output_dir", "overwrite_output_dir",
                          "per_device_eval_batch_size", "predict_with_generate"}  # the thread's list
    assert all("only `llamafactory-cli train` reads it" in m.hint for m in found.values())
    assert not by_code(lint_file(PREDICT, deep=False), "lint.training.unknown_key")  # for train: fine


def test_a_training_yaml_linted_alongside_makes_its_deepspeed_json_the_hf_trainers(tmp_path, monkeypatch):
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8,
                              "fp16": {"enabled": True}, "zero_optimization": {"stage": 2}}))
    (tmp_path / "train.yaml").write_text("model_name_or_path: m\nstage: sft\ndo_train: true\ndataset: d\n"
                                         "template: llama3\noutput_dir: o\nper_device_train_batch_size: 2\n"
                                         "gradient_accumulation_steps: 8\nbf16: true\ndeepspeed: ds.json\n")
    llamafactory_data(tmp_path, "d")
    monkeypatch.chdir(tmp_path)
    alone = LintRun(options={"deep": False})
    alone.lint_all([str(ds)])  # no "auto": deepspeed.initialize, assumed; its fp16 is its own business
    assert alone.judged[0][2].consumer.id == "deepspeed" and not by_code(alone.messages, "lint.hf.mismatch")
    both = LintRun(options={"deep": False})
    both.lint_all([str(ds), str(tmp_path / "train.yaml")])
    [m] = by_code(both.messages, "lint.hf.mismatch")  # bf16: true in the YAML, fp16.enabled: true in the JSON
    assert m.file == "ds.json" and m.key_path == "fp16.enabled"
    assert m.consumer == "the HF Trainer (llamafactory-cli train)"
    choices = {name: choice for name, _, choice in both.judged}
    assert choices[str(ds)].consumer.label == "the HF Trainer (llamafactory-cli train)"
    assert not choices[str(ds)].assumed
    clean = {r.data["file"] for r in both.results() if r.id == "lint.file.clean"}
    assert clean == {str(tmp_path / "train.yaml")}  # the JSON's error is its own verdict, not the YAML's
