"""`rocmcheck monitor` on hostile input and a hostile machine, as real subprocesses: recordings that are not
UTF-8, hold NaN or words for numbers, wrong types, 100,000-deep JSON, host names that would name a path or
carry terminal payloads, a folder or FIFO where a recording should be, a doctor bundle given as a recording;
outputs that exist, a read-only place and a full disk; commands that are not programs, name a missing
interpreter or stop themselves; secrets on the watched command line; three monitors started in one second."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import monitor_curves as mc
import pytest
from hostile import cli, fsize_limit, one_line
from test_monitor_wrap import fake_nvidia_smi

from rocmcheck.monitor.output import file_host
from rocmcheck.monitor.wrap import redacted_command

GOOD = {"t": 1.0, "gpu": 0, "used_bytes": 1024, "total_bytes": 4096, "host": "node1"}


def recording(folder: Path, lines: list[str] | bytes, name: str = "memory-node1.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("".join(line + "\n" for line in lines))
    return path


def replay(tmp_path: Path, *paths: Path, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return cli("monitor", "--replay", *map(str, paths), "--out", str(tmp_path / "out"), *extra, timeout=60)


# ---- recordings ------------------------------------------------------------------------------------------

CSV_HEADER = "t,gpu,used_bytes,total_bytes,power_w,util_pct,temp_c,sm_clock_mhz,mem_clock_mhz,proc_bytes,host"


@pytest.mark.parametrize("name,content,says", [
    ("memory-a.jsonl", b'{"t": 1, "gpu": 0}\n\xff\xfe\x00bad\n', "not UTF-8"),
    ("memory-a.csv", f"{CSV_HEADER}\n1,nan,1,2,,,,,,,a\n", "gpu"),
    ("memory-a.csv", f"{CSV_HEADER}\n1,0,inf,2,,,,,,,a\n", "used_bytes"),
    ("memory-a.csv", f"{CSV_HEADER}\n1,0,lots,2,,,,,,,a\n", "not a number"),
    ("memory-a.jsonl", '{"t": "soon", "gpu": 0}\n', "t is 'soon'"),
    ("memory-a.jsonl", '{"t": 1, "gpu": 0, "host": ["a", "b"]}\n', "not a host name"),
    ("memory-a.jsonl", '{"t": 1, "gpu": 0, "used_bytes": NaN}\n', "not a finite number"),
    ("memory-a.jsonl", '{"t": Infinity, "gpu": 0}\n', "not a finite number"),
    ("memory-a.jsonl", '{"t": 1, "gpu": ' + "1" + "0" * 50 + "}\n", "too large"),
    ("memory-a.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", "nested"),
    ("memory-a.jsonl", '{"t": 1, "gpu": 0, "host": "a/b"}\n', "not a host name"),
    ("memory-a.jsonl", '{"t": 1, "gpu": 0, "host": "h$\\\\bogus$"}\n', "not a host name"),
    ("memory-a.jsonl", '{"t": 1, "gpu": 0, "host": "x\\u001b]52;c;cHduZWQ=\\u0007"}\n', "not a host name"),
    ("memory-a.jsonl", '{"t": 1, "gpu": true}\n', "not a GPU index"),
    ("memory-a.jsonl", '"just a string"\n', "JSON object"),
])
def test_a_hostile_recording_is_one_line_and_exit_2(tmp_path, name, content, says):
    data = content if isinstance(content, bytes) else content.encode()
    path = recording(tmp_path / "in", data, name)
    line = one_line(replay(tmp_path, path))
    assert line.startswith("Error: ") and says in line and "\x1b" not in line, line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # nothing written


def test_a_doctor_bundle_or_a_folder_is_not_a_recording(tmp_path):
    bundle = {"rocmcheck_bundle": 1, "facts": {"platform": {"node": "n1"}}}
    pretty = recording(tmp_path / "a", json.dumps(bundle, indent=2).splitlines(), "bundle.json")
    assert "not valid JSON" in one_line(replay(tmp_path, pretty))
    compact = recording(tmp_path / "b", [json.dumps(bundle)], "bundle.json")
    assert "not a monitor reading" in one_line(replay(tmp_path, compact))
    (tmp_path / "c" / "memory-x.jsonl").mkdir(parents=True)  # a folder named like a recording, inside the one given
    assert "is a directory" in one_line(replay(tmp_path, tmp_path / "c"))


def test_a_fifo_and_an_endless_device_are_refused_at_once(tmp_path):
    fifo = tmp_path / "memory-f.jsonl"
    os.mkfifo(fifo)
    start = time.monotonic()
    assert "FIFO" in one_line(replay(tmp_path, fifo))
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "memory-z.jsonl").symlink_to("/dev/zero")
    assert "character device" in one_line(replay(tmp_path, tmp_path / "zero"))
    assert time.monotonic() - start < 30


def test_a_line_cut_off_by_a_killed_monitor_is_dropped(tmp_path):
    t, used = mc.flat()
    lines = [json.dumps({"t": x, "gpu": 0, "used_bytes": int(u), "total_bytes": mc.H200, "host": "node1"})
             for x, u in zip(t, used)]
    path = tmp_path / "in" / "memory-node1.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + '\n{"t": 300.0, "gpu": 0, "used_by')  # no newline: half a line
    proc = replay(tmp_path, path)
    assert proc.returncode == 0, proc.stderr
    assert "monitor.memory_curve" in proc.stderr and "flat" in proc.stderr


def test_the_verdict_is_never_written_over_an_existing_file_without_force(tmp_path):
    path = recording(tmp_path / "in", [json.dumps(GOOD)])
    out = tmp_path / "out"
    out.mkdir()
    (out / "verdict-node1.json").write_text("mine\n")
    line = one_line(replay(tmp_path, path))
    assert "verdict-node1.json" in line and "--force" in line
    assert (out / "verdict-node1.json").read_text() == "mine\n"
    proc = replay(tmp_path, path, extra=("--force",))
    assert proc.returncode == 0, proc.stderr  # one reading: the curve is too short, the peak is judged
    assert json.loads((out / "verdict-node1.json").read_text())["command"] == "monitor"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left behind


def test_outputs_are_never_written_through_a_symbolic_link(tmp_path):
    path = recording(tmp_path / "in", [json.dumps(GOOD)])
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "verdict-node1.json").symlink_to(outside / "new.json")  # dangling: it would create a file outside
    assert "symbolic link" in one_line(replay(tmp_path, path))
    assert replay(tmp_path, path, extra=("--force",)).returncode == 0
    assert not (outside / "new.json").exists() and not (out / "verdict-node1.json").is_symlink()
    # The live monitor's recordings: a link planted where memory-<host>.csv goes is refused before the command.
    env = fake_nvidia_smi(tmp_path)
    live = tmp_path / "live"
    live.mkdir()
    host = file_host(os.uname().nodename.split(".")[0])
    (live / f"memory-{host}.csv").symlink_to(outside / "csv")
    marker = tmp_path / "ran"
    line = one_line(run(tmp_path, "--out", str(live), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')",
                        env=env))
    assert "exists" in line and not marker.exists() and not (outside / "csv").exists()


# ---- the live monitor ------------------------------------------------------------------------------------

def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, preexec_fn=None,
        timeout: float = 60) -> subprocess.CompletedProcess:
    return cli("monitor", "--quiet", *args, env=env, cwd=cwd or tmp_path, preexec_fn=preexec_fn, timeout=timeout)


def test_out_where_nothing_can_be_written_is_one_line_before_the_command_runs(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    marker = tmp_path / "ran"
    line = one_line(run(tmp_path, "--out", "/proc/rocmcheck-monitor-test", "--", sys.executable, "-c",
                        f"open({str(marker)!r}, 'w')", env=env))
    assert "cannot" in line and "/proc/rocmcheck-monitor-test" in line
    assert not marker.exists()


def test_a_disk_that_fills_up_stops_the_recording_not_the_sampling(tmp_path):
    """RLIMIT_FSIZE makes every write past 3000 bytes fail with EFBIG, as a full or quota'd disk does."""
    env = fake_nvidia_smi(tmp_path)
    proc = run(tmp_path, "--interval", "0.1", "--out", str(tmp_path / "out"), "--", sys.executable, "-c",
               "import time; time.sleep(2)", env=env, preexec_fn=fsize_limit(3000))
    assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr  # the command succeeded; the peak was judged from memory
    assert "the recording stops after" in proc.stderr and "monitor.memory_peak" in proc.stderr
    assert "the verdict is not saved" in proc.stderr


def test_three_monitors_in_one_second_each_run_their_command(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--", sys.executable, "-c",
                               f"open('ran-{i}', 'w')"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-0", "ran-1", "ran-2"]
    folders = list(tmp_path.glob("rocmcheck-monitor-*"))
    assert len(folders) == 3 and all(len(list(f.glob("verdict-*.json"))) == 1 for f in folders)


def test_short_out_flag_is_the_out_folder(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    proc = run(tmp_path, "-o", str(tmp_path / "o"), "--", sys.executable, "-c", "pass", env=env)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "o").glob("verdict-*.json"))
    assert "no such option: --intervl" in one_line(run(tmp_path, "--intervl", "5", "--", "true"))


def test_commands_that_cannot_run_say_why_as_a_shell_does(tmp_path):
    binary = tmp_path / "not-a-program"
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"garbage" * 10)
    binary.chmod(0o755)
    proc = run(tmp_path, "--", str(binary))
    assert proc.returncode == 126 and "Traceback" not in proc.stderr
    assert "cannot execute" in proc.stderr and "Exec format error" in proc.stderr
    script = tmp_path / "script"
    script.write_text("#!/no/such/interpreter -x\necho hi\n")
    script.chmod(0o755)
    proc = run(tmp_path, "--", str(script))
    assert proc.returncode == 126 and "bad interpreter: /no/such/interpreter" in proc.stderr
    assert "command not found" not in proc.stderr
    proc = run(tmp_path, "--", "no-such-command-rocmcheck")
    assert proc.returncode == 127 and "command not found" in proc.stderr


def test_a_command_that_stops_itself_is_ended_not_waited_for_forever(tmp_path):
    start = time.monotonic()
    proc = run(tmp_path, "--", "sh", "-c", "kill -STOP $$; echo continued", timeout=60)
    assert proc.returncode == 128 + signal.SIGSTOP, proc.stderr
    assert "stopped (SIGSTOP)" in proc.stderr and "continued" not in proc.stdout
    assert time.monotonic() - start < 40


def test_a_stopped_command_that_is_continued_goes_on(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--", "sh", "-c",
                             "kill -STOP $$; echo continued"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    child = None
    while child is None and time.monotonic() < deadline:  # the sh below the monitor, once it is stopped
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rfind(")") + 2:].split()
                if fields[1] == str(proc.pid) and fields[0] == "T":
                    child = int(entry)
        time.sleep(0.05)
    assert child is not None
    os.kill(child, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3 and out == "continued\n", err  # no GPU here: the command succeeded, nothing judged


def test_secrets_on_the_watched_command_line_are_redacted(tmp_path):
    env = fake_nvidia_smi(tmp_path)
    token, key, password = "hf_" + "a1B2c3D4" * 4, "wandb0123456789abcdef", "hunter2-db"
    proc = run(tmp_path, "--out", str(tmp_path / "o"), "--", sys.executable, "-c", "pass", "--hub_token", token,
               f"--wandb_api_key={key}", "--db-password", password, env=env)
    assert proc.returncode == 0, proc.stderr
    verdict = (tmp_path / "o" / f"verdict-{next((tmp_path / 'o').glob('verdict-*.json')).stem[8:]}.json").read_text()
    for secret in (token, key, password):
        assert secret not in verdict and secret not in proc.stderr
    assert json.loads(verdict)["watched_command"][-5:] == ["--hub_token", "<redacted>", "--wandb_api_key=<redacted>",
                                                            "--db-password", "<redacted>"]


def test_command_and_host_helpers():
    assert redacted_command(["python", "train.py", "--lr", "2e-5", "--token=abc"]) == \
        ["python", "train.py", "--lr", "2e-5", "--token=<redacted>"]
    assert file_host("a/b c") == "a_b_c" and file_host("..") == "host" and file_host("gpu-007.x") == "gpu-007.x"


def test_on_a_terminal_a_stopped_command_stops_the_monitor_with_it(tmp_path):
    """Under an interactive shell (a real pty, job control on): the shell shows the job stopped, `fg` continues
    the monitor, which continues the command."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive bash on the pty
        os.chdir(tmp_path)
        os.environ["PS1"] = "PROMPT$ "
        os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])

    def read_until(marker: str, seconds: float = 60) -> str:
        out, deadline = "", time.monotonic() + seconds
        while not re.search(marker, out) and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    out += os.read(fd, 65536).decode(errors="replace")
                except OSError:
                    break
        return out

    try:
        assert "PROMPT$ " in read_until(r"PROMPT\$ ", 20)
        os.write(fd, f"{sys.executable} -m rocmcheck monitor --quiet -- sh -c 'kill -STOP $$; echo back-$((40+2))'\n"
                 .encode())
        assert "Stopped" in read_until("Stopped")
        os.write(fd, b"fg\n")
        assert "back-42" in read_until("back-42")
        os.write(fd, b"echo rc=$?\n")
        assert re.search(r"rc=3\b", read_until(r"rc=\d"))  # no GPU here: the command succeeded, nothing could be judged
    finally:
        os.write(fd, b"exit\n")
        os.close(fd)
        os.waitpid(pid, 0)
