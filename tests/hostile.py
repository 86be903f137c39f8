"""Shared pieces of the fault-injection suite (tests/test_hostile_*.py): the CLI as a real subprocess, and
hostile inputs built on disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None,
        preexec_fn=None) -> subprocess.CompletedProcess:
    """`python -m rocmcheck ARGS` from this checkout, as a person runs it."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "rocmcheck", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=cwd or REPO, preexec_fn=preexec_fn)


def one_line(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def billion_laughs(levels: int = 9) -> str:
    text = "lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, levels):
        text += f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
    return text


def fsize_limit(nbytes: int):
    """A preexec_fn: the child may not write files larger than nbytes (EFBIG past it, as on a quota'd disk)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return limit


def hanging_deepspeed(folder: Path) -> tuple[Path, Path]:
    """folder/site/deepspeed: a stand-in package whose import appends its pid to folder/deepspeed.starts and
    then sleeps; returns (the folder to put first on PYTHONPATH, the starts file)."""
    starts = folder / "deepspeed.starts"
    package = folder / "site" / "deepspeed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import os, time\n"
        f"with open({str(starts)!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
        "time.sleep(300)\n")
    return package.parent, starts
