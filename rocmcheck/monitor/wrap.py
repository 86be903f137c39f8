"""Run a person's command unchanged (or attach to a running pid) and sample its GPUs until it ends.

The command runs as a direct child with the monitor's own stdin, stdout and stderr: its output reaches the
terminal or pipe byte for byte, and the monitor writes only to stderr and its files. The child gets its own
process group, so a signal meant for the job reaches every process a launcher started:

- SIGINT, SIGTERM and SIGHUP sent to the monitor are forwarded to the child's process group.
- On a terminal, the child's group is made the terminal's foreground group while it runs, so Ctrl-C reaches it
  straight from the terminal (as without the monitor) and a program that reads the terminal (a debugger, a
  login prompt) is not stopped for reading from the background. The monitor takes the terminal back at the end.
- The exit code is the child's; 128+N when a signal N killed it; 124 when --timeout ended it (as coreutils
  `timeout`); 127 / 126 when the command is not found / not executable (as a shell).

Sampling runs on a thread of the monitor process at the interval asked for: the training process is never
paused or instrumented, it only shares the machine with one reader.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocmcheck.monitor import procs
from rocmcheck.monitor.curve import CurveVerdict, classify_curve
from rocmcheck.monitor.output import SampleWriter, StatusLine, status_text
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
        next_at = time.monotonic()
        while not self.stop_event.is_set():
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
            self.writer.write(keep)
        if self.status is not None:
            shown = {s.gpu: s for s in keep if not self.used_gpus or s.gpu in self.used_gpus}
            self.status.show(t, status_text(t, shown, self._history))

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
                 timeout: float | None = None, on_start: Callable[[int], None] | None = None) -> None:
        self.host = host or socket.gethostname().split(".")[0] or "host"
        self.t0 = time.monotonic()
        self.writer = SampleWriter(out_dir, self.host) if out_dir is not None and reader is not None else None
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
        old = self._install()
        kwargs: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        try:
            child = subprocess.Popen(argv, **kwargs)
        except FileNotFoundError:
            self._restore(old)
            self.outcome.exit_code = EXIT_NOT_FOUND
            raise
        except PermissionError:
            self._restore(old)
            self.outcome.exit_code = EXIT_NOT_EXECUTABLE
            raise
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
        try:
            while True:
                try:
                    _, status = os.waitpid(child.pid, 0)
                    break
                except ChildProcessError:
                    status = 0
                    break
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
        self.outcome.exit_code = EXIT_TIMEOUT if self.outcome.timed_out else code
        return self.outcome

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
        out[label] = classify_curve([s.t for s in rows], [s.used_bytes for s in rows], max(totals) if totals else None)
    return out
