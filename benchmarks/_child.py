"""Shared by the benchmark scripts: run `python ARGV` from the repo as a child with a timeout, and read the
JSON line a `--json` command prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(argv: list[str], timeout: float,
          extra_env: dict[str, str] | None = None) -> tuple[float, int | None, str, str]:
    """(wall seconds, exit code or None on timeout, stdout, stderr); offline, this checkout first on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    env.update(extra_env or {})
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
        return time.perf_counter() - t0, p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return time.perf_counter() - t0, None, out, f"timed out after {timeout} s"


def last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
