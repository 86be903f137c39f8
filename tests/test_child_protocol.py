"""The one child protocol (rocmcheck/child.py) and the runner under it, on real processes: events as they
arrive, library chatter kept off the channel, a watchdog that names a hang, a tool that floods, and Ctrl-C,
SIGTERM and SIGHUP leaving no process behind, at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from child_signals import default_signals
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


# Every tool the doctor runs, hung: it ignores SIGTERM, SIGINT and SIGHUP, records its pid, and leaves a helper
# in a session of its own (setsid), out of reach of its tool's process group.
HUNG_TOOLS = ("rocminfo", "rocm-smi", "amd-smi", "hipconfig", "nvidia-smi")


def _hung_tools(folder: Path) -> Path:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name in HUNG_TOOLS:
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\ntrap '' TERM INT HUP\necho $$ >> {folder / 'pids'}\n"
                        f"{sys.executable} -c 'import os, time; os.setsid(); "
                        f"open(\"{folder / 'pids'}\", \"a\").write(f\"{{os.getpid()}}\\n\"); time.sleep(300)' &\n"
                        "exec sleep 300\n")
        tool.chmod(0o755)
    return bin_dir


def test_a_stop_that_hangs_in_its_sweep_still_exits_by_the_deadline(tmp_path):
    """Whatever the sweep after a stop signal waits on (here a removal that never returns), rocmcheck exits with
    the signal's code once STOP_DEADLINE_S has passed."""
    script = tmp_path / "stuck_stop.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from rocmcheck import cli
        from rocmcheck.safe import scratch_folders
        cli.STOP_DEADLINE_S = 1
        scratch_folders.sweep_on_stop = lambda: time.sleep(600)
        cli._install_stop_signals()
        print("ready", flush=True)
        time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "rocmcheck: terminated" in err and "Traceback" not in err
    assert 1 <= took < 10, f"exited {took:.1f} s after the signal"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_ends_doctor_at_once_and_every_process_it_started(tmp_path, sig, code):
    """Ctrl-C, kill and a closed terminal alike: the doctor exits within a second or two (not when the hung
    tools' timeouts run out) and no tool, nor the helpers they moved out of their sessions, is left."""
    env = env_with_path(_hung_tools(tmp_path), PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_signals)
    pids_file = tmp_path / "pids"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not pids_file.exists() or
                                               len(pids_file.read_text().split()) < 2 * len(HUNG_TOOLS)):
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, err
    assert b"Traceback" not in err
    assert took < 5, f"the doctor took {took:.1f} s to stop"  # measured 0.02 s; the tools' timeouts are 20 s
    started = [int(p) for p in pids_file.read_text().split()]
    assert len(started) >= 2 * len(HUNG_TOOLS) - 2, started  # nearly every tool ran, each with its helper
    for _ in range(50):
        left = [p for p in started if _alive(p)]
        if not left:
            break
        time.sleep(0.1)
    else:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        pytest.fail(f"left behind after {signal.Signals(sig).name}: {left}")


def test_a_normal_exit_ends_what_a_tool_left_running(tmp_path):
    """rocminfo answers at once but leaves a detached helper behind (setsid, stdio closed), as a daemon an
    import starts: rocmcheck adopts it (child subreaper) and ends it before it exits."""
    pid_file = tmp_path / "helper.pid"
    tool = tmp_path / "bin" / "rocminfo"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\n{sys.executable} -c 'import os, sys, time\n"
                    "if os.fork(): os._exit(0)\n"
                    "os.setsid(); null = os.open(os.devnull, os.O_RDWR); [os.dup2(null, fd) for fd in (0, 1, 2)]\n"
                    f"open(\"{pid_file}\", \"w\").write(str(os.getpid())); time.sleep(300)'\n"
                    f"while [ ! -s {pid_file} ]; do sleep 0.05; done\necho ROCk module is loaded\n")
    tool.chmod(0o755)
    env = env_with_path(tool.parent, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes", "--only",
                           "gpu.rocminfo"], env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=default_signals)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    helper = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(helper):
            break
        time.sleep(0.1)
    else:
        os.kill(helper, signal.SIGKILL)
        pytest.fail("the helper rocminfo left running outlived the doctor")


LEAVES = """
import atexit, sys, threading, time
from pathlib import Path
from rocmcheck.child import leave
out = Path(sys.argv[1])
if sys.argv[2] == "torch":
    import torch  # noqa: F401
atexit.register(lambda: (out / "atexit").write_text("ran"))
class Dies:
    def __del__(self):
        (out / "teardown").write_text("ran")  # only the interpreter's own teardown runs this
kept = Dies()
def late():
    time.sleep(0.3)
    (out / "thread").write_text("ran")
threading.Thread(target=late).start()
print("buffered, never flushed by hand", end="")
leave(int(sys.argv[3]))
"""


@pytest.mark.parametrize("with_torch", [True, False])
def test_a_child_leaves_with_its_code_its_threads_and_atexit_done_and_torch_not_torn_down(tmp_path, with_torch):
    """rocmcheck.child.leave, in a real process: the exit code, a non-daemon thread's work, the atexit handlers
    and buffered stdout all kept; with torch imported, the interpreter's teardown (an object's __del__ at exit)
    is skipped, without torch it runs as usual."""
    if with_torch:
        pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", LEAVES, str(tmp_path), "torch" if with_torch else "plain", "3"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "buffered, never flushed by hand"
    assert (tmp_path / "thread").read_text() == "ran" and (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "teardown").exists() is (not with_torch)
