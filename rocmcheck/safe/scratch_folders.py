"""rocmcheck's temporary folders: made in one way, named for whose they are, and removed once that process is gone.

Every one is named `rocmcheck-<kind>-<pid>-<pidns>-<random>` (a checkpoint's with a leading dot, so that inside a
person's --out it is hidden while it is written): what it holds (one of KINDS), the process that made it, that
process's pid namespace (the inode of /proc/self/ns/pid; 0 where it cannot be read) and mkdtemp's random part.
It is made as mkdtemp makes one (mode 0700, this user's only) and removed by whoever made it (scratch_folder, or
make_folder and remove_folder).

Why the names: a process ended by SIGKILL runs no cleanup, and rocmcheck stopped by a signal ends every process
it started with SIGKILL and leaves with os._exit (rocmcheck/cli.py, _stop), so neither its own `finally` nor its
children's run. The name says whose a folder is, so sweep can remove exactly the folders of processes that are
gone and never one still in use. The pid namespace is in the name because one /dev/shm is shared by containers
that each count pids from 1 (`docker run --ipc=host`, docs/docker.md): a pid that is gone here may be a live run
in the next container, so only a folder of this namespace is judged.

A process counts as gone when no process has its pid, when it is a zombie (it has exited and only waits for its
parent to collect it), when it is exiting, or when a SIGKILL is pending for it (/proc/PID/stat: state Z or X, flag
PF_EXITING; /proc/PID/status: SigPnd, ShdPnd): a process just sent SIGKILL may still be freeing its memory or
closing its GPU when the sweep looks, and it will never use its folder again. sweep lists each folder it is given
once and looks at nothing whose name does not match; it removes only directories of this user (never a symbolic
link, never followed: shutil.rmtree refuses both), and never raises."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

SHM = Path("/dev/shm")
# Every kind of temporary folder rocmcheck makes, and what it holds. Only these names are ever swept, so a folder
# of anyone else's that happens to start with "rocmcheck-" (a monitor's output, `rocmcheck-monitor-<date>-<time>`)
# is never one of them.
KINDS = {
    "request": "a child's request file (rocmcheck/child.py)",
    "collective": "the collective probe's rendezvous and result (rocmcheck/probes/collective.py)",
    "across": "the across-nodes probe's result (rocmcheck/probes/across_nodes.py)",
    "sweep": "the collective sweep's rendezvous and result (rocmcheck/probes/sweep.py)",
    "accelerate": "an accelerate config without its unknown keys (rocmcheck/lint/accelerate_child.py)",
    "bench": "the HF Trainer's output folder of smoke-train --bench (rocmcheck/train/bench.py)",
    "checkpoint": "train.reload's scratch checkpoint (in --out when given, else here)",
    "python": "the links that let another interpreter run the stack probes (rocmcheck/facts/python_env.py)",
}
# kind, pid, pid namespace (as written), mkdtemp's part; the leading dot of a hidden one is optional.
_NAME = re.compile(r"\.?rocmcheck-(" + "|".join(KINDS) + r")-([0-9]+)-([0-9]+)-[^/]*\Z")
# Files from this size up are unlinked by up to REMOVE_THREADS threads at once before the rest of a folder goes
# (remove_folder): a checkpoint's shards.
LARGE_FILE_BYTES = 64 << 20
REMOVE_THREADS = 8
PF_EXITING = 0x4  # include/linux/sched.h: set when the process starts to exit, before its memory is freed
# The folders this process made and has not removed yet: on a stop they are removed wherever they are (an --out).
_MADE: set[Path] = set()


def pid_namespace() -> str:
    """This process's pid namespace as the names write it: the inode of /proc/self/ns/pid (the number in its
    link, 4026531836 outside any container), "0" when it cannot be read."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def folder_prefix(kind: str, *, hidden: bool = False) -> str:
    """The name of a new folder of this process, up to mkdtemp's random part. kind: one of KINDS."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not a kind of scratch folder (KINDS)")
    return f"{'.' if hidden else ''}rocmcheck-{kind}-{os.getpid()}-{pid_namespace()}-"


def make_folder(kind: str, parent: str | os.PathLike[str] | None = None, *, hidden: bool = False) -> Path:
    """A new, empty folder (mode 0700) in parent, or in the temporary folder (TMPDIR, else /tmp). Whoever makes it
    removes it (remove_folder); a stop removes it too."""
    folder = Path(tempfile.mkdtemp(prefix=folder_prefix(kind, hidden=hidden), dir=parent))
    _MADE.add(folder)
    return folder


def remove_folder(folder: str | os.PathLike[str]) -> None:
    """Remove a folder make_folder made, with what is in it: its large files first, by several threads at once
    (_unlink_large), then the rest. Never raises (one already gone is fine)."""
    path = Path(folder)
    _remove_tree(path, ignore_errors=True)
    _MADE.discard(path)


def _remove_tree(path: Path, *, ignore_errors: bool = False) -> None:
    """The folder and what is in it: the large files first, side by side (_unlink_large), then the rest
    (shutil.rmtree, which refuses a symbolic link and never follows one). Raises OSError unless ignore_errors."""
    _unlink_large(path)
    shutil.rmtree(path, ignore_errors=ignore_errors)


def _unlink_large(folder: Path) -> None:
    """Unlink the regular files of at least LARGE_FILE_BYTES under folder (never following a link), up to
    REMOVE_THREADS at once. Removing a file gives its pages back one by one, in the remover's time, and several
    large shards go faster side by side (benchmarks/RESULTS.md, section 18)."""
    large: list[str] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size >= LARGE_FILE_BYTES:
                large.append(path)
    if len(large) < 2:
        return
    with ThreadPoolExecutor(min(REMOVE_THREADS, len(large))) as pool:
        list(pool.map(_unlink_quietly, large))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextlib.contextmanager
def scratch_folder(kind: str, parent: str | os.PathLike[str] | None = None, *,
                   hidden: bool = False) -> Iterator[Path]:
    """make_folder, removed on the way out of the block however it is left."""
    folder = make_folder(kind, parent, hidden=hidden)
    try:
        yield folder
    finally:
        remove_folder(folder)


def owner(name: str) -> tuple[int, str] | None:
    """(pid, pid namespace as written) of the process that made a folder named `name`; None for any other name."""
    match = _NAME.match(name)
    return (int(match.group(2)), match.group(3)) if match else None


def leaving(stat_text: str, status_text: str) -> bool:
    """Whether /proc/PID/stat and /proc/PID/status describe a process that is gone or on its way out: a zombie
    (or dead), exiting, or with a SIGKILL pending. Text that cannot be read says no. Never raises."""
    try:
        fields = stat_text.rsplit(")", 1)[1].split()  # the command name, in parentheses, may hold anything
        if fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING:
            return True
    except (IndexError, ValueError):
        return False
    kill_bit = 1 << (signal.SIGKILL - 1)
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd"):
            try:
                if int(value.strip(), 16) & kill_bit:
                    return True
            except ValueError:
                continue
    return False


def process_gone(pid: int) -> bool:
    """No process has this pid here, or the one that has it is leaving (leaving). A process that cannot be
    looked at further is taken as alive. Never raises."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # it exists, another user's
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            stat_text = fh.read()
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as fh:
            status_text = fh.read()
    except OSError:
        return False
    return leaving(stat_text, status_text)


def sweep(parent: str | os.PathLike[str], *, own_too: bool = False) -> list[Path]:
    """Remove the rocmcheck folders in parent whose process is gone (and this process's own with own_too): this
    user's directories only, named as folder_prefix names them, of this pid namespace. Returns what was removed.
    Never raises."""
    removed: list[Path] = []
    me, here, uid = os.getpid(), pid_namespace(), os.getuid()
    try:
        with os.scandir(parent) as listing:
            entries = [(entry.name, owner(entry.name)) for entry in listing]
    except OSError:
        return removed
    for name, made_by in entries:
        if made_by is None or made_by[1] != here:
            continue
        pid = made_by[0]
        if pid == me:
            if not own_too:
                continue
        elif not process_gone(pid):
            continue
        path = Path(parent) / name
        try:
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
                continue
            _remove_tree(path)
        except OSError:
            continue
        _MADE.discard(path)
        removed.append(path)
    return removed


def sweep_on_stop() -> list[Path]:
    """On the way out after a stop signal, once every child has been ended: the folders this process made, and
    those of this process and of processes now gone in the temporary folder and in /dev/shm. Never raises.

    It takes as long as the removal takes: a 7B's scratch checkpoint (27 GB in /dev/shm) is about 3 s to remove
    (docs/smoke-train.md). That is waited for, because a folder left in /dev/shm holds that much memory until
    someone finds it; everything else is a few small files."""
    removed: list[Path] = []
    for folder in set(_MADE):
        _MADE.discard(folder)
        if os.path.isdir(folder) and not os.path.islink(folder):
            _remove_tree(folder, ignore_errors=True)
            removed.append(folder)
    return removed + _sweep_places(own_too=True)


def sweep_gone() -> list[Path]:
    """On a normal way out: the folders in the temporary folder and in /dev/shm of processes now gone (a child
    ended at its timeout, a run killed outright). This process's own are its own to remove. Never raises."""
    return _sweep_places(own_too=False)


def _sweep_places(*, own_too: bool) -> list[Path]:
    try:
        temporary = tempfile.gettempdir()
    except OSError:  # no usable temporary folder at all
        temporary = None
    removed: list[Path] = []
    for parent in dict.fromkeys(p for p in (temporary, str(SHM)) if p):
        removed += sweep(parent, own_too=own_too)
    return removed
