"""Ctrl-C in a real terminal: smoke-train runs in a detached tmux pane of a fixed size (a terminal that redraws,
so its progress is a live line), gets C-c once its progress shows, and the pane's last lines are its one word
("rocmcheck: interrupted") and the shell's prompt, with no spinner drawn after them (rocmcheck/cli.py erases the
live line before that word: rocmcheck.report.progress.clear_live_lines). Skipped where tmux is not installed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rocmcheck.report.progress import CI_VARIABLES

REPO = Path(__file__).resolve().parents[1]
PROMPT = "PANE-PROMPT$"
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏━")  # rich's "dots" spinner and the counter bar
WAIT_S = 300.0  # the longest a step of the test waits for the pane on a loaded machine (a failure, not a timing)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Pane:
    def __init__(self, tmp_path: Path) -> None:
        self.socket = f"rocmcheck-test-{uuid.uuid4().hex[:8]}"
        self.env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES and k != "TMUX"}
        # The shell's own settings go on its command line: a tmux server does not hand every variable on.
        shell = {"PS1": PROMPT + " ", "TERM": "xterm-256color", "HOME": str(tmp_path),
                 "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        command = ["env", *(f"-u{name}" for name in CI_VARIABLES), *(f"{k}={v}" for k, v in shell.items()),
                   "bash", "--norc", "--noprofile"]
        self.tmux("new-session", "-d", "-s", "t", "-x", "100", "-y", "20", shlex.join(command))

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, env=self.env,
                              timeout=30, check=True).stdout

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.tmux("capture-pane", "-p", "-t", "t").splitlines() if line.strip()]

    def wait_for(self, seen) -> list[str]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            lines = self.lines()
            if seen(lines):
                return lines
            time.sleep(0.2)
        raise AssertionError("the pane never showed what the test waits for:\n" + "\n".join(self.lines()))

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, env=self.env, timeout=30)


def test_ctrl_c_leaves_the_last_line_clean(tmp_path):
    pane = Pane(tmp_path)
    try:
        pane.wait_for(lambda lines: lines and lines[-1].startswith(PROMPT))
        pane.tmux("send-keys", "-t", "t", f"{sys.executable} -m rocmcheck smoke-train --device cpu", "Enter")
        pane.wait_for(lambda lines: any("starting: imports" in line for line in lines))  # the live line is up
        pane.tmux("send-keys", "-t", "t", "C-c")
        lines = pane.wait_for(lambda lines: len(lines) >= 3 and lines[-1].endswith(PROMPT))  # the shell is back
        time.sleep(1.0)  # a redraw thread still alive would draw the line again below the prompt by now
        assert pane.lines() == lines
        assert lines[-2:] == ["rocmcheck: interrupted", PROMPT]
        command = next(i for i, line in enumerate(lines) if "smoke-train --device cpu" in line)
        assert not SPINNER & set("".join(lines[command + 1:]))  # no spinner or bar left anywhere after the command
    finally:
        pane.close()
