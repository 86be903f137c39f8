"""The one child protocol (rocmcheck/child.py) and the runner under it, on real processes: events as they
arrive, library chatter kept off the channel, a watchdog that names a hang, a tool that floods, and Ctrl-C /
SIGTERM leaving no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import env_with_path

from rocmcheck.child import child_env, parse_events, run_child
from rocmcheck.runner import MAX_OUTPUT_CHARS, run_command

REPO = Path(__file__).resolve().parents[1]


def write_child(tmp_path: Path, body: str) -> dict[str, str]:
    """A child module `tchild` in tmp_path speaking through rocmcheck.child; returns the env that finds it."""
    (tmp_path / "tchild.py").write_text(textwrap.dedent("""\
        import os, sys, time
        from rocmcheck.child import open_channel, read_request, watchdog
        request = read_request()
        channel = open_channel()
        """) + textwrap.dedent(body))
    env = child_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    return env


def test_events_arrive_in_order_and_chatter_goes_to_stderr(tmp_path):
    env = write_child(tmp_path, """
        print("a library banner on stdout")
        os.write(1, b"C-level noise on fd 1\\n")
        channel.emit("hello", value=request["value"])
        channel.emit("done")
        """)
    run = run_child("tchild", {"value": 42}, 30, env=env)
    assert run.command.returncode == 0
    assert [e["event"] for e in run.events] == ["hello", "done"]
    assert run.last("hello")["value"] == 42
    assert run.bad_lines == []
    assert "a library banner on stdout" in run.command.stderr and "C-level noise" in run.command.stderr


def test_each_event_reaches_the_parent_while_the_child_still_runs(tmp_path):
    # The child waits for a file that only the parent's event handler creates: it can finish only if the
    # first event was handed over before the child ended.
    flag = tmp_path / "seen"
    env = write_child(tmp_path, f"""
        channel.emit("step", n=1)
        deadline = time.time() + 20
        while not os.path.exists({str(flag)!r}) and time.time() < deadline:
            time.sleep(0.05)
        channel.emit("done", saw_flag=os.path.exists({str(flag)!r}))
        """)
    seen = []
    run = run_child("tchild", {}, 30, env=env, on_event=lambda e: (seen.append(e["event"]), flag.touch()))
    assert seen == ["step", "done"]
    assert run.last("done")["saw_flag"] is True


def test_watchdog_turns_a_stuck_step_into_a_named_hang(tmp_path):
    env = write_child(tmp_path, """
        channel.emit("start", step="stuck")
        with watchdog(0.5):
            time.sleep(60)
        channel.emit("done")
        """)
    run = run_child("tchild", {}, 30, env=env)
    assert run.hung and run.watchdog_fired and not run.command.timed_out
    assert run.last("start")["step"] == "stuck" and run.last("done") is None


def test_a_child_past_its_timeout_is_killed_with_its_group(tmp_path):
    env = write_child(tmp_path, """
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        channel.emit("start")
        time.sleep(300)
        """)
    t0 = time.monotonic()
    run = run_child("tchild", {}, 3, env=env)
    assert run.command.timed_out and run.hung
    assert run.last("start") is not None
    assert time.monotonic() - t0 < 30


def test_garbage_and_truncated_lines_are_kept_apart_never_raised():
    events, bad = parse_events('{"event": "a"}\nnot json\n{"event": "b", "x": [1,\n[1, 2]\n{"no_event": 1}\n')
    assert [e["event"] for e in events] == ["a"]
    assert len(bad) == 4
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_events(deep) == ([], [deep[:300]])


def test_a_bad_request_is_one_line_and_exit_2(tmp_path):
    env = write_child(tmp_path, "channel.emit('done')\n")
    out = subprocess.run([sys.executable, "-m", "tchild", "--request", "[1, 2"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "--request is not JSON" in out.stderr and "Traceback" not in out.stderr


def test_a_flooding_tool_is_capped_while_it_is_read(tmp_path):
    # `yes` prints forever: the runner keeps at most the cap and says how much it dropped.
    res = run_command(["yes", "HSA error"], timeout=2)
    assert res.timed_out
    assert len(res.stdout) <= MAX_OUTPUT_CHARS + 100
    assert "more bytes of output were dropped" in res.stdout


def test_one_endless_line_still_reaches_the_listener_bounded():
    lines = []
    res = run_command([sys.executable, "-c", "import sys; sys.stdout.write('x' * 5000); sys.stdout.flush()"],
                      timeout=30, on_stdout_line=lines.append, stdout_cap=1000)
    assert res.ok and [len(line) for line in lines] == [1000]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_doctor_and_every_child_it_started(tmp_path, sig, code):
    # rocminfo hangs and records its pid; the doctor is interrupted while it waits for it.
    pid_file = tmp_path / "rocminfo.pid"
    tool = tmp_path / "bin" / "rocminfo"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    tool.chmod(0o755)
    env = env_with_path(tool.parent, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pid_file.exists(), "the fake rocminfo never started"
        time.sleep(0.3)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, err
    assert b"Traceback" not in err
    tool_pid = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(tool_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the hung rocminfo (pid {tool_pid}) outlived the doctor")
