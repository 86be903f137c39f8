"""imports_without_gc: no collection inside the block, the heap frozen after it, the collector's state restored,
also when the block raises (a broken torch install)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import pytest

from rocmcheck.heap import imports_without_gc


def test_no_collection_inside_then_frozen_and_restored():
    runs: list[int] = []

    def count(phase, info):
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        frozen_before = gc.get_freeze_count()
        with imports_without_gc():
            junk = [[i] for i in range(50_000)]  # far past the young generation's threshold of 700
            assert not gc.isenabled()
        assert runs == []
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen_before + len(junk)
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()


def test_a_failing_import_restores_the_collector():
    with pytest.raises(ImportError):
        with imports_without_gc():
            import rocmcheck_no_such_module  # noqa: F401
    assert gc.isenabled()
    gc.unfreeze()
    gc.disable()
    try:
        with imports_without_gc():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
        gc.unfreeze()


def test_importing_torch_this_way_needs_no_full_collection():
    """The point of it, on the real torch: a plain import sets off full collections, this one none."""
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import gc, sys
        full = []
        gc.callbacks.append(lambda phase, info: phase == "start" and info["generation"] == 2 and full.append(1))
        if sys.argv[1] == "wrapped":
            from rocmcheck.heap import imports_without_gc
            with imports_without_gc():
                import torch
        else:
            import torch
        print(len(full))
    """)
    counts = {how: int(subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, timeout=120,
                                      check=True).stdout.split()[-1]) for how in ("plain", "wrapped")}
    assert counts["wrapped"] == 0 and counts["plain"] >= 1, counts
