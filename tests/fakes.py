"""Small fake executables for tests: they print a recorded output, hang, or crash — real processes on PATH."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path


def make_tool(bin_dir: Path, name: str, *, stdout_file: Path | None = None, stdout: str | None = None,
              exit_code: int = 0, hang: bool = False, crash_signal: str | None = None) -> Path:
    """Write bin_dir/name: prints stdout_file (verbatim) or stdout, then exits, hangs, or kills itself."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    lines = ["#!/bin/sh"]
    if stdout_file is not None:
        lines.append(f"cat {shlex.quote(str(stdout_file))}")
    if stdout is not None:
        lines.append(f"printf '%s' {shlex.quote(stdout)}")
    if hang:
        lines.append("exec sleep 300")
    if crash_signal:
        lines.append(f"kill -{crash_signal} $$")
    lines.append(f"exit {exit_code}")
    path = bin_dir / name
    path.write_text("\n".join(lines) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def env_with_path(bin_dir: Path, **extra: str) -> dict[str, str]:
    """os.environ with bin_dir first on PATH (the real tools, if any, stay reachable after it)."""
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env
