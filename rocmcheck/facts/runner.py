"""The one way rocmcheck runs an external command: argv list, no shell, a timeout, never raises."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

# Output kept per stream: enough for any real rocminfo (8 GPUs ~ 60 KB), bounded against garbage.
MAX_OUTPUT_CHARS = 2_000_000


@dataclass
class CommandResult:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CommandResult":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    return data[:MAX_OUTPUT_CHARS]


def run_command(
    argv: Sequence[str],
    timeout: float,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    cwd: str | None = None,
) -> CommandResult:
    """Run argv with a timeout. Every failure mode comes back as a CommandResult, never an exception."""
    argv = [str(a) for a in argv]
    result = CommandResult(argv=argv, timeout_s=timeout)
    if not argv:
        result.error = "empty command"
        return result
    exe = argv[0]
    if os.sep not in exe and shutil.which(exe, path=(env or os.environ).get("PATH")) is None:
        result.not_found = True
        return result
    start = time.monotonic()
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
    try:
        out, err = proc.communicate(input=input_text.encode() if input_text is not None else None, timeout=timeout)
        result.returncode = proc.returncode
    except subprocess.TimeoutExpired:
        result.timed_out = True
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
    result.stdout, result.stderr = _decode(out), _decode(err)
    result.duration_s = round(time.monotonic() - start, 3)
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
