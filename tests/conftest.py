"""Shared test helpers. Keep this file small; add fixtures, do not rework the existing ones."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

# Verbatim real tool outputs live beside the repo (../shared/fixtures), never inside it.
FIXTURES_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


def read_fixture(relpath: str) -> str:
    """The fixture's text exactly as stored (no newline translation). Skips when ../shared/fixtures is
    absent; fails when the folder exists but the file does not (a renamed fixture should be noticed)."""
    if not FIXTURES_DIR.is_dir():
        pytest.skip(f"../shared/fixtures not found: {FIXTURES_DIR}")
    path = FIXTURES_DIR / relpath
    if not path.is_file():
        pytest.fail(f"fixture file missing: {path}")
    return path.read_bytes().decode("utf-8")


# Outputs this project recorded itself, or found in public sources after ../shared was laid: inside the
# repository, each with its source (tests/fixtures/*/README.md or a .source file beside it).
PROJECT_FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"


def project_fixture(relpath: str) -> str:
    return (PROJECT_FIXTURES_DIR / relpath).read_bytes().decode("utf-8")


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    """fixture_text("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt") -> that file's text."""
    return read_fixture


@pytest.fixture(scope="session")
def torch_extensions_dir(tmp_path_factory) -> str:
    """Where DeepSpeed JIT-builds its CPU ops (shm_comm, cpu_adam) during this test session: built once
    per session (about 1-2 min on 2 cores), never in the user's ~/.cache. Set
    ROCMCHECK_TEST_TORCH_EXTENSIONS_DIR to keep the builds between sessions (a CI cache)."""
    import os

    keep = os.environ.get("ROCMCHECK_TEST_TORCH_EXTENSIONS_DIR")
    return keep or str(tmp_path_factory.mktemp("torch-extensions"))
