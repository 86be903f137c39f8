"""How the CLI ends a process once a command is done: after torch was imported it skips the interpreter's
teardown (rocmcheck.cli._leave), and what a normal exit does must still happen: the exit code, the atexit
handlers, output written to a pipe, and the non-daemon threads run to their end. Real child processes;
a stand-in module named torch marks "torch was imported" without paying for the real one."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

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
