"""Every process rocmcheck starts dies with it, whatever ends it: SIGKILL (which it cannot catch: the parent-death
signal of each command and the runner's watchdog end them), and SIGQUIT / SIGUSR1 / SIGUSR2 (handled like SIGTERM).
A doctor runs with hung fake tools on PATH (each ignores TERM, INT, HUP, QUIT and USR1; one leaves a grandchild in
a session of its own); once they all run, rocmcheck is signalled, and no process that carries this test's mark in
its environment may be left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from child_signals import default_signals

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("rocminfo", "rocm-smi", "amd-smi", "nvidia-smi", "hipconfig")
HUNG = '#!/bin/sh\ntrap "" TERM INT HUP QUIT USR1 USR2\n{extra}touch "$MARK_DIR/$(basename "$0")"\nexec sleep 3071\n'
# A grandchild that leaves its tool's session at once (a daemon a tool starts).
ESCAPES = "setsid sleep 3072 &\n"
STARTED_WITHIN_S = 120.0  # the doctor reaches its tools in seconds; far above that on a loaded box
GONE_WITHIN_S = 20.0


def _marked(mark: str) -> list[str]:
    """The command lines of every process whose environment holds mark."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                out.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return out


def _wait_for(check, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.2)
    return check()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal and /proc: Linux")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGQUIT, signal.SIGUSR1])
def test_nothing_outlives_a_doctor_ended_by(tmp_path, sig):
    tools, marks = tmp_path / "bin", tmp_path / "started"
    tools.mkdir()
    marks.mkdir()
    for name in TOOLS:
        (tools / name).write_text(HUNG.format(extra=ESCAPES if name == "rocminfo" else ""))
        (tools / name).chmod(0o755)
    mark = f"ROCMCHECK_ORPHAN_MARK={uuid.uuid4().hex}"
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "MARK_DIR": str(marks),
           "PYTHONPATH": str(REPO), mark.split("=")[0]: mark.split("=")[1]}
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes"],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=default_signals)
    try:
        assert _wait_for(lambda: len(list(marks.iterdir())) >= 3 or proc.poll() is not None, STARTED_WITHIN_S)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(1.5)  # the watchdog's look at what runs below the commands (WATCH_S) has come round
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig)
        assert _wait_for(lambda: not _marked(mark), GONE_WITHIN_S), _marked(mark)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _end_marked(mark)  # what a failure left, by pid, so no later test inherits it


def _end_marked(mark: str) -> None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "environ").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue
