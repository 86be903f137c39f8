"""--bench code path on a CPU-sized shape: the plain loop and HF Trainer, same init, data and settings,
must train the same way (loss parity). Speed is the benchmark's business (benchmarks/bench_train.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rocmcheck.train.bench import run_bench  # noqa: E402
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
    assert rows["loop"]["first_loss"] == pytest.approx(rows["hf_trainer"]["first_loss"], abs=1e-3)  # same init, same data
