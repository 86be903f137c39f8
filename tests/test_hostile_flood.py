"""A tool that prints forever: the doctor caps what it reads while it reads, ends the tool and still reports,
with a bounded peak memory (the doctor's own VmHWM; the wall time is benchmarks/bench_flood.py's business)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_flood", REPO / "benchmarks" / "bench_flood.py")
bench_flood = importlib.util.module_from_spec(_spec)
sys.modules["bench_flood"] = bench_flood  # dataclasses look their module up there
_spec.loader.exec_module(bench_flood)


def test_doctor_under_flooding_tools_reports_them_with_bounded_memory(tmp_path):
    run = bench_flood.run_flooded_doctor(tmp_path, deadline=10)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 1, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    # The rocminfo verdict names the tool and says it did not finish (it never exits on its own).
    assert re.search(r"rocminfo (hung|did not finish)", run.stdout), run.stdout[-3000:]
    assert "rocm-smi" in run.stdout
    assert 0 < run.peak_kb < bench_flood.PEAK_TARGET_MB * 1024, run.peak_kb
