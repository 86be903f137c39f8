"""The one way rocmcheck runs an external command: argv list, no shell, a timeout, never raises.

Every command starts in a session of its own (so the terminal's signals do not reach it and its whole group can be
ended) and every process it leaves is ended with it:
- on its timeout, the command and everything below it (its descendants, its process group, its session);
- when it has exited but something it started still holds its output pipes, that holder (found by the pipes
  themselves, in /proc/PID/fd), so the output is read to its end instead of being given up on;
- on the way out of rocmcheck (`end_descendants`, from the CLI's exit and signal paths), every process below
  rocmcheck outside its own session. With `adopt_orphans` (PR_SET_CHILD_SUBREAPER) a process that left its tool's
  group or session (setsid, setpgid, a daemon that forked twice) is handed to rocmcheck when its parent dies,
  instead of to init, so it is still found there.

What rocmcheck cannot catch (SIGKILL: the OOM killer, `kill -9`, a scheduler's escalation) ends nothing of the
above, so two more guards hold without it:
- each command starts with the parent-death signal set (PR_SET_PDEATHSIG = SIGKILL, in the fork before exec):
  the kernel kills it when the rocmcheck thread that started it ends, however that happens;
- a watchdog process (started with the first command, in a session of its own) holds the read end of a pipe only
  rocmcheck writes to, and is told each command's pid. It keeps a list of what runs below those commands (looked
  up every WATCH_S) and when the pipe closes without a goodbye (rocmcheck is gone), it ends every process in the
  commands' sessions and groups, their descendants, and what it last saw below them (a process that left its
  command's session while its parent lived). A process rocmcheck did not start through here (the command that
  `monitor` watches) is not its business. On a normal exit
  rocmcheck says goodbye (or ends the watchdog in its sweep) and the watchdog leaves without ending anything.
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterable, Sequence

from rocmcheck.record import Record
from rocmcheck.safe.files import read_head_bytes

# Output kept per stream: enough for any real rocminfo (8 GPUs ~ 60 KB), bounded against garbage.
MAX_OUTPUT_CHARS = 2_000_000
# After a command exits, how long something it started may keep its pipes open (a helper finishing its last
# write) before that holder is ended; then how long the readers get to drain what is left.
PIPE_GRACE_S = 2.0
DRAIN_S = 2.0
# Passes of the final sweep: a process that forks while it is being ended leaves a child for the next pass.
SWEEP_PASSES = 5
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# How often the watchdog looks up what runs below rocmcheck (what it ends if rocmcheck is killed).
WATCH_S = 0.5
SHEBANG_BYTES = 256  # enough for any `#!` line the kernel accepts (BINPRM_BUF_SIZE)


@dataclass
class CommandResult(Record):
    argv: list[str]
    returncode: int | None = None  # None: it never ran to completion (missing, timed out, failed to start)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    not_found: bool = False  # no such program: not on PATH, or no file at the path given
    error: str | None = None  # why it could not be run at all (set whenever it did not start and was found)
    duration_s: float = 0.0
    timeout_s: float | None = None
    # The program is there but the kernel could not start it: the interpreter its `#!` line names, or the ELF
    # loader it needs, does not exist (execve says "no such file" for the program itself). error says which.
    interpreter_missing: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe_failure(self) -> str:
        """One line saying why this command gave no usable output."""
        name = self.argv[0] if self.argv else "?"
        if self.not_found:
            return f"{name} not found on PATH"
        if self.timed_out:
            return f"{name} did not finish within {self.timeout_s:g} s (hung)"
        if self.error:
            return f"{name} could not be run: {self.error}"
        if self.returncode is not None and self.returncode < 0:
            return f"{name} crashed (killed by signal {-self.returncode})"
        if self.returncode:
            first = (self.stderr.strip() or self.stdout.strip()).splitlines()
            return f"{name} exited {self.returncode}" + (f": {first[0][:200]}" if first else "")
        return f"{name} ran"


# Commands started here and not reaped yet (each is the leader of its own session and process group). A
# re-entrant lock: the signal handler that ends them runs on the main thread, which may hold it already.
_LIVE: set[int] = set()
_LIVE_LOCK = threading.RLock()
_STOPPING = threading.Event()  # set on the way out: no new command starts after the last sweep
_ADOPTING = threading.Event()  # this process is a child subreaper (adopt_orphans)
READ_CHUNK = 1 << 16


class _CappedReader(threading.Thread):
    """Drains one pipe to its end, keeping at most `cap` bytes; the rest is counted and dropped, so a tool
    that prints forever costs a bounded amount of memory. With on_line, each complete line (also bounded)
    is handed over as soon as it arrives."""

    def __init__(self, pipe: IO[bytes], cap: int, on_line: Callable[[str], None] | None = None) -> None:
        super().__init__(daemon=True)
        self.pipe, self.cap, self.on_line = pipe, cap, on_line
        self.inode = os.fstat(pipe.fileno()).st_ino  # who else holds this pipe: _pipe_holders
        self.kept = bytearray()
        self.dropped = 0
        self._partial = bytearray()

    def run(self) -> None:
        try:
            while True:
                chunk = os.read(self.pipe.fileno(), READ_CHUNK)
                if not chunk:
                    break
                room = self.cap - len(self.kept)
                self.kept += chunk[:max(0, room)]
                self.dropped += max(0, len(chunk) - max(0, room))
                if self.on_line is not None:
                    self._lines(chunk)
            if self.on_line is not None and self._partial:
                self._hand_over(bytes(self._partial))
        except (OSError, ValueError):
            pass  # the pipe was closed under us (process killed): what was read is kept

    def _lines(self, chunk: bytes) -> None:
        self._partial += chunk
        while True:
            end = self._partial.find(b"\n")
            if end < 0:
                if len(self._partial) > self.cap:  # one endless line: hand over what fits, drop the rest
                    self._hand_over(bytes(self._partial[:self.cap]))
                    self._partial.clear()
                return
            line = bytes(self._partial[:end])
            del self._partial[:end + 1]
            self._hand_over(line[:self.cap])

    def _hand_over(self, line: bytes) -> None:
        try:
            self.on_line(line.decode("utf-8", errors="replace").rstrip("\r"))  # type: ignore[misc]
        except Exception:  # a listener's bug must not stop the draining (the child would block on a full pipe)
            self.on_line = None

    def text(self) -> str:
        out = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[rocmcheck: {self.dropped} more bytes of output were dropped]\n"
        return out


def run_command(
    argv: Sequence[str],
    timeout: float,
    env: dict[str, str] | None = None,
    input_text: str | Callable[[float], str | None] | None = None,
    cwd: str | None = None,
    on_stdout_line: Callable[[str], None] | None = None,
    stdout_cap: int = MAX_OUTPUT_CHARS,
) -> CommandResult:
    """Run argv with a timeout. Every failure mode comes back as a CommandResult, never an exception.

    Output is read while the command runs and capped per stream (stdout_cap bytes; the rest is dropped and
    counted). on_stdout_line, when given, receives each stdout line as it arrives, from a reader thread.
    input_text: what the command reads on stdin, then end of input; or a callable asked again and again (with a
    wait in seconds) while the command runs, whose first text (possibly empty) is written then: a word said later.
    None: no stdin at all."""
    argv = [str(a) for a in argv]
    result = CommandResult(argv=argv, timeout_s=timeout)
    if not argv:
        result.error = "empty command"
        return result
    if not (timeout > 0 and math.isfinite(timeout)):
        result.error = f"timeout must be a positive number of seconds, not {timeout!r}"
        return result
    exe = argv[0]
    search_path = (os.environ if env is None else env).get("PATH")
    if os.sep not in exe and shutil.which(exe, path=search_path) is None:
        result.not_found = True
        return result
    start = time.monotonic()
    with _LIVE_LOCK:  # the stop path takes this lock too: a command either starts before the sweep or not at all
        if _STOPPING.is_set():
            result.error = "rocmcheck is shutting down"
            return result
        try:
            # start_new_session: the command leads its own session and group, out of the terminal's reach; on
            # timeout the whole of it is ended (a tool that forks helpers cannot keep the pipes open).
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        except OSError as exc:
            _why_not_started(result, exc, search_path, cwd)
            return result
        _LIVE.add(proc.pid)
    _watch(proc.pid)
    readers = [_CappedReader(proc.stdout, stdout_cap, on_stdout_line),  # type: ignore[arg-type]
               _CappedReader(proc.stderr, MAX_OUTPUT_CHARS)]  # type: ignore[arg-type]
    for reader in readers:
        reader.start()
    try:
        if callable(input_text):
            threading.Thread(target=_feed_when_said, args=(proc, input_text), daemon=True,
                             name="rocmcheck-stdin-word").start()
        elif input_text is not None:
            _feed(proc, input_text)
        try:
            result.returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            _end_command(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        # The command is gone; something it started may still hold its pipes. Give it a moment, then end it.
        _join(readers, 1.0 if result.timed_out else PIPE_GRACE_S)
        if any(reader.is_alive() for reader in readers):
            _end_pipe_holders({reader.inode for reader in readers})
            _join(readers, DRAIN_S)
    finally:
        if proc.poll() is None:  # interrupted (KeyboardInterrupt) while waiting: leave nothing running
            _end_command(proc.pid)
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)
        for pipe in (proc.stdout, proc.stderr, proc.stdin):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
    result.stdout, result.stderr = readers[0].text(), readers[1].text()
    result.duration_s = round(time.monotonic() - start, 3)
    return result


def _why_not_started(result: CommandResult, exc: OSError, search_path: str | None, cwd: str | None) -> None:
    """Fill in why Popen refused: no such program, a missing working folder, a program whose interpreter is
    missing (execve's ENOENT for a file that exists), or anything else the kernel said."""
    exe = result.argv[0]
    if isinstance(exc, FileNotFoundError) and cwd is not None and exc.filename == cwd:
        result.error = f"its working folder {cwd} does not exist"
        return
    if exc.errno != errno.ENOENT:  # permission denied, exec format error, ...
        result.error = f"{type(exc).__name__}: {exc}"
        return
    path = exe if os.sep in exe else shutil.which(exe, path=search_path)
    if path is not None and cwd is not None and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    if path is None or not os.path.isfile(path):
        result.not_found = True
        return
    result.interpreter_missing = True
    interpreter = shebang_interpreter(path)
    result.error = (f"its interpreter {interpreter} (named on its #! line) does not exist" if interpreter
                    else "a loader or interpreter it needs does not exist")


def shebang_interpreter(path: str) -> str | None:
    """The interpreter a script's `#!` line names, or None (not a script, not readable, not a regular file).
    Reads at most SHEBANG_BYTES and never blocks (a FIFO is refused before it is opened for reading)."""
    head = read_head_bytes(path, SHEBANG_BYTES)
    if head is None or not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return words[0].decode("utf-8", errors="replace") if words else None


def _feed(proc: subprocess.Popen, text: str) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the command did not read its input, or has ended (its pipe closed): its exit says the rest


def _feed_when_said(proc: subprocess.Popen, said: Callable[[float], str | None]) -> None:
    """Write the first text `said` gives, once it gives one, while the command still runs."""
    while proc.poll() is None:
        text = said(0.1)
        if text is not None:
            _feed(proc, text)
            return


def _join(readers: Iterable[threading.Thread], seconds: float) -> None:
    end = time.monotonic() + seconds
    for reader in readers:
        reader.join(timeout=max(0.0, end - time.monotonic()))


# ---------------------------------------------------------------- dying with rocmcheck

_PRCTL: list[Any] = []  # the libc prctl, looked up once in the parent (a lookup after fork may take locks)


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn setting the parent-death signal (SIGKILL) in the command's process before it execs, or None
    where prctl is not there (not Linux). The function it returns calls only the prctl looked up here."""
    if not _PRCTL:
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
            prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
            prctl.restype = ctypes.c_int
        except (OSError, AttributeError):
            prctl = None
        _PRCTL.append(prctl)
    prctl = _PRCTL[0]
    if prctl is None:
        return None
    parent = os.getpid()
    kill = int(signal.SIGKILL)

    def set_pdeathsig() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # rocmcheck died between the fork and the prctl: nothing will send it
            os._exit(1)

    return set_pdeathsig


# The watchdog: a small Python program on stdin, told `pid` lines (a command started) and `bye` (a normal exit).
_WATCHDOG = r"""
import os, signal, sys, time, threading
me, parent, watch_s = os.getpid(), int(sys.argv[1]), float(sys.argv[2])
commands, seen, done = set(), set(), threading.Event()
def table():
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                out[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
            except (OSError, IndexError, ValueError):
                pass
    return out
def below(roots, t):
    kids = {}
    for pid, (ppid, _, _) in t.items():
        kids.setdefault(ppid, []).append(pid)
    out, stack = set(), list(roots)
    while stack:
        pid = stack.pop()
        for kid in kids.get(pid, ()):
            if kid not in out and kid != me:
                out.add(kid)
                stack.append(kid)
    return out
def look():
    while not done.wait(watch_s):
        t = table()
        mine = {p for p, (pp, g, s) in t.items() if g in commands or s in commands or p in commands}
        seen.clear()
        seen.update(mine | below(mine, t))
threading.Thread(target=look, daemon=True).start()
said_bye = False
for line in sys.stdin:
    line = line.strip()
    if line == "bye":
        said_bye = True
        break
    if line.isdigit():
        commands.add(int(line))
done.set()
if said_bye:
    sys.exit(0)
for _ in range(5):
    t = table()
    roots = {p for p, (pp, g, s) in t.items() if g in commands or s in commands or p in commands}
    roots |= {p for p in seen if p in t}
    targets = (roots | below(roots, t)) - {me, parent}
    if not targets:
        break
    for pid in targets:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
"""
_WATCHDOG_STATE: dict[str, Any] = {}
_WATCHDOG_LOCK = threading.Lock()


def _watch(pid: int) -> None:
    """Tell the watchdog (started the first time) that a command runs as pid. Best effort: without /proc or
    a Python to run it, commands still have their parent-death signal."""
    with _WATCHDOG_LOCK:
        if "proc" not in _WATCHDOG_STATE:
            _WATCHDOG_STATE["proc"] = _start_watchdog()
        proc = _WATCHDOG_STATE["proc"]
        if proc is None or proc.stdin is None:
            return
        try:
            proc.stdin.write(f"{pid}\n".encode())
            proc.stdin.flush()
        except (OSError, ValueError):
            _WATCHDOG_STATE["proc"] = None


def _start_watchdog() -> subprocess.Popen | None:
    import sys

    if not os.path.isdir("/proc") or not sys.executable:
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG, str(os.getpid()), str(WATCH_S)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except OSError:
        return None


def _dismiss_watchdog() -> None:
    """A normal way out: the watchdog leaves without ending anything (the sweep has done it)."""
    proc = _WATCHDOG_STATE.get("proc")
    if proc is None or proc.stdin is None:
        return
    try:
        proc.stdin.write(b"bye\n")
        proc.stdin.close()
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a stop signal interrupted this thread's own write
        proc.kill()
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()


# ---------------------------------------------------------------- finding and ending processes

def adopt_orphans() -> bool:
    """Make this process a child subreaper: a process below it whose parent dies is handed to it, not to
    init, so end_descendants still finds what left its tool's group or session. Linux only; False where the
    kernel refuses (then such a process escapes, as before)."""
    if _ADOPTING.is_set():
        return True
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        adopted = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        adopted = False
    if adopted:
        _ADOPTING.set()
    return adopted


def _process_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, process group, session) of every live process (zombies left out), from /proc."""
    table: dict[int, tuple[int, int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[0] not in (b"Z", b"X"):
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def _with_descendants(roots: set[int], table: dict[int, tuple[int, int, int]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, frontier = set(roots), list(roots)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _kill(pids: Iterable[int]) -> None:
    me = os.getpid()
    for pid in pids:
        if pid != me:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _end_command(leader: int) -> None:
    """End a command that has not been reaped yet (so its pid, group and session ids are still its own) with
    everything below it and everything in its group or session, wherever those were re-parented."""
    for _ in range(SWEEP_PASSES):
        table = _process_table()
        members = {pid for pid, (_, pgrp, sid) in table.items() if leader in (pgrp, sid)}
        targets = _with_descendants(members | ({leader} if leader in table else set()), table)
        if not targets:
            return
        _kill(targets)
        try:
            os.killpg(leader, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if targets == {leader}:
            return
        time.sleep(0.005)


def _pipe_holders(inodes: set[int]) -> set[int]:
    """Processes other than this one holding the write end of one of these pipes (read from /proc/PID/fd and
    fdinfo). Only a command's own descendants can: the pipes were made for it and are close-on-exec here (a copy
    of this process forked without exec holds only read ends, and is left alone)."""
    me, found = os.getpid(), set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in wanted and _writes(f"/proc/{name}/fdinfo/{fd}"):
                    found.add(int(name))
                    break
            except OSError:
                continue
    return found


def _writes(fdinfo: str) -> bool:
    """Whether the descriptor /proc/PID/fdinfo/FD describes was opened for writing (its flags, in octal)."""
    with open(fdinfo, encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith("flags:"):
                try:
                    return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
                except (IndexError, ValueError):
                    return True
    return True


def _end_pipe_holders(inodes: set[int]) -> None:
    """End whatever still holds a finished command's pipes. Seen twice 50 ms apart, so a process that holds
    them only for the instant between a fork and its exec (another thread starting a command) is left alone."""
    holders = _pipe_holders(inodes)
    if not holders:
        return
    time.sleep(0.05)
    holders &= _pipe_holders(inodes)
    _kill(holders)
    _reap_adopted(holders)


def _reap_adopted(pids: Iterable[int], within_s: float = 0.2) -> None:
    """Collect the exit of killed processes that were handed to this one (adopt_orphans), so they do not stay
    as zombies; one that has not died within within_s (stuck in the kernel) is left. Only those pids: a blanket
    wait would steal the exit status of a command still being waited on."""
    with _LIVE_LOCK:
        pending = set(pids) - _LIVE
    end = time.monotonic() + within_s
    while pending:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child (re-parented elsewhere) or already collected
                done = pid
            if done:
                pending.discard(pid)
        if not pending or time.monotonic() >= end:
            return
        time.sleep(0.01)


def end_descendants() -> None:
    """End every process rocmcheck started through this runner and everything they left behind, and start no
    new command. Called on the way out (a normal exit and every signal that stops rocmcheck). Found as: the
    commands not reaped yet, every process in their groups and sessions, and every child of this process
    outside its own session (a command, or an orphan handed over by adopt_orphans), with all of their
    descendants. A child in this process's own session (a multiprocessing helper, a watched command) is not one
    of them."""
    _STOPPING.set()
    # The lock keeps a command from starting during the sweep; a thread that holds it is in Popen for an instant.
    # Not got within a second (that thread stalled there), the sweep goes on without it: the process table below
    # finds every child all the same.
    locked = _LIVE_LOCK.acquire(timeout=1.0)
    live = set(_LIVE)  # one copy, made at once under the GIL, with the lock or without
    if locked:
        _LIVE_LOCK.release()
    _dismiss_watchdog()
    me = os.getpid()
    try:
        own_session = os.getsid(0)
    except OSError:
        own_session = -1
    adopted: set[int] = set()
    for _ in range(SWEEP_PASSES):
        table = _process_table()
        roots = {pid for pid, (ppid, pgrp, sid) in table.items()
                 if (ppid == me and sid != own_session) or pid in live or pgrp in live or sid in live}
        targets = _with_descendants(roots, table) - {me}
        adopted |= {pid for pid in targets if table[pid][0] == me} - live
        if not targets:
            break
        _kill(targets)
        for leader in live:
            try:
                os.killpg(leader, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    _reap_adopted(adopted)  # what was handed to this process and ended here: no zombie left for init to reap
