"""Children that hang: lint starts a hung DeepSpeed child once per run, not once per file; and SIGINT, SIGTERM
or SIGHUP during lint, smoke-train, plan --measure, probe or build-env --arch auto ends the command at once
(130/143/129, no traceback) and leaves no process of its group behind (read from /proc)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_signals import default_signals
from click.testing import CliRunner
from hostile import REPO, hanging_deepspeed

from rocmcheck.lint import deepspeed_deep

DS_CONFIG = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}


def test_lint_skips_deepspeed_for_the_rest_once_its_child_hung(tmp_path, monkeypatch):
    site, starts = hanging_deepspeed(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(deepspeed_deep, "DEFAULT_TIMEOUT_S", 3.0)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for f in (first, second):
        f.write_text(json.dumps(DS_CONFIG))
    from rocmcheck.cli import cli

    result = CliRunner().invoke(cli, ["lint", str(first), str(second)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert len(starts.read_text().split()) == 1, "the hung DeepSpeed child was started again for the second file"
    out = result.output
    assert "gave no answer" in out and "did not finish" in out  # the first file: the child hung
    assert f"the DeepSpeed check hung on {first}; skipped for the rest" in out
    # Only within one run: a new run tries DeepSpeed again.
    CliRunner().invoke(cli, ["lint", str(second)])
    assert len(starts.read_text().split()) == 2


# --- signals: the command ends and takes every process it started with it ----------------------------------

def _descendants(pid: int) -> set[int]:
    """Every live process below pid (read from /proc/*/stat's ppid)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def _in_group_or_session(ident: int) -> set[int]:
    """Live (not zombie) processes whose process group or session is ident."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and ident in (int(fields[2]), int(fields[3])):
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal_and_inspect(argv: list[str], env: dict[str, str], ready, sig: int, cwd: Path) -> None:
    """Run `python -m rocmcheck ARGV` as its own session (the stop signals at their defaults: child_signals), wait
    until ready(pid) says its children are running, record every process below it, send sig, and check: exit
    128+sig within STOP_WITHIN_S, no traceback, none of those processes and nothing in its group or session left."""
    env = dict(env, PYTHONPATH=f"{REPO}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=default_signals)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        is_ready = False
        while not is_ready and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            is_ready = ready(proc.pid)
        assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-2000:]
        assert is_ready, "the command's children never started"
        started = _descendants(proc.pid)
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:  # the test failed before the signal: leave nothing running either way
            for pid in _descendants(proc.pid) | started:  # children in sessions of their own (torchrun) too
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            os.killpg(proc.pid, signal.SIGKILL)
    text = err.decode(errors="replace")
    assert proc.returncode == 128 + sig, text[-2000:]
    assert "Traceback" not in text, text[-3000:]
    assert took < STOP_WITHIN_S, f"{signal.Signals(sig).name} took {took:.1f} s to end the command"
    for _ in range(50):  # the kill is sent on the way out; give the kernel a moment to reap
        left = {p for p in started if _alive(p)} | _in_group_or_session(proc.pid)
        if not left:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"left behind after {signal.Signals(sig).name}: {sorted(left)} of {sorted(started)}")


SIGNALS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                                  ids=["SIGINT", "SIGTERM", "SIGHUP"])
# Measured: 0.02 to 0.1 s from the signal to the exit; a command that waited for its children would take their
# timeouts (20 s and more).
STOP_WITHIN_S = 5.0


@SIGNALS
def test_a_signal_during_lint_ends_the_hung_deepspeed_child(tmp_path, sig):
    site, starts = hanging_deepspeed(tmp_path)
    config = tmp_path / "ds.json"
    config.write_text(json.dumps(DS_CONFIG))
    env = dict(os.environ, PYTHONPATH=str(site))
    _signal_and_inspect(["lint", str(config)], env, lambda pid: starts.exists(), sig, tmp_path)
    assert len(starts.read_text().split()) == 1


def _torch_loaded(pid: int) -> bool:
    try:
        return "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@SIGNALS
def test_a_signal_during_an_in_process_smoke_train_ends_it(tmp_path, sig):
    seen = []

    def training(pid: int) -> bool:  # torch is loaded, and a few seconds more: the loop is running
        if _torch_loaded(pid):
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] > 3

    _signal_and_inspect(["smoke-train", "--device", "cpu", "--steps", "100000"], dict(os.environ), training, sig,
                        tmp_path)


@SIGNALS
def test_a_signal_during_a_two_rank_smoke_train_ends_torchrun_and_its_ranks(tmp_path, sig):
    def ranks_running(pid: int) -> bool:
        ranks = []
        for p in _descendants(pid):
            try:
                argv = Path(f"/proc/{p}/cmdline").read_bytes()
            except OSError:
                continue
            # the ranks, not torchrun (whose own argv names the module too)
            if b"rocmcheck.train.child" in argv and b"torch.distributed.run" not in argv and _torch_loaded(p):
                ranks.append(p)
        return len(ranks) == 2

    _signal_and_inspect(["smoke-train", "--device", "cpu", "--nproc", "2", "--steps", "100000"], dict(os.environ),
                        ranks_running, sig, tmp_path)


@SIGNALS
def test_a_signal_during_plan_measure_ends_its_hung_child(tmp_path, sig):
    # The measuring child imports torch first; a stand-in torch that records its pid and sleeps hangs it there.
    starts = tmp_path / "torch.starts"
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "__init__.py").write_text(
        f"import os, time\nopen({str(starts)!r}, 'a').write(f'{{os.getpid()}}\\n')\ntime.sleep(300)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    _signal_and_inspect(["plan", "--model", "llama-2-7b", "--measure"], env, lambda pid: starts.exists(), sig,
                        tmp_path)


def _stand_in_torch(folder: Path) -> tuple[Path, Path]:
    """folder/site/torch: a package whose import appends its pid to folder/torch.starts and then sleeps (a
    hung driver init); returns (the folder to put on PYTHONPATH, the starts file)."""
    starts = folder / "torch.starts"
    (folder / "site" / "torch").mkdir(parents=True)
    (folder / "site" / "torch" / "__init__.py").write_text(
        f"import os, time\nopen({str(starts)!r}, 'a').write(f'{{os.getpid()}}\\n')\ntime.sleep(300)\n")
    return folder / "site", starts


@SIGNALS
def test_a_signal_during_probe_ends_its_hung_children(tmp_path, sig):
    # `probe all` starts the main probe child, which hangs importing torch (the collective's child would start only
    # once the main child is done).
    site, starts = _stand_in_torch(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(site))
    _signal_and_inspect(["probe", "all"], env, lambda pid: starts.exists() and len(starts.read_text().split()) >= 1,
                        sig, tmp_path)


@SIGNALS
def test_a_signal_during_build_env_arch_auto_ends_its_hung_rocminfo(tmp_path, sig):
    starts = tmp_path / "rocminfo.starts"
    tool = tmp_path / "bin" / "rocminfo"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\ntrap '' TERM INT HUP\necho $$ >> {starts}\nexec sleep 300\n")
    tool.chmod(0o755)
    env = dict(os.environ, PATH=f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    _signal_and_inspect(["build-env", "--arch", "auto"], env, lambda pid: starts.exists(), sig, tmp_path)


# What a torch import may leave: a daemon in a session of its own with its stdio closed, or a forked copy of the
# probe child that keeps the probe's pipes. Neither may outlive the doctor, and the doctor must not wait for them.
TORCH_LEFTOVERS = {
    "setsid daemon": (
        "import os, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, sys, time; os.setsid(); "
        "open(sys.argv[1], \"w\").write(str(os.getpid())); time.sleep(300)', PID_FILE],\n"
        "                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"),
    "fork holding the pipes": (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    open(PID_FILE, 'w').write(str(os.getpid()))\n"
        "    time.sleep(300)\n"),
}


@pytest.mark.parametrize("leftover", list(TORCH_LEFTOVERS))
def test_what_a_torch_import_leaves_running_ends_with_the_doctor(tmp_path, leftover):
    pid_file = tmp_path / "leftover.pid"
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "__init__.py").write_text(
        f"PID_FILE = {str(pid_file)!r}\n" + TORCH_LEFTOVERS[leftover] + "__version__ = '9.9.9'\n")
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path / 'site'}")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes", "--only",
                           "torch"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          preexec_fn=default_signals)
    took = time.monotonic() - start
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert pid_file.exists(), "the stand-in torch never ran"
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the {leftover} the torch import left (pid {pid}) outlived the doctor")
    assert took < 60, took  # the probe's 45 s timeout was not waited out
