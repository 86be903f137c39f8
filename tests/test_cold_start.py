"""A cold start writes nothing: `--help` of the commands that import torch later, run with a fresh HOME and Python told
to write no bytecode, leaves no `.pyc` anywhere it looked and no cache folder; and no file of the package points
Python's bytecode somewhere else (a folder another user can write would run their code as the person's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rocmcheck"


def _pyc_files(root: Path) -> set[Path]:
    return set(root.rglob("*.pyc"))


@pytest.mark.parametrize("command", ["smoke-train", "doctor"])
def test_help_on_a_cold_machine_writes_no_bytecode_and_no_cache(command, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "PYTHONPYCACHEPREFIX"))}
    env.update(HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    before = _pyc_files(PACKAGE)
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", command, "--help"], capture_output=True, text=True,
                          env=env, cwd=work, timeout=60)
    assert proc.returncode == 0 and "Usage:" in proc.stdout, proc.stderr[-2000:]
    assert list(home.rglob("*")) == [] and list(work.rglob("*")) == []
    assert _pyc_files(PACKAGE) == before


def test_no_file_of_the_package_redirects_pythons_bytecode():
    setter = re.compile(r"pycache_prefix\s*=[^=]"  # sys.pycache_prefix = ...
                        r"|PYTHONPYCACHEPREFIX['\"]\s*\]\s*=[^=]"  # env["PYTHONPYCACHEPREFIX"] = ...
                        r"|PYTHONPYCACHEPREFIX['\"]\s*[:,]"  # {"PYTHONPYCACHEPREFIX": ...}, setdefault(..., ...)
                        r"|PYTHONPYCACHEPREFIX=")  # a shell line or an env list
    hits = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py")
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if setter.search(line)]
    assert hits == []
