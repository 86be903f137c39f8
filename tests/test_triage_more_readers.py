"""Causes and readers written from the tuning part of the recorded threads (tests/fixtures/triage_threads/tune/),
each tested on the real pastes it was written from and on real lines it must leave alone."""

from __future__ import annotations

import json

from conftest import PROJECT_FIXTURES_DIR

from rocmcheck.triage import triage


def _tune_paste(name: str) -> str:
    path = PROJECT_FIXTURES_DIR / "triage_threads" / "tune" / f"{name}.json"
    return json.loads(path.read_text("utf-8"))["paste"]


def _top_ids(text: str, n: int = 3) -> list[str]:
    return [f.id for f in triage([("p", text)]).findings[:n]]


def test_rocblas_without_a_kernel_library_for_the_arch_on_windows():
    """YellowRoseCx/koboldcpp-rocm#91: a Windows build whose bundled rocBLAS lacks the gfx1100 Tensile files. The
    Linux-only causes of the same line (the ROCm release's GPU list, HSA_OVERRIDE_GFX_VERSION) do not hold on
    Windows; the missing library does, and its fix names no Linux or ROCm-on-Linux step."""
    t = triage([("p", _tune_paste("YellowRoseCx-koboldcpp-rocm-91"))])
    top = t.findings[0]
    assert top.id == "rocblas.arch_library_missing"
    assert "for GPU arch : gfx1100" in top.quotes[0].text
    for word in ("/opt/rocm", "sudo", "apt ", "HSA_OVERRIDE", "PYTORCH_ROCM_ARCH"):
        assert word not in top.fix.text
