"""Children that hang: lint starts a hung DeepSpeed child once per run, not once per file; and SIGINT or
SIGTERM during lint, smoke-train or plan --measure ends the command (130/143, no traceback) and leaves no
process of its group behind (read from /proc)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hostile import REPO, hanging_deepspeed
from rocmcheck.lint import deepspeed_deep

DS_CONFIG = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}


def test_lint_skips_deepspeed_for_the_rest_once_its_child_hung(tmp_path, monkeypatch):
    site, starts = hanging_deepspeed(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(deepspeed_deep, "DEFAULT_TIMEOUT_S", 5.0)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for f in (first, second):
        f.write_text(json.dumps(DS_CONFIG))
    from rocmcheck.cli import cli

    result = CliRunner().invoke(cli, ["lint", str(first), str(second)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert len(starts.read_text().split()) == 1, "the hung DeepSpeed child was started again for the second file"
    out = result.output
    assert "gave no answer" in out and "did not finish" in out  # the first file: the child hung
    assert f"the DeepSpeed check hung on {first}; skipped for the rest" in out
    # Only within one run: a new run tries DeepSpeed again.
    CliRunner().invoke(cli, ["lint", str(second)])
    assert len(starts.read_text().split()) == 2
