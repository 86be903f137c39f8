"""The device the planted-fault training tests run on: the CPU here and in CI; `ROCMCHECK_TEST_DEVICE=cuda` runs
the same tests, the same faults, on a GPU (benchmarks/bench_train_faults.py does, on a lent machine)."""

from __future__ import annotations

import os

TRAIN_DEVICE = os.environ.get("ROCMCHECK_TEST_DEVICE", "cpu")
