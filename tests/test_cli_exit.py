"""How the CLI ends a process once a command is done: after torch was imported it skips the interpreter's
teardown (rocmcheck.cli._leave), and what a normal exit does must still happen: the exit code, the atexit
handlers, output written to a pipe, and the non-daemon threads run to their end; and what it does when stdout
cannot be written (a full disk, a closed pipe). Real child processes; a stand-in module named torch marks
"torch was imported" without paying for the real one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import atexit, sys, threading, time, types
    if sys.argv[1] == "torch":
        sys.modules["torch"] = types.ModuleType("torch")
    from rocmcheck.cli import _leave
    atexit.register(lambda: print("atexit ran", flush=False))

    def late_writer():
        time.sleep(0.3)
        sys.stdout.write("thread finished\\n")

    threading.Thread(target=late_writer).start()
    sys.stdout.write("x" * 100000 + "\\n")  # more than a pipe buffer, still buffered when _leave runs
    _leave(int(sys.argv[2]))
    print("never printed")
""")


@pytest.mark.parametrize("torch_loaded", ["torch", "plain"])
@pytest.mark.parametrize("code", [0, 1, 3])
def test_leave_keeps_exit_code_output_threads_and_atexit(torch_loaded, code):
    proc = subprocess.run([sys.executable, "-c", CHILD, torch_loaded, str(code)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == code, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "x" * 100000
    assert "thread finished" in lines and lines[-1] == "atexit ran"
    assert "never printed" not in proc.stdout


def test_a_command_that_calls_sys_exit_keeps_its_code(tmp_path):
    """smoke-train ends with sys.exit(code) inside the command; cli.main turns that into the process's code."""
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--model", str(bad)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no config.json" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "rocmcheck" in proc.stdout


@pytest.mark.parametrize("torch_loaded", ["torch", "plain"])
def test_a_message_keeps_the_interpreters_own_exit(torch_loaded):
    """sys.exit("...") prints the message on stderr and exits 1, with or without torch loaded."""
    code = ("import sys, types\n"
            "if sys.argv[1] == 'torch':\n    sys.modules['torch'] = types.ModuleType('torch')\n"
            "from rocmcheck.cli import _leave\n_leave('cannot go on: reason')\n")
    proc = subprocess.run([sys.executable, "-c", code, torch_loaded], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.strip() == "cannot go on: reason"


# stdout that cannot be written: one line on stderr and a non-zero exit, for every command alike (/dev/full says
# ENOSPC to every write, as a full disk does); a closed pipe stays quiet (as click has it), exit 1.
OUTPUT_COMMANDS = {
    "doctor": ["doctor", "--no-train", "--no-gpu-probes", "--only", "host"],
    "doctor --json": ["doctor", "--json", "--no-train", "--no-gpu-probes", "--only", "host"],
    "lint": ["lint", str(REPO / "tests" / "fixtures" / "seeds" / "zero3-offload-seed.json")],
    "build-env": ["build-env", "--arch", "gfx942"],
    "recipes show": ["recipes", "show", "zero2"],
    "recipes list": ["recipes", "list"],
    "--help": ["--help"],
}


def _rocmcheck(args: list[str], stdout) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "rocmcheck", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=env, cwd=REPO)


@pytest.mark.parametrize("command", list(OUTPUT_COMMANDS))
def test_a_full_device_on_stdout_is_one_line_and_a_non_zero_exit(command):
    with open("/dev/full", "w") as full:
        proc = _rocmcheck(OUTPUT_COMMANDS[command], full)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == "rocmcheck: could not write the output: No space left on device"


@pytest.mark.parametrize("command", ["recipes show", "--help", "lint"])
def test_a_closed_pipe_on_stdout_still_ends_quietly(command):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _rocmcheck(OUTPUT_COMMANDS[command], write_end)
    finally:
        os.close(write_end)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "could not write" not in proc.stderr, proc.stderr[-2000:]
