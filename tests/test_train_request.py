"""smoke-train decides once what to run (rocmcheck/train/request.py): the three modes, the input it refuses
before torch is imported, and how many ranks a machine can hold. The command-line cases run the real CLI in a
child process: one line on stderr and exit 2, and nothing trained."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocmcheck.errors import BadInput
from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig
from rocmcheck.train.request import MAX_CPU_RANKS, Mode, decide, rank_problem

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"
NO_LAUNCHER: dict[str, str] = {}  # an environment without WORLD_SIZE / RANK


def cli(*args: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def one_line_exit_2(proc: subprocess.CompletedProcess, words: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert len(lines) == 1 and words in lines[0], lines


# --- the three modes, decided once ------------------------------------------------------------------------

def test_plain_run_trains_in_this_process():
    request = decide(TrainConfig(), env=NO_LAUNCHER)
    assert request.mode is Mode.TRAIN and request.plan is None and request.nproc == 1 and request.is_main


def test_gpus_n_launches_n_ranks():
    request = decide(TrainConfig(device="cpu"), nproc=2, env=NO_LAUNCHER)
    assert request.mode is Mode.LAUNCH and request.nproc == 2 and request.is_main


def test_a_process_a_launcher_started_is_one_rank_and_only_rank_0_shows():
    env = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}
    request = decide(TrainConfig(device="cpu"), deepspeed=RECIPES / "zero2.json", env=env)
    assert request.mode is Mode.TRAIN and request.world_size == 2 and not request.is_main
    assert request.plan.config["train_batch_size"] == 2 * TrainConfig().micro_batch  # the launcher's world, not 1
    with pytest.raises(BadInput, match="already one of 2 ranks"):
        decide(TrainConfig(device="cpu"), nproc=2, env=env)


def test_bench_is_its_own_mode_and_runs_alone():
    request = decide(TrainConfig(), bench=True, bench_shape="tiny", env=NO_LAUNCHER)
    assert request.mode is Mode.BENCH and request.bench_shape == "tiny"
    with pytest.raises(BadInput, match="--bench runs in one process"):
        decide(TrainConfig(), bench=True, nproc=2, env=NO_LAUNCHER)


def test_the_default_lr_is_filled_from_the_model_only_when_not_given():
    assert decide(TrainConfig(lr=5e-4), lr_given=True, env=NO_LAUNCHER).cfg.lr == 5e-4
    assert decide(TrainConfig(lr=5e-4), lr_given=False, env=NO_LAUNCHER).cfg.lr == 1e-3  # the bundled model's


@pytest.mark.parametrize("timeout_s", [-5.0, 0.0, float("nan"), float("inf")])
def test_a_timeout_that_is_not_a_positive_number_is_refused_in_every_mode(timeout_s):
    for nproc in (1, 2):
        with pytest.raises(BadInput, match="--timeout must be a positive number"):
            decide(TrainConfig(device="cpu"), nproc=nproc, timeout_s=timeout_s, env=NO_LAUNCHER)


# --- how many ranks this machine holds ----------------------------------------------------------------------

def test_one_rank_per_visible_gpu():
    assert rank_problem(8, "auto", gpus=8, cores=2) is None
    assert "only 4 GPU(s) visible" in rank_problem(8, "auto", gpus=4, cores=64)
    assert rank_problem(1, "auto", gpus=0, cores=1) is None  # one process never launches


def test_gpus_asked_for_on_a_machine_without_one_are_refused_not_run_on_the_cpu():
    for device in ("auto", "cuda"):
        problem = rank_problem(8, device, gpus=0, cores=64)
        assert "torch sees no GPU" in problem and "--device cpu" in problem


def test_cpu_ranks_one_per_core_and_a_small_cap():
    assert rank_problem(2, "cpu", gpus=0, cores=2) is None
    assert "at most 2 CPU ranks" in rank_problem(64, "cpu", gpus=0, cores=2)
    assert f"at most {MAX_CPU_RANKS} CPU ranks" in rank_problem(MAX_CPU_RANKS + 1, "cpu", gpus=0, cores=256)
    assert rank_problem(MAX_CPU_RANKS, "cpu", gpus=8, cores=256) is None


# --- the real command line ----------------------------------------------------------------------------------

def test_timeout_below_zero_is_one_line_exit_2():
    proc = cli("--timeout", "-5", "--device", "cpu")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--timeout" in proc.stderr
    assert "-5 is not in the range 0<x" in proc.stderr


def test_more_ranks_than_this_machine_holds_is_refused_before_any_launch(tmp_path):
    import torch

    cores = len(os.sched_getaffinity(0))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    proc = cli("--gpus", "64", "--device", "cpu", "--out", str(tmp_path / "never"), cwd=tmp_path)
    one_line_exit_2(proc, f"at most {min(cores, MAX_CPU_RANKS)} CPU ranks")
    assert not (tmp_path / "never").exists()
    if gpus == 0:  # this CPU box: GPUs asked for, none here, with DeepSpeed too
        for extra in ([], ["--deepspeed", str(RECIPES / "zero2.json")]):
            one_line_exit_2(cli("--gpus", "8", *extra, cwd=tmp_path), "torch sees no GPU here")


def copy_of_bundled(tmp_path: Path, config: dict, name: str = "m") -> Path:
    folder = tmp_path / name
    shutil.copytree(BUNDLED_MODEL, folder)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


SIZES = json.loads((BUNDLED_MODEL / "config.json").read_text())


@pytest.mark.parametrize("config, words", [
    ({"model_type": "llama"}, "missing hidden_size"),  # transformers would build LlamaConfig's 6.7B defaults
    ({**SIZES, "hidden_size": None}, "missing hidden_size"),
    ({**SIZES, "num_hidden_layers": -4}, "num_hidden_layers must be a positive integer"),
    ({**SIZES, "vocab_size": 1 << 30, "hidden_size": 1 << 20}, "larger than any real model's"),
    ({**SIZES, "intermediate_size": "384"}, "intermediate_size must be a positive integer"),
    ({**SIZES, "hidden_size": "64\nsecond line"}, "hidden_size must be a positive integer, got 64\\nsecond line"),
])
def test_a_config_the_planner_cannot_size_is_refused_before_torch(tmp_path, config, words):
    proc = cli("--model", str(copy_of_bundled(tmp_path, config, name="m\nodd")), "--device", "cpu", timeout=120)
    one_line_exit_2(proc, words)
    assert "never built" in proc.stderr


def test_a_tokenizer_file_that_is_a_fifo_is_refused_before_the_loader_blocks_on_it(tmp_path):
    folder = copy_of_bundled(tmp_path, SIZES)
    (folder / "tokenizer.json").unlink()
    os.mkfifo(folder / "tokenizer.json")
    one_line_exit_2(cli("--model", str(folder), "--device", "cpu", timeout=120), "tokenizer.json is not a regular file")
