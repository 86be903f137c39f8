"""Data-parallel smoke-train for real on this CPU: two ranks over gloo, launched by `--nproc 2`
(torchrun under run_command) and by the DeepSpeed launcher, as on a real box; plus a launch that hangs.
10 steps of micro-batch 8 per rank (the default run's global batch of 16): about 15-40 s per launch."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_train_deepspeed import RECIPES, ds_env

from rocmcheck.train.cpu_threads import WAIT_CHOICES

REPO = Path(__file__).resolve().parents[1]
SHORT = ["--device", "cpu", "--steps", "10", "--micro-batch", "8", "--no-profile", "--json"]
needs_ds = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None
                              or not (shutil.which("g++") and shutil.which("ninja")),
                              reason="needs deepspeed, and g++ + ninja for its JIT-built CPU ops")


def run(argv: list[str], tmp: Path, extensions: str, timeout: float = 600):
    env = {k: v for k, v in ds_env(tmp, extensions).items() if k not in WAIT_CHOICES}  # nobody chose a wait policy
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=timeout)


def report_of(proc) -> tuple[dict, dict]:
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"schema_version"')]
    assert len(lines) == 1, (proc.stdout[-2000:], proc.stderr[-3000:])
    report = json.loads(lines[0])
    return report, {r["id"]: r for r in report["results"]}


def test_nproc_2_ddp_ranks_agree(tmp_path, torch_extensions_dir):
    proc = run([sys.executable, "-m", "rocmcheck", "smoke-train", *SHORT, "--nproc", "2"], tmp_path,
               torch_extensions_dir)
    report, by_id = report_of(proc)
    assert proc.stdout.count("\n") == 1  # only the report on stdout: the ranks' output stays out of it
    agree = by_id["train.rank_agreement"]
    assert agree["status"] == "pass", agree
    assert agree["data"]["ranks"] == 2 and agree["data"]["weights_checked"] and not agree["data"]["same_data"]
    launch = report["info"]["launch"]
    assert launch["returncode"] == 0 and report["info"]["backend"] == "gloo"
    # The ranks are the train child under torchrun, over the one child protocol (rocmcheck/child.py).
    assert launch["module"] == "rocmcheck.train.child" and launch["argv"][-4:-2] == ["-m", "rocmcheck.train.child"]
    assert "smoke-train [" in proc.stderr  # rank 0's "step" events reached this process's progress lines
    assert report["info"]["world"]["ranks"] == 2 and report["metrics"][0]["tokens"] == 2 * 8 * 64
    assert by_id["train.finite"]["status"] == "pass" and by_id["train.reload"]["data"]["max_abs_diff"] == 0.0
    assert "ranks" in by_id["train.reference_curve"]["summary"]  # a 2-rank curve is not the 1-rank reference
    assert report["info"]["cpu"]["omp_wait_policy"] == "PASSIVE"  # rank 0's OpenMP threads sleep while they wait


@needs_ds
def test_nproc_2_zero3_sharded(tmp_path, torch_extensions_dir):
    proc = run([sys.executable, "-m", "rocmcheck", "smoke-train", *SHORT, "--nproc", "2",
                "--deepspeed", str(RECIPES / "zero3.json")], tmp_path, torch_extensions_dir)
    report, by_id = report_of(proc)
    assert by_id["train.rank_agreement"]["status"] == "pass", by_id["train.rank_agreement"]
    assert not by_id["train.rank_agreement"]["data"]["weights_checked"]  # ZeRO-3: each rank holds a different shard
    assert by_id["train.deepspeed_parity"]["status"] == "pass", by_id["train.deepspeed_parity"]
    assert report["info"]["deepspeed"]["config"]["train_batch_size"] == 16  # 8 x 1 x 2 ranks
    assert by_id["train.reload"]["data"]["max_abs_diff"] == 0.0  # the gathered 16-bit weights are the trained ones


@needs_ds
def test_deepspeed_launcher_starts_the_same_ranks(tmp_path, torch_extensions_dir):
    """The multi-node path (docs/distributed.md) on one node: each rank runs `-m rocmcheck smoke-train`."""
    deepspeed = shutil.which("deepspeed")
    if deepspeed is None:
        pytest.skip("the deepspeed launcher script is not on PATH")
    proc = run([deepspeed, "--num_gpus", "2", "--no_local_rank", "--module", "rocmcheck", "smoke-train", *SHORT],
               tmp_path, torch_extensions_dir)
    report, by_id = report_of(proc)
    assert by_id["train.rank_agreement"]["status"] == "pass"
    assert report["info"]["world"] == {"ranks": 2, "rank": 0}


def test_a_launch_that_outlives_its_timeout_is_a_verdict(tmp_path, torch_extensions_dir):
    marker = tmp_path / "hung-marker"
    proc = run([sys.executable, "-m", "rocmcheck", "smoke-train", *SHORT, "--nproc", "2", "--timeout", "4",
                "--out", str(marker)], tmp_path, torch_extensions_dir, timeout=120)
    report, by_id = report_of(proc)
    launch = by_id["train.launch"]
    assert proc.returncode == 1 and launch["status"] == "fail" and "within 4 s" in launch["summary"]
    assert "iommu=pt" in launch["fix"]["why"] and launch["fix"]["text"].startswith("NCCL_DEBUG=INFO rocmcheck")
    leftovers = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(marker) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                leftovers.append(pid)
        except OSError:
            continue
    assert not leftovers, "the ranks of a timed-out launch must be killed"
