"""The one way rocmcheck runs an external command: argv list, no shell, a timeout, never raises."""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Callable, Sequence

from rocmcheck.record import Record

# Output kept per stream: enough for any real rocminfo (8 GPUs ~ 60 KB), bounded against garbage.
MAX_OUTPUT_CHARS = 2_000_000


@dataclass
class CommandResult(Record):
    argv: list[str]
    returncode: int | None = None  # None: it never ran to completion (missing, timed out, failed to start)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    not_found: bool = False
    error: str | None = None  # why it could not be run at all
    duration_s: float = 0.0
    timeout_s: float | None = None

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


# Process groups started here and still running: a signal handler (cli.main) ends them all on the way out,
# so Ctrl-C or SIGTERM never leaves a hung tool, a probe child or a training rank behind.
_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set on the way out: no new command starts after the last kill
READ_CHUNK = 1 << 16


class _CappedReader(threading.Thread):
    """Drains one pipe to its end, keeping at most `cap` bytes; the rest is counted and dropped, so a tool
    that prints forever costs a bounded amount of memory. With on_line, each complete line (also bounded)
    is handed over as soon as it arrives."""

    def __init__(self, pipe: IO[bytes], cap: int, on_line: Callable[[str], None] | None = None) -> None:
        super().__init__(daemon=True)
        self.pipe, self.cap, self.on_line = pipe, cap, on_line
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
    input_text: str | None = None,
    cwd: str | None = None,
    on_stdout_line: Callable[[str], None] | None = None,
    stdout_cap: int = MAX_OUTPUT_CHARS,
) -> CommandResult:
    """Run argv with a timeout. Every failure mode comes back as a CommandResult, never an exception.

    Output is read while the command runs and capped per stream (stdout_cap bytes; the rest is dropped and
    counted). on_stdout_line, when given, receives each stdout line as it arrives, from a reader thread."""
    argv = [str(a) for a in argv]
    result = CommandResult(argv=argv, timeout_s=timeout)
    if not argv:
        result.error = "empty command"
        return result
    if not (timeout > 0 and math.isfinite(timeout)):
        result.error = f"timeout must be a positive number of seconds, not {timeout!r}"
        return result
    exe = argv[0]
    if os.sep not in exe and shutil.which(exe, path=(env or os.environ).get("PATH")) is None:
        result.not_found = True
        return result
    start = time.monotonic()
    if _STOPPING.is_set():
        result.error = "rocmcheck is shutting down"
        return result
    try:
        # start_new_session: on timeout we kill the whole process group, so a tool that forks
        # helpers (rocminfo -> hsa runtime threads, wrappers) cannot keep the pipes open.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError:
        result.not_found = True
        return result
    except OSError as exc:  # permission denied, exec format error, ...
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    with _LIVE_LOCK:
        _LIVE_GROUPS.add(proc.pid)
    if _STOPPING.is_set():  # the stop came while it was starting
        _kill_group(proc.pid)
    readers = [_CappedReader(proc.stdout, stdout_cap, on_stdout_line),  # type: ignore[arg-type]
               _CappedReader(proc.stderr, MAX_OUTPUT_CHARS)]  # type: ignore[arg-type]
    for reader in readers:
        reader.start()
    try:
        if input_text is not None:
            _feed(proc, input_text)
        try:
            result.returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            _kill_group(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        # The direct child is gone; a grandchild that kept the pipes open must not hold us either.
        for reader in readers:
            reader.join(timeout=2 if not result.timed_out else 1)
        if any(reader.is_alive() for reader in readers):
            _kill_group(proc.pid)
            for reader in readers:
                reader.join(timeout=2)
    finally:
        if proc.poll() is None:  # interrupted (KeyboardInterrupt) while waiting: leave nothing running
            _kill_group(proc.pid)
        with _LIVE_LOCK:
            _LIVE_GROUPS.discard(proc.pid)
        for pipe in (proc.stdout, proc.stderr, proc.stdin):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
    result.stdout, result.stderr = readers[0].text(), readers[1].text()
    result.duration_s = round(time.monotonic() - start, 3)
    return result


def _feed(proc: subprocess.Popen, text: str) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the command did not read its input: its exit says the rest


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_live_children() -> None:
    """End every process group this process started and has not reaped yet (from a signal handler), and
    start no new ones."""
    _STOPPING.set()
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
    for pgid in groups:
        _kill_group(pgid)
