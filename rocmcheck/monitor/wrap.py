"""Run a person's command unchanged (or attach to a running pid) and sample its GPUs until it ends.

The command runs as a direct child with the monitor's own stdin, stdout and stderr: its output reaches the
terminal or pipe byte for byte, and the monitor writes only to stderr and its files. The child gets its own
process group, so a signal meant for the job reaches every process a launcher started:

- SIGINT, SIGTERM and SIGHUP sent to the monitor are forwarded to the child's process group.
- On a terminal, the child's group is made the terminal's foreground group while it runs, so Ctrl-C reaches it
  straight from the terminal (as without the monitor) and a program that reads the terminal (a debugger, a
  login prompt) is not stopped for reading from the background. The monitor takes the terminal back at the end.
- A command that stops (Ctrl-Z, SIGSTOP, SIGTSTP): on a terminal the monitor stops with it, so the shell holds
  the job as stopped, and continues it when the job is continued (`fg`, `bg`). With no terminal nothing could
  ever continue it: after STOP_GRACE_S the monitor says so and ends the command's process group (128+N for stop
  signal N, as a shell reports a stopped job).
- The child's exit status is kept: 128+N when a signal N killed it; 124 when --timeout ended it (as coreutils
  `timeout`); 127 when the command is not found, 126 when it cannot be run (not executable, not a program, a
  `#!` interpreter that does not exist), as a shell says.

Sampling runs on a thread of the monitor process at the interval asked for: the training process is never
paused or instrumented, it only shares the machine with one reader.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocmcheck.facts.redact import REDACTED, is_secret_name, redact_value
from rocmcheck.monitor import procs
from rocmcheck.monitor.curve import CurveVerdict, classify_curve
from rocmcheck.monitor.output import SampleWriter, StatusLine, file_host, status_text
from rocmcheck.monitor.sample import GpuSample

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# After --timeout sends SIGTERM, the command gets this long to save and exit before SIGKILL (a launcher like
# torchrun forwards the signal to its workers and waits for them).
KILL_GRACE_S = 15.0
EXIT_TIMEOUT = 124
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
# The history kept in memory for the trend arrow of the status line (readings per GPU).
TREND_WINDOW = 60
# A command stopped with no terminal to continue it from is ended after this long (counted while the monitor itself
# runs). A scheduler that suspends a job (Slurm's `scontrol suspend`) stops every process of it, the monitor too,
# and continues them together, so a stop the monitor watches for this long is the command's alone.
STOP_GRACE_S = 5.0
STOP_POLL_S = 0.1


class CannotRun(Exception):
    """The command did not start: str() is the one line a shell would print, .exit_code what it would exit."""

    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _interpreter(path: str) -> str | None:
    """The `#!` interpreter a script names, None when it names none (or cannot be read)."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    return words[0] if words else None


def start_failure(command: str, exc: OSError) -> CannotRun:
    """Why Popen could not start `command`, as a shell would say it."""
    found = command if os.sep in command else shutil.which(command)
    if isinstance(exc, FileNotFoundError):
        interpreter = _interpreter(found) if found and os.path.isfile(found) else None
        if interpreter is not None:
            return CannotRun(EXIT_NOT_EXECUTABLE, f"{command}: bad interpreter: {interpreter}: no such file")
        return CannotRun(EXIT_NOT_FOUND, f"{command}: command not found")
    if isinstance(exc, PermissionError):
        return CannotRun(EXIT_NOT_EXECUTABLE, f"{command}: permission denied")
    if exc.errno == errno.ENOEXEC:
        return CannotRun(EXIT_NOT_EXECUTABLE, f"{command}: cannot execute: not a program for this machine, nor a "
                                              "script with a #! line (Exec format error)")
    return CannotRun(EXIT_NOT_EXECUTABLE, f"{command}: cannot run: {exc.strerror or exc}")


def this_host() -> str:
    """This node's short name, as it goes into the monitor's file names."""
    return file_host(socket.gethostname().split(".")[0] or "host")


def redacted_command(argv: list[str]) -> list[str]:
    """The command line as it may be written and shown: the value of every secret-looking option
    (`--hub_token X`, `--wandb_api_key=X`, `--db-password X`) and every token-shaped word replaced by
    <redacted> (rocmcheck.facts.redact's names and shapes), and what the redactor finds by position in the whole
    line (`docker login -p X`, `sshpass -p X`, `curl -u user:X`), which no single word shows."""
    out = _redacted_words(argv)
    line = shlex.join(out)
    whole = redact_value(line)
    if whole == line:
        return out
    try:
        again = shlex.split(whole)
    except ValueError:
        again = []
    if len(again) == len(out):
        return again
    return [arg if arg in whole else REDACTED for arg in out]


def _redacted_words(argv: list[str]) -> list[str]:
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next:
            out.append(REDACTED)
            secret_next = False
            continue
        name, eq, value = arg.partition("=")
        flag = name.lstrip("-")
        if arg.startswith("-") and flag and is_secret_name(flag):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                secret_next = True
            continue
        out.append(redact_value(arg))
    return out


@dataclass
class Outcome:
    exit_code: int | None  # the child's (None when attached to a pid we did not start)
    samples: list[GpuSample] = field(default_factory=list)
    watched: list[int] = field(default_factory=list)  # GPUs judged
    watched_by: str = ""  # how they were chosen
    reader: str | None = None
    reader_problems: list[str] = field(default_factory=list)
    read_errors: int = 0
    timed_out: bool = False
    signals: list[int] = field(default_factory=list)  # signals received (forwarded in command mode)
    duration_s: float = 0.0


class Sampler(threading.Thread):
    """Reads every GPU each `interval` seconds, tags which the watched processes use, writes each reading."""

    def __init__(self, reader: Any, interval: float, writer: SampleWriter | None, status: StatusLine | None,
                 host: str, env: dict[str, str], t0: float) -> None:
        super().__init__(name="rocmcheck-monitor-sampler", daemon=True)
        self.reader, self.interval, self.writer, self.status = reader, interval, writer, status
        self.host, self.env, self.t0 = host, env, t0
        self.root_pid: int | None = None
        self.stop_event = threading.Event()
        self.samples: list[GpuSample] = []
        self.used_gpus: set[int] = set()
        self.seen_gpus: set[int] = set()
        self.read_errors = 0
        self._history: dict[int, list[float]] = {}
        self.visible: set[int] | None = None

    def run(self) -> None:
        # The first reading is taken whatever the stop event says: a command that ends before this thread is
        # first scheduled (a busy machine) still gets one reading of the GPUs it ran on, not none.
        next_at = time.monotonic()
        while True:
            self.tick()
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # a slow reader: skip the missed ticks rather than read back to back
                next_at = time.monotonic()
                delay = 0
            if self.stop_event.wait(delay):
                break

    def tick(self) -> None:
        t = round(time.monotonic() - self.t0, 3)
        try:
            samples, holders = self.reader.read()
        except Exception:  # a reader bug must not end the monitoring of a long run
            self.read_errors += 1
            return
        if self.visible is None and getattr(self.reader, "vendor", None):
            self.visible = procs.visible_gpus(self.env, self.reader.vendor, getattr(self.reader, "uuids", {}))
        pids = procs.descendants(self.root_pid) if self.root_pid else set()
        keep = []
        for s in samples:
            if self.visible is not None and s.gpu not in self.visible:
                continue
            s.t, s.host = t, self.host
            mine = {p: b for p, b in (holders.get(s.gpu) or {}).items() if p in pids}
            if mine:
                self.used_gpus.add(s.gpu)
                known = [b for b in mine.values() if b is not None]
                s.proc_bytes = sum(known) if known else None
            self.seen_gpus.add(s.gpu)
            if s.used_bytes is not None:
                hist = self._history.setdefault(s.gpu, [])
                hist.append(float(s.used_bytes))
                del hist[:-TREND_WINDOW]
            keep.append(s)
        self.samples.extend(keep)
        if self.writer is not None:
            self.writer.write(keep)  # a full disk stops the recording, never this thread
        if self.status is not None:
            shown = {s.gpu: s for s in keep if not self.used_gpus or s.gpu in self.used_gpus}
            try:
                self.status.show(t, status_text(t, shown, self._history))
            except (OSError, ValueError):  # stderr closed or full: the status line is not worth the sampling
                self.status = None

    def watched(self) -> tuple[list[int], str]:
        if self.used_gpus:
            return sorted(self.used_gpus), "the GPUs the command's processes hold memory on"
        if self.visible is not None:
            return sorted(self.visible & self.seen_gpus), "the GPUs *_VISIBLE_DEVICES selects"
        return sorted(self.seen_gpus), "all GPUs (the reader lists no process of the command)"


def _terminal_fd() -> int | None:
    """stdin's fd when it is a terminal and this process group owns it (we may hand it to the child)."""
    try:
        fd = sys.stdin.fileno()
        return fd if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
    except (OSError, ValueError, AttributeError):
        return None


def _give_terminal(fd: int, pgrp: int) -> None:
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may set the foreground only so
    try:
        os.tcsetpgrp(fd, pgrp)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Monitor:
    def __init__(self, reader: Any, *, interval: float = 1.0, out_dir: Path | None = None, host: str | None = None,
                 status: StatusLine | None = None, env: dict[str, str] | None = None,
                 timeout: float | None = None, on_start: Callable[[int], None] | None = None,
                 force: bool = False) -> None:
        self.host = file_host(host or this_host())
        self.t0 = time.monotonic()
        self.writer = SampleWriter(out_dir, self.host, force) if out_dir is not None and reader is not None else None
        self.sampler = Sampler(reader, interval, self.writer, status, self.host, dict(env or os.environ), self.t0) \
            if reader is not None else None
        self.reader, self.status, self.timeout, self.on_start = reader, status, timeout, on_start
        self.outcome = Outcome(exit_code=None, reader=getattr(reader, "name", None))
        self._child_pgid: int | None = None
        self._stop_attached = threading.Event()

    # -- signals --------------------------------------------------------------------------------------------
    def _handler(self, signum: int, frame: Any) -> None:
        self.outcome.signals.append(signum)
        if self._child_pgid is not None:
            try:
                os.killpg(self._child_pgid, signum)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            self._stop_attached.set()

    def _install(self) -> dict[int, Any]:
        old = {}
        for sig in FORWARDED:
            try:
                old[sig] = signal.signal(sig, self._handler)
            except (ValueError, OSError):  # not the main thread (tests drive Monitor from threads too)
                pass
        return old

    @staticmethod
    def _restore(old: dict[int, Any]) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _on_timeout(self) -> None:
        self.outcome.timed_out = True
        for sig, delay in ((signal.SIGTERM, 0.0), (signal.SIGKILL, KILL_GRACE_S)):
            if delay and self._done.wait(delay):
                return
            try:
                os.killpg(self._child_pgid, sig)
            except (ProcessLookupError, PermissionError, TypeError):
                return

    # -- the two ways in ------------------------------------------------------------------------------------
    def run_command(self, argv: list[str]) -> Outcome:
        """Run argv to its end. CannotRun when it does not start."""
        old = self._install()
        kwargs: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        try:
            child = subprocess.Popen(argv, **kwargs)
        except OSError as exc:
            self._restore(old)
            failure = start_failure(argv[0], exc)
            self.outcome.exit_code = failure.exit_code
            raise failure from None
        self._child_pgid = child.pid
        self._done = threading.Event()
        tty = _terminal_fd()
        if tty is not None:
            _give_terminal(tty, child.pid)
        if self.on_start:
            self.on_start(child.pid)
        self._start_sampling(child.pid)
        timer = threading.Timer(self.timeout, self._on_timeout) if self.timeout else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        stop_code = None
        try:
            while True:
                try:
                    _, status = os.waitpid(child.pid, os.WUNTRACED)
                except ChildProcessError:
                    status = 0
                    break
                if not os.WIFSTOPPED(status):
                    break
                stop_code = self._stopped(child.pid, os.WSTOPSIG(status), tty)
        finally:
            self._done.set()
            if timer is not None:
                timer.cancel()
            if tty is not None:
                _give_terminal(tty, os.getpgrp())
            self._stop_sampling()
            self._restore(old)
        code = _exit_code(status)
        child.returncode = code if not os.WIFSIGNALED(status) else -os.WTERMSIG(status)
        ended_stopped = stop_code is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        self.outcome.exit_code = EXIT_TIMEOUT if self.outcome.timed_out else stop_code if ended_stopped else code
        return self.outcome

    def _stopped(self, pid: int, signum: int, tty: int | None) -> int | None:
        """The command's process stopped. On a terminal: stop with it (the shell holds the job) and continue it when
        continued; None. Else wait STOP_GRACE_S for something to continue it, then end its group: 128 + signum."""
        if tty is not None:
            _give_terminal(tty, os.getpgrp())
            os.kill(os.getpid(), signal.SIGSTOP)  # returns once the shell continues this job
            _give_terminal(tty, pid)
            try:
                os.killpg(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
            return None
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        print(f"rocmcheck monitor: the command stopped ({name}) and no terminal can continue it; it is ended in "
              f"{STOP_GRACE_S:.0f} s unless something continues it (kill -CONT -{pid})", file=sys.stderr, flush=True)
        for _ in range(int(STOP_GRACE_S / STOP_POLL_S)):  # polls, not a deadline: time this process was stopped
            if not procs.is_stopped(pid):               # (a suspended job) does not count
                return None
            time.sleep(STOP_POLL_S)
        print(f"rocmcheck monitor: the command is still stopped after {STOP_GRACE_S:.0f} s: ending it",
              file=sys.stderr, flush=True)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return 128 + signum

    def attach(self, pid: int, poll_s: float = 0.2) -> Outcome:
        started = procs.start_time(pid)
        old = self._install()
        self._start_sampling(pid)
        deadline = time.monotonic() + self.timeout if self.timeout else None
        try:
            while procs.is_running(pid, started) and not self._stop_attached.wait(poll_s):
                if deadline is not None and time.monotonic() >= deadline:
                    self.outcome.timed_out = True
                    break
        finally:
            self._stop_sampling()
            self._restore(old)
        return self.outcome

    def _start_sampling(self, root_pid: int) -> None:
        if self.sampler is not None:
            self.sampler.root_pid = root_pid
            self.sampler.start()

    def _stop_sampling(self) -> None:
        self.outcome.duration_s = round(time.monotonic() - self.t0, 3)
        if self.sampler is None:
            return
        self.sampler.stop_event.set()
        self.sampler.join(timeout=30)
        if self.status is not None:
            self.status.clear()
        if self.writer is not None:
            self.writer.close()
        self.outcome.samples = list(self.sampler.samples)
        self.outcome.watched, self.outcome.watched_by = self.sampler.watched()
        self.outcome.read_errors = self.sampler.read_errors


def curves(samples: list[GpuSample], watched: list[int] | None = None) -> dict[str, CurveVerdict]:
    """One verdict per (host, GPU) among `watched` (all when None), capacity = the GPU's reported total."""
    series: dict[str, list[GpuSample]] = {}
    for s in samples:
        if watched is None or s.gpu in watched:
            series.setdefault(f"{s.host}:{s.gpu}" if s.host else str(s.gpu), []).append(s)
    hosts = {s.host for s in samples}
    out = {}
    for key, rows in sorted(series.items()):
        rows.sort(key=lambda s: s.t)
        totals = [s.total_bytes for s in rows if s.total_bytes]
        label = key.split(":", 1)[1] if len(hosts) == 1 and ":" in key else key
        out[label] = classify_curve([s.t for s in rows], [s.used_bytes for s in rows], max(totals) if totals else None,
                                    [s.util_pct for s in rows])
    return out
