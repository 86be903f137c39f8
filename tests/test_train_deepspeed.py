"""`smoke-train --deepspeed` for real on this CPU: DeepSpeed 0.19.8 with its CPU accelerator (gloo, one
rank), the shipped recipes as they are, through the CLI in a child process like a person runs it.

What runs on CPU, measured: ZeRO-2 and ZeRO-3 engine steps, zero.Init loading, the 16-bit gather for
eval and save, and ZeRO-3 + CPU offload with DeepSpeedCPUAdam. DeepSpeed JIT-builds cpu_adam for that with
g++ and ninja, once per test session into a temporary TORCH_EXTENSIONS_DIR (conftest torch_extensions_dir); its
shared-memory collective, which only its inference all-reduce uses, is not built for a fine-tune
(rocmcheck.train.distributed.skip_deepspeed_cpu_shm). Runs are 10 steps, so loss/accuracy thresholds meant for
120 steps are not asserted here (tests/test_train_run.py holds the default run to them)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"),
    pytest.mark.skipif(not (shutil.which("g++") and shutil.which("ninja")),
                       reason="DeepSpeed JIT-builds its CPU op (cpu_adam) with g++ and ninja; one is "
                              "missing"),
]
SHORT = ["--device", "cpu", "--steps", "10", "--micro-batch", "8", "--no-profile", "--json"]


def ds_env(tmp: Path, extensions: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp / "hf-home"), DS_ACCELERATOR="cpu",
               TORCH_EXTENSIONS_DIR=extensions, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    return env


def smoke(args: list[str], tmp: Path, extensions: str, timeout: float = 600):
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", *args], capture_output=True, text=True,
                          env=ds_env(tmp, extensions), cwd=tmp, timeout=timeout)
    assert proc.stdout.startswith("{"), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return proc, report, {r["id"]: r for r in report["results"]}


@pytest.fixture(scope="module")
def offload_run(tmp_path_factory, torch_extensions_dir):
    tmp = tmp_path_factory.mktemp("ds-offload")
    return (*smoke([*SHORT, "--deepspeed", str(RECIPES / "zero3-offload.json"), "--out", str(tmp / "out")], tmp,
                   torch_extensions_dir), tmp / "out")


def test_zero3_offload_recipe_runs_as_is_with_cpu_adam(offload_run):
    _, report, by_id, _ = offload_run
    phases = report["info"]["phases"]
    assert list(phases) == ["plain", "ZeRO-3", "ZeRO-3 + optimizer+param offload"]
    assert phases["ZeRO-3 + optimizer+param offload"]["strategy"]["optimizer"] == "DeepSpeedCPUAdam"
    assert phases["ZeRO-3"]["strategy"]["optimizer"] == "AdamW"  # the Trainer's AdamW as client optimizer
    zero = {p["strategy"].get("zero_optimizer") for n, p in phases.items() if n != "plain"}
    assert zero == {"DeepSpeedZeroOptimizer_Stage3"}
    assert all(len(p["losses"]) == 10 for p in phases.values())
    ds = report["info"]["deepspeed"]
    assert ds["filled"]["zero_optimization.reduce_bucket_size"] == 128 * 128  # hidden size of the bundled model
    assert ds["config"]["train_batch_size"] == 8


def test_zero3_verdicts_gather_for_eval_and_reload(offload_run):
    _, _, by_id, out = offload_run
    assert by_id["train.finite"]["status"] == "pass"
    reload = by_id["train.reload"]
    assert reload["status"] == "pass" and reload["data"]["max_abs_diff"] == 0.0 and reload["data"]["weights_equal"]
    assert 0.0 <= by_id["train.task_accuracy"]["data"]["accuracy"] <= 1.0  # generation ran on the gathered weights
    saved = json.loads((out / "checkpoint" / "config.json").read_text())
    assert saved["dtype"] == "bfloat16" and (out / "checkpoint" / "model.safetensors").stat().st_size > 1_000_000
    assert (out / "report.json").is_file() and (out / "metrics.jsonl").read_text().count("\n") == 10


def test_parity_and_offload_cost_are_measured(offload_run):
    _, _, by_id, _ = offload_run
    parity = by_id["train.deepspeed_parity"]
    assert parity["status"] == "pass", parity
    assert parity["data"]["max_step_diff"] < parity["data"]["tolerance"]
    cost = by_id["train.offload_cost"]
    assert cost["status"] in ("pass", "warn") and isinstance(cost["data"]["cost_percent"], float)
    assert cost["data"]["offload_step_s"] > 0 and cost["data"]["no_offload_step_s"] > 0


def test_the_parity_baseline_is_the_plain_smoke_train(offload_run, tmp_path, torch_extensions_dir):
    """The plain curve inside a --deepspeed run must be exactly what `smoke-train` alone trains."""
    _, report, _, _ = offload_run
    _, plain, _ = smoke(SHORT, tmp_path, torch_extensions_dir)
    assert [m["loss"] for m in plain["metrics"]] == report["info"]["phases"]["plain"]["losses"]


def test_zero2_with_accumulation(tmp_path, torch_extensions_dir):
    proc, report, by_id = smoke(["--device", "cpu", "--steps", "10", "--micro-batch", "4", "--grad-accum", "2",
                                 "--no-profile", "--json", "--deepspeed", str(RECIPES / "zero2.json")], tmp_path,
                                torch_extensions_dir)
    config = report["info"]["deepspeed"]["config"]
    batch = tuple(config[k] for k in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                      "train_batch_size"))
    assert batch == (4, 2, 8)
    assert report["info"]["phases"]["ZeRO-2"]["strategy"]["zero_optimizer"] == "DeepSpeedZeroOptimizer"
    assert by_id["train.deepspeed_parity"]["status"] == "pass", by_id["train.deepspeed_parity"]
    assert by_id["train.reload"]["data"]["max_abs_diff"] == 0.0
    assert "train.offload_cost" not in by_id and "train.rank_agreement" not in by_id
    # DeepSpeed's shared-memory all-reduce (its inference all-reduce's op) was not built for this fine-tune
    assert not (Path(torch_extensions_dir) / "deepspeed_shm_comm").exists()


def test_parity_fails_for_a_config_that_trains_differently(tmp_path, torch_extensions_dir):
    """A lint-clean config with its own optimizer: plain SGD (torch's, which ZeRO runs when told it may), so each step
    moves a weight by the learning rate times its small gradient, where the plain run's AdamW moves it by about the
    learning rate. DeepSpeed trains, far slower than the plain run (whose loss falls by about 5 nats in these 10
    steps on the CPU), whatever the machine's timing."""
    config = json.loads((RECIPES / "zero2.json").read_text())
    config["optimizer"] = {"type": "SGD", "params": {"lr": "auto"}}
    config["zero_allow_untested_optimizer"] = True
    path = tmp_path / "sgd.json"
    path.write_text(json.dumps(config))
    proc, report, by_id = smoke([*SHORT, "--deepspeed", str(path)], tmp_path, torch_extensions_dir)
    parity = by_id["train.deepspeed_parity"]
    assert parity["status"] == "fail" and parity["data"]["max_step_diff"] > 1.5 * parity["data"]["tolerance"], parity
    assert report["info"]["phases"]["ZeRO-2"]["strategy"]["optimizer"] == "SGD"
    assert proc.returncode == 1


def test_a_model_that_cannot_load_is_a_failed_verdict_not_a_crash(tmp_path, torch_extensions_dir):
    """flash_attention_2 without the flash_attn package (not installable on this CPU machine)."""
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash_attn is installed here")
    proc, _, by_id = smoke([*SHORT, "--attn", "flash_attention_2", "--deepspeed", str(RECIPES / "zero2.json")],
                           tmp_path,
                           torch_extensions_dir)
    assert proc.returncode == 1 and list(by_id) == ["train.attn"]
    assert by_id["train.attn"]["status"] == "fail" and "--attn sdpa" in by_id["train.attn"]["fix"]["why"]
