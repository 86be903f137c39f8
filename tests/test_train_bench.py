"""--bench code path on a CPU-sized shape: the plain loop and HF Trainer, same init, data and settings,
must train the same way (loss parity). Speed is the benchmark's business (benchmarks/bench_train.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rocmcheck.train.bench import run_bench  # noqa: E402
from rocmcheck.train.comparisons import bench_verdicts  # noqa: E402
from rocmcheck.train.config import TrainConfig  # noqa: E402


def test_1_1b_shape_is_skipped_without_a_gpu():
    report = run_bench(TrainConfig(device="cpu"), shape="1.1b")
    assert [(r.id, r.status.value) for r in report.results] == [("train.bench", "skip")]


def test_loop_and_hf_trainer_train_the_same_way():
    pytest.importorskip("accelerate")  # HF Trainer needs it
    report = run_bench(TrainConfig(device="cpu"), shape="tiny", modes=("loop", "hf_trainer"))
    by_id = {r.id: r for r in report.results}
    assert by_id["train.bench_loss_parity"].status.value == "pass", by_id["train.bench_loss_parity"].evidence
    assert by_id["train.bench_vs_trainer"].status.value in ("pass", "warn")  # timing is not asserted
    rows = {r["mode"]: r for r in report.info["bench"]}
    # same init, same data
    assert rows["loop"]["first_loss"] == pytest.approx(rows["hf_trainer"]["first_loss"], abs=1e-3)


def test_compile_trains_like_the_eager_loop():
    """--compile (compile_model: SDPA without the dense mask) on the same init and data: the same curve."""
    report = run_bench(TrainConfig(device="cpu"), shape="tiny", modes=("loop", "loop_compile"))
    by_id = {r.id: r for r in report.results}
    parity = by_id["train.bench_compile_loss_parity"]
    assert parity.status.value == "pass", parity.evidence
    assert parity.data["max_diff"] < 0.05
    assert by_id["train.bench_compile"].status.value in ("pass", "warn")  # timing is not asserted


def test_a_compile_curve_that_drifts_fails_parity():
    rows = [{"mode": "loop", "tokens_per_s": 100.0, "step_s": 1.0},
            {"mode": "loop_compile", "tokens_per_s": 150.0, "step_s": 0.7}]
    eager = [10.8, 10.7, 10.5, 10.2]
    runs = {"loop": {"losses": eager}, "loop_compile": {"losses": [10.8, 10.7, 9.0, 8.0]}}  # a broken kernel diverging
    by_id = {r.id: r for r in bench_verdicts(rows, runs)}
    assert by_id["train.bench_compile_loss_parity"].status.value == "fail"
    assert "2.200" in by_id["train.bench_compile_loss_parity"].summary


def test_bench_on_a_cpu_judges_nothing_and_says_so_exit_3():
    """One skip is not a pass: NOT JUDGED, exit 3 (rocmcheck.result.exit_code), as text and as JSON."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    for extra in ([], ["--json"]):
        proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--bench", "--device", "cpu", *extra],
                              capture_output=True, text=True, env=env, cwd=repo, timeout=300)
        assert proc.returncode == 3, proc.stderr[-2000:]
        if extra:
            report = json.loads(proc.stdout)
            assert report["verdict"] == "not_judged" and [r["status"] for r in report["results"]] == ["skip"]
        else:
            assert "NOT JUDGED" in proc.stdout and "PASS" not in proc.stdout
