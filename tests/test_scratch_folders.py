"""rocmcheck's temporary folders (rocmcheck/safe/scratch_folders.py): named for their kind and their process,
removed by whoever made them, and, once that process is gone, by the next sweep; never another user's, a symbolic
link, a folder of a live process or of another pid namespace. A real rocmcheck stopped by SIGINT, SIGTERM or
SIGHUP while its child is at work leaves none of its own or its child's behind, and a normal exit removes those
of processes now gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from child_signals import default_signals
from hostile import REPO, cli

from rocmcheck.safe import scratch_folders as sf

# A line of /proc/PID/stat and the pending-signal lines of /proc/PID/status, recorded from a sleeping `sleep 30`
# (flags 4194304 = PF_RANDOMIZE), and from a `true` that had exited and was not yet collected (state Z).
SLEEPING_STAT = ("16017 (sleep) S 16015 16015 13360 0 -1 4194304 142 0 0 0 0 0 0 0 20 0 1 0 3816345 2990080 428 "
                 "18446744073709551615 94169502871552 94169502889481 140730855374880 0 0 0 0 6 0 1 0 0 17 1 0 0 0 0 "
                 "0 94169502903568 94169502904832 94169713364992 140730855377445 140730855377454 140730855377454 "
                 "140730855378921 0\n")
ZOMBIE_STAT = ("16062 (true) Z 16021 16015 13360 0 -1 4227084 49 0 1 0 0 0 0 0 20 0 1 0 3816373 0 0 "
               "18446744073709551615 0 0 0 0 0 0 0 0 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
NOTHING_PENDING = "State:\tS (sleeping)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"


def _gone_pid() -> int:
    """The pid of a process that has exited and been collected."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    return int(proc.stdout)


def _another_namespace() -> str:
    return str(int(sf.pid_namespace()) + 1)


def _folder(parent: Path, kind: str, pid: int, namespace: str | None = None, hidden: bool = False) -> Path:
    """A folder named as the process pid would have named it, with a file in it."""
    ns = sf.pid_namespace() if namespace is None else namespace
    folder = parent / f"{'.' if hidden else ''}rocmcheck-{kind}-{pid}-{ns}-abc123"
    folder.mkdir()
    (folder / "request.json").write_text("{}")
    return folder


def test_a_folder_is_named_for_its_kind_and_process_private_and_removed_after(tmp_path):
    with sf.scratch_folder("request", tmp_path) as folder:
        assert folder.parent == tmp_path and folder.is_dir()
        assert folder.name.startswith(f"rocmcheck-request-{os.getpid()}-{sf.pid_namespace()}-")
        assert sf.owner(folder.name) == (os.getpid(), sf.pid_namespace())
        assert folder.stat().st_mode & 0o777 == 0o700
        (folder / "x").write_text("x")
    assert not folder.exists()
    with pytest.raises(RuntimeError), sf.scratch_folder("checkpoint", tmp_path, hidden=True) as hidden:
        assert hidden.name.startswith(".rocmcheck-checkpoint-")
        raise RuntimeError("the block failed")
    assert not hidden.exists()
    with pytest.raises(ValueError):
        sf.folder_prefix("monitor")  # only the kinds the sweep knows


def test_large_files_are_removed_side_by_side_and_links_are_not_followed(tmp_path, monkeypatch):
    """A checkpoint-like folder: three shards of LARGE_FILE_BYTES (sparse), small files, a link to a large file
    outside. remove_folder removes all of it, the shards by several threads, and leaves the linked file alone."""
    outside = tmp_path / "outside.bin"
    with open(outside, "wb") as fh:
        fh.truncate(sf.LARGE_FILE_BYTES)
    folder = sf.make_folder("checkpoint", tmp_path)
    (folder / "checkpoint").mkdir()
    for i in range(3):
        with open(folder / "checkpoint" / f"model-0000{i}.safetensors", "wb") as fh:
            fh.truncate(sf.LARGE_FILE_BYTES)
    (folder / "checkpoint" / "config.json").write_text("{}")
    (folder / "checkpoint" / "link.bin").symlink_to(outside)
    unlinked: dict[str, str] = {}
    real = os.unlink

    def unlink(path, *a, **k):
        unlinked[os.path.basename(path)] = threading.current_thread().name
        return real(path, *a, **k)

    monkeypatch.setattr(sf.os, "unlink", unlink)
    sf.remove_folder(folder)
    assert not folder.exists() and outside.stat().st_size == sf.LARGE_FILE_BYTES
    shards = {f"model-0000{i}.safetensors" for i in range(3)}
    assert shards <= set(unlinked) and unlinked["link.bin"] == threading.main_thread().name  # with the rest
    assert all(unlinked[name] != threading.main_thread().name for name in shards)  # by the pool's threads


def test_the_temporary_folder_is_tmpdir(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = sf.make_folder("request")
    try:
        assert folder.parent == tmp_path
    finally:
        sf.remove_folder(folder)
    assert list(tmp_path.iterdir()) == []


def test_only_folders_of_gone_processes_are_swept(tmp_path):
    gone = _gone_pid()
    dead = _folder(tmp_path, "request", gone)
    hidden = _folder(tmp_path, "checkpoint", gone, hidden=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = _folder(tmp_path, "sweep", live.pid)
        mine = _folder(tmp_path, "collective", os.getpid())
        other_namespace = _folder(tmp_path, "request", gone, namespace=_another_namespace())
        old_style = tmp_path / "rocmcheck-request-k2j4h5g6"  # no pid in the name: whose it is cannot be told
        monitor = tmp_path / f"rocmcheck-monitor-{gone}-{sf.pid_namespace()}-2"  # a person's, not a scratch kind
        unrelated = tmp_path / "someone-elses-123-456-x"
        for folder in (old_style, monitor, unrelated):
            folder.mkdir()
        a_file = tmp_path / f"rocmcheck-request-{gone}-{sf.pid_namespace()}-file"
        a_file.write_text("not a folder")
        assert sorted(sf.sweep(tmp_path)) == sorted([dead, hidden])
        assert all(p.is_dir() for p in (theirs, mine, other_namespace, old_style, monitor, unrelated))
        assert a_file.is_file()
        assert sf.sweep(tmp_path, own_too=True) == [mine] and theirs.is_dir()
    finally:
        live.kill()
        live.wait()


def test_a_symbolic_link_is_never_followed_nor_another_users_folder_touched(tmp_path, monkeypatch):
    gone = _gone_pid()
    target = tmp_path / "precious"
    target.mkdir()
    (target / "data").write_text("keep")
    parent = tmp_path / "tmp"
    parent.mkdir()
    link = parent / f"rocmcheck-request-{gone}-{sf.pid_namespace()}-link"
    link.symlink_to(target)
    theirs = _folder(parent, "request", gone)
    if os.getuid() == 0:
        os.chown(theirs, 65534, 65534)  # nobody's
    else:
        monkeypatch.setattr(os, "getuid", lambda: os.stat(theirs).st_uid + 1)  # a folder of another user's
    assert sf.sweep(parent, own_too=True) == []
    assert link.is_symlink() and (target / "data").read_text() == "keep" and (theirs / "request.json").is_file()


def test_a_zombie_counts_as_gone(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits at once; not collected until wait()
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.02)
        os.kill(child.pid, 0)  # the pid is still taken
        folder = _folder(tmp_path, "collective", child.pid)
        assert sf.process_gone(child.pid)
        assert sf.sweep(tmp_path) == [folder]
    finally:
        child.wait()


def test_a_live_process_is_not_gone_and_one_leaving_is():
    assert not sf.process_gone(os.getpid())
    assert sf.process_gone(_gone_pid())
    assert not sf.leaving(SLEEPING_STAT, NOTHING_PENDING)
    assert sf.leaving(ZOMBIE_STAT, NOTHING_PENDING)
    exiting = SLEEPING_STAT.replace(" 4194304 ", f" {4194304 | sf.PF_EXITING} ")  # freeing its memory
    assert sf.leaving(exiting.replace(") S ", ") R "), NOTHING_PENDING)
    def pending(line: str, mask: int) -> str:
        return NOTHING_PENDING.replace(f"{line}:\t0000000000000000", f"{line}:\t{mask:016x}")

    assert sf.leaving(SLEEPING_STAT, pending("SigPnd", 1 << 8))  # SIGKILL (9): bit 8
    assert sf.leaving(SLEEPING_STAT, pending("ShdPnd", 1 << 8))
    assert not sf.leaving(SLEEPING_STAT, pending("SigPnd", 1 << 14))  # a SIGTERM it may catch
    assert not sf.leaving("garbage", "garbage")
    assert not sf.leaving("1 (a) Z b) S 1 1 1 0 -1 0", "")  # the name in parentheses may hold anything


def test_the_stop_removes_what_this_process_made_and_what_gone_ones_left(tmp_path, monkeypatch):
    temporary, shm, out = tmp_path / "tmp", tmp_path / "shm", tmp_path / "out"
    for folder in (temporary, shm, out):
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setattr(sf, "SHM", shm)
    inside_out = sf.make_folder("checkpoint", out, hidden=True)  # an --out is not swept: it is known as made here
    mine = sf.make_folder("request")
    gone = _gone_pid()
    left = [_folder(temporary, "accelerate", gone), _folder(shm, "checkpoint", gone, hidden=True)]
    kept = _folder(shm, "checkpoint", gone, namespace=_another_namespace())
    assert sorted(sf.sweep_on_stop()) == sorted([inside_out, mine, *left])
    assert list(out.iterdir()) == [] and list(temporary.iterdir()) == [] and list(shm.iterdir()) == [kept]


def _stand_in_accelerate(site: Path, starts: Path) -> None:
    """accelerate (and torch) whose config module, imported once the lint child has made its folder for the file,
    records the child's pid and hangs."""
    (site / "accelerate" / "commands" / "config").mkdir(parents=True)
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    (site / "accelerate" / "__init__.py").write_text("__version__ = '0.0'\n")
    (site / "accelerate" / "commands" / "__init__.py").write_text("")
    (site / "accelerate" / "commands" / "config" / "__init__.py").write_text(
        f"import os, time\nopen({str(starts)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n")


ACCELERATE_CONFIG = ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\n"
                     "num_machines: 1\nnum_processes: 8\nmachine_rank: 0\nmain_training_function: main\n")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stopped_rocmcheck_leaves_no_temporary_folder(tmp_path, sig):
    site, starts, temporary = tmp_path / "site", tmp_path / "starts", tmp_path / "tmp"
    temporary.mkdir()
    _stand_in_accelerate(site, starts)
    config = tmp_path / "accelerate.yaml"
    config.write_text(ACCELERATE_CONFIG)
    env = dict(os.environ, TMPDIR=str(temporary), PYTHONPATH=f"{REPO}{os.pathsep}{site}")
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "lint", str(config)], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 120
        while not (starts.exists() and starts.read_text()) and proc.poll() is None:
            assert time.monotonic() < deadline, "the lint child never reached accelerate"
            time.sleep(0.05)
        child = int(starts.read_text())
        made = sorted(p.name for p in temporary.iterdir())
        # the parent's request file for the child, and the child's own folder for the config
        assert [sf.owner(n)[0] for n in made] == [child, proc.pid], made
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + sig, err.decode(errors="replace")[-2000:]
    assert list(temporary.iterdir()) == []


def test_a_normal_exit_removes_what_gone_processes_left(tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    left = _folder(temporary, "collective", _gone_pid())
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = _folder(temporary, "request", live.pid)
        done = cli("--version", env=dict(os.environ, TMPDIR=str(temporary)))
        assert done.returncode == 0, done.stderr
        assert not left.exists() and kept.is_dir()
    finally:
        live.kill()
        live.wait()
