"""`rocmcheck plan` end to end: verdicts, JSON, a real config.json, bad input -> one line, exit 2, and nothing
judged -> NOT JUDGED, exit 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmcheck.cli import cli
from rocmcheck.errors import BadInput
from rocmcheck.fixes import FixKind
from rocmcheck.result import EXIT_NOT_JUDGED

REPO = Path(__file__).resolve().parents[1]


def plan(*args: str):
    return CliRunner().invoke(cli, ["plan", *args])


def one_line_error(result) -> str:
    """The command refused its input: with the one bad-input type, or click refused an option's value (exit 2).
    rocmcheck.cli.main prints either as one line and exits 2 (test_the_real_cli_prints_bad_input_as_one_line_and_
    exit_2). The message."""
    assert result.stdout == "" and "Traceback" not in result.output
    if isinstance(result.exception, BadInput):
        message = str(result.exception)
        assert len(message.splitlines()) == 1
        return message
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error:")
    return last


@pytest.mark.parametrize("args,says", [
    (["--model", "llama-2-7c"], "did you mean llama-2-7b"),
    (["--model", "llama-2-7b", "--gpu", "h300"], "did you mean H200"),
    (["--model", "llama-2-7b", "--gpu", "gh200"], "--gpu-memory"),
    (["--model", "llama-2-7b", "--gpu", "mi300x", "--gpu-memory", "192"], "not both"),
    (["--model", "llama-2-7b", "--offload-params"], "stage 3"),
    (["--model", "llama-2-7b", "--find-batch"], "--find-batch needs"),
    (["--model", "llama-2-7b", "--measure", "--zero", "2"], "single-GPU"),
    (["--model", "llama-2-7b", "--zero", "5"], "--zero"),
    (["--model", "llama-2-7b", "--seq-len", "0"], "--seq-len"),
    (["--model", "llama-2-7b", "--lora-dropout", "0.1"], "need --lora-rank"),
    (["--model", "llama-2-7b", "--qlora"], "lora_rank"),
    (["--model", "llama-2-7b", "--lora-rank", "16", "--qlora", "--measure"], "QLoRA"),
    (["--model", "llama-2-7b", "--lora-rank", "16", "--lora-target", "all"], "--lora-target"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    assert says in one_line_error(plan(*args))


def test_the_real_cli_prints_bad_input_as_one_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "plan", "--model", "nope"], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("Error: --model")


def test_bad_config_files(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    assert "not valid JSON" in one_line_error(plan("--model", str(tmp_path / "broken.json")))
    (tmp_path / "bert.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 768}))
    assert "missing" in one_line_error(plan("--model", str(tmp_path / "bert.json")))
    assert "no config.json" in one_line_error(plan("--model", str(tmp_path)))


def test_model_folder_with_a_real_config(tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.LlamaConfig(hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                             intermediate_size=5632, vocab_size=32000).save_pretrained(tmp_path)
    result = plan("--model", str(tmp_path), "--gpu", "h200", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["estimate"]["params"] == 1_100_048_384


def test_seed_case_fails_with_checkpointing_as_the_fix():
    result = plan("--model", "llama-2-7b", "--micro-batch", "12", "--seq-len", "4096", "--grad-accum", "8",
                  "--gpu", "mi300x", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    fit = next(r for r in doc["results"] if r["id"] == "plan.fit")
    assert fit["status"] == "fail" and "gradient_checkpointing" in fit["fix"]["text"]
    assert fit["fix"]["kind"] == FixKind.NOTE.value  # a change in the training code, in words: nothing to paste
    assert doc["estimate"]["total_bytes"] > 192 * 2**30


def test_fits_and_finds_a_batch():
    result = plan("--model", "llama-2-7b", "--seq-len", "4096", "--gradient-checkpointing", "--gpu", "MI300X",
                  "--find-batch", "--json")
    assert result.exit_code == 0, result.output
    results = {r["id"]: r for r in json.loads(result.stdout)["results"]}
    assert results["plan.fit"]["status"] == "pass"
    assert results["plan.batch"]["status"] == "pass" and results["plan.batch"]["data"]["best"] > 1


def test_table_shows_the_breakdown_and_the_verdict():
    result = plan("--model", "llama-3-70b", "--gpus", "8", "--gpu", "mi300x", "--zero", "3",
                  "--gradient-checkpointing")
    assert result.exit_code == 0, result.output
    for word in ("weights", "optimizer states", "activations", "logits and loss", "ZeRO buffers", "plan.fit"):
        assert word in result.stdout


def test_measure_on_a_machine_without_a_gpu_is_not_judged():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = plan("--model", "tinyllama-1.1b", "--measure", "--json")
    assert result.exit_code == EXIT_NOT_JUDGED, result.output
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "not_judged"
    batch = next(r for r in doc["results"] if r["id"] == "plan.batch")
    assert batch["status"] == "skip" and "no GPU" in batch["summary"]
    text = plan("--model", "tinyllama-1.1b", "--measure")
    assert text.exit_code == EXIT_NOT_JUDGED and "NOT JUDGED" in text.stdout and "Verdict: PASS" not in text.stdout


def test_no_gpu_memory_given_is_not_judged():
    result = plan("--model", "llama-2-7b", "--json")
    assert result.exit_code == EXIT_NOT_JUDGED
    assert json.loads(result.stdout)["verdict"] == "not_judged"


def test_lora_flags_reach_the_estimate():
    result = plan("--model", "llama-3-8b", "--lora-rank", "64", "--lora-target", "qv", "--lora-dropout", "0.05",
                  "--adapter-dtype", "bf16", "--no-autocast", "--seq-len", "4096", "--gpu", "h200", "--find-batch",
                  "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    s = doc["estimate"]["settings"]
    assert (s["lora_rank"], s["lora_target"], s["lora_dropout"], s["adapter_dtype"], s["autocast"]) == (
        64, "qv", 0.05, "bf16", False)
    assert "LoRA adapter activations" in [ln["name"] for ln in doc["estimate"]["lines"]]
    batch = next(r for r in doc["results"] if r["id"] == "plan.batch")
    assert batch["status"] == "pass" and batch["data"]["best"] >= 1


def test_lora_table_names_the_assumed_settings():
    result = plan("--model", "llama-2-7b", "--lora-rank", "16", "--gpu", "mi300x")
    assert result.exit_code == 0, result.output
    assert "LoRA r=16 on all-linear (fp32 adapters, autocast)" in " ".join(result.stdout.split())
