"""smoke-train on a person's own model: verdicts about the stack, not the bundled task.

Real runs on this CPU through the CLI (as a person runs it): a random-init LLaMA folder of another shape
passes --steps 30, with and without LoRA; a 70B-shaped folder stops before loading with the planner's
numbers; and, in process, an attention that drops its scale in bf16 (a planted kernel fault) fails
train.numerics while a healthy run passes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from model_folders import make_random_llama, tokenizer_files

from rocmcheck.train import fit, verdicts

REPO = Path(__file__).resolve().parents[1]
OWN_MODEL_IDS = {"train.fit", "train.numerics", "train.finite", "train.learns", "train.reload", "train.memory_leak",
                 "train.memory", "train.throughput", "train.kernels"}


def cli(*args: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, dict, dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1",
               HF_ENDPOINT="http://127.0.0.1:9")
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--device", "cpu", *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    assert proc.stdout.startswith("{"), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return proc, report, {r["id"]: r for r in report["results"]}


@pytest.fixture(scope="module")
def random_llama(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return make_random_llama(tmp_path_factory.mktemp("own") / "random-llama")


def test_random_init_llama_of_another_shape_passes_30_steps(random_llama):
    proc, report, by_id = cli("--model", str(random_llama), "--steps", "30")
    assert proc.returncode == 0, {k: (r["status"], r["summary"]) for k, r in by_id.items()}
    assert set(by_id) == OWN_MODEL_IDS  # no task accuracy, no reference curve: they speak of the bundled task
    assert by_id["train.learns"]["status"] == "pass" and by_id["train.numerics"]["status"] == "pass"
    assert by_id["train.fit"]["status"] == "pass" and by_id["train.fit"]["data"]["estimate_bytes"] > 0
    assert report["info"]["config"]["lr"] == 1e-3  # 0.5 / hidden_size, capped at 1e-3
    assert "MFU n/a on CPU" in by_id["train.throughput"]["summary"]


def test_lora_on_the_same_model_passes_with_an_adapter_reload(random_llama, tmp_path):
    pytest.importorskip("peft")
    proc, report, by_id = cli("--model", str(random_llama), "--steps", "30", "--lora-rank", "8", "--no-profile",
                              "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, {k: (r["status"], r["summary"]) for k, r in by_id.items()}
    assert by_id["train.fit"]["data"]["settings"]["lora_rank"] == 8
    assert by_id["train.reload"]["status"] == "pass" and by_id["train.reload"]["data"]["weights_equal"]
    assert (tmp_path / "out" / "adapter" / "adapter_config.json").is_file()  # what peft saves: the adapter only


def test_a_model_that_cannot_fit_stops_before_loading(tmp_path):
    """A 70B-shaped folder whose weights file is not even a safetensors file: loading it would fail with
    train.load, so a train.fit verdict alone proves nothing was loaded."""
    path = tmp_path / "llama-70b-shape"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192}))
    (path / "model.safetensors").write_bytes(b"not loaded")
    tokenizer_files(path)
    proc, _, by_id = cli("--model", str(path), timeout=300)
    assert proc.returncode == 1 and list(by_id) == ["train.fit"]
    verdict = by_id["train.fit"]
    assert verdict["status"] == "fail" and "stopped before loading" in verdict["summary"]
    assert verdict["data"]["estimate_bytes"] > verdict["data"]["device_bytes"]  # the planner's numbers
    assert verdict["fix"]["text"].startswith(f"rocmcheck smoke-train --model {path}")


@pytest.fixture()
def attention_without_scale_in_bf16():
    """A planted kernel fault: SDPA that forgets 1/sqrt(head_dim) when it runs in bf16 (under autocast or on
    bf16 inputs), correct in fp32, registered over transformers' "sdpa" for the test's duration."""
    torch = pytest.importorskip("torch")
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def faulty(module, query, key, value, attention_mask, scaling=None, **kwargs):
        if query.dtype == torch.bfloat16 or torch.is_autocast_enabled(query.device.type):
            scaling = 1.0
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)

    AttentionInterface.register("sdpa", faulty)
    yield
    AttentionInterface.register("sdpa", sdpa_attention_forward)


def _short_bundled_run():
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.run import run_smoke_train

    # device "auto": this CPU in CI; the GPU where there is one (benchmarks/gpu_session.sh runs this file)
    report = run_smoke_train(TrainConfig(steps=10, profile=False, eval_prompts=8))
    return {r.id: r for r in report.results}


def test_planted_attention_fault_fails_numerics(attention_without_scale_in_bf16):
    numerics = _short_bundled_run()["train.numerics"]
    assert numerics.status.value == "fail", numerics.evidence
    assert "numerics are suspect" in numerics.summary and "--attn eager" in numerics.fix.text
    assert numerics.data["worst_block_rel_diff"] > verdicts.NUMERICS_BLOCK_REL_TOL


def test_the_same_run_without_the_fault_passes_numerics():
    numerics = _short_bundled_run()["train.numerics"]
    assert numerics.status.value == "pass", numerics.evidence
    assert numerics.data["loss_rel_diff"] < verdicts.NUMERICS_LOSS_REL_TOL / 3


# --- the judges on recorded numbers ---------------------------------------------------------------------

def test_learns_fails_a_flat_curve_and_names_numerics_only_when_they_failed():
    flat = [4.7] * 30
    assert verdicts.check_learns(flat, numerics_ok=True).status.value == "fail"
    assert "settings are the likely cause" in verdicts.check_learns(flat, numerics_ok=True).fix.line()
    assert "train.numerics failed" in verdicts.check_learns(flat, numerics_ok=False).fix.line()
    assert verdicts.check_learns([4.7] + [1.0] * 29, numerics_ok=True).status.value == "pass"


def test_memory_gap_against_the_plan_is_a_finding_on_gpu_only():
    gib = 1 << 30
    near = verdicts.check_memory_headroom(int(20.5 * gib), 141 * gib, "gpu-allocator",
                                          {"allocated_peak_bytes": 20 * gib})
    assert near.status.value == "pass" and near.data["estimate_bytes"] == 20 * gib
    far = verdicts.check_memory_headroom(40 * gib, 141 * gib, "gpu-allocator", {"allocated_peak_bytes": 20 * gib})
    assert far.status.value == "warn" and "above rocmcheck plan's estimate" in far.summary
    cpu = verdicts.check_memory_headroom(40 * gib, 141 * gib, "cpu-rss", {"allocated_peak_bytes": 20 * gib})
    assert cpu.status.value == "pass"  # resident memory holds the interpreter too: not compared


def test_mfu_is_shown_only_for_models_large_enough():
    tokens, flops = 1024, 6 * 815_000.0
    tiny = verdicts.check_throughput([0.03] * 20, tokens, flops, 989.0, "sm_90 H200", True, params=815_000)
    assert tiny.data["mfu"] is None and "MFU not shown" in tiny.summary
    big = verdicts.check_throughput([0.5] * 20, 4 * 2048, 6 * 1.1e9, 989.0, "sm_90 H200", True, params=1_100_000_000,
                                    recompute_flops_per_token=2 * 1.1e9)
    assert big.data["mfu"] is not None and big.data["hfu"] > big.data["mfu"]


def test_fit_suggestions_are_smoke_train_options():
    assert fit.smoke_train_flags(["--zero", "3", "--offload-optimizer", "--offload-params",
                                  "--gradient-checkpointing"]) \
        == "--gradient-checkpointing --deepspeed recipes/zero3-offload.json"
    assert fit.smoke_train_flags(["--lora-rank", "16"]) == "--lora-rank 16"
    assert fit.smoke_train_flags(["--gpus", "8", "--zero", "3"]) == "--gpus 8 --deepspeed recipes/zero3.json"
