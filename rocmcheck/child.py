"""The one way a rocmcheck process asks a Python child for an answer, and the one way the child gives it.

Anything that imports torch, flash_attn or DeepSpeed, or touches a GPU, runs in a child: a segfault in HIP
init, a hung driver or a library that prints to stdout must not take the parent down or corrupt its answer.

Parent side: `run_child(module, request, timeout_s)` starts `python -m module --request-file FILE` through the
one command runner (own process group, timeout, capped output, killed on Ctrl-C), with this package on
PYTHONPATH, and reads the child's stdout as JSON lines, one event object per line, as they arrive
(`on_event` sees each one at once: progress). Anything else on stdout is kept as a bad line, never raised.
The request travels in a file only this user can read (a folder of mode 0700), never on the command line:
/proc/PID/cmdline is readable by every user, and a request may hold a config with a key in it.

Child side: `open_channel()` keeps the real stdout for events and points file descriptor 1 (Python and C
prints alike) at stderr, so library chatter cannot break the protocol; `channel.emit("kind", **fields)`
writes one event. `read_request()` parses the request. `watchdog(seconds)` dumps the stuck Python stack to
stderr and exits when a step outlives its limit (a C thread: it fires even when a kernel holds the GIL).

A child can be started ahead of its turn and held: it imports and sets up what it can, then waits for the
parent's word on its stdin (`wait_for_word`), one JSON object sent when the parent decides: {"go": true, ...} runs
it, with what the parent adds (the training device); stdin closed without a word, or no word within the child's
wait, lets it leave without running. The parent holds a `Word` and passes it to `run_child`; it says it once.

Every event is an object with an "event" key; what each kind carries is the business of the module that
speaks it (the GPU probes' events are described in probes/protocol.py).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import select
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Sequence, TextIO

from rocmcheck.runner import CommandResult, run_command
from rocmcheck.safe.scratch_folders import scratch_folder

PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
MAX_EVENT_CHARS = 4_000_000  # one event line; a whole training report is ~100 KB
MAX_REQUEST_BYTES = 64 << 20  # a request holds at most a config or two (the lint child's is the largest)
# A child never reaches the network: models are local, and a hub lookup on a machine without egress hangs.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
               "TOKENIZERS_PARALLELISM": "false"}


# ---------------------------------------------------------------- parent side

@dataclass
class ChildRun:
    """What a child said (its events, in order) and how it ended (the runner's CommandResult)."""

    command: CommandResult
    events: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)  # stdout lines that were not event objects

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    def last(self, kind: str) -> dict[str, Any] | None:
        found = self.of(kind)
        return found[-1] if found else None

    def stderr_tail(self, n: int = 5) -> list[str]:
        return [line for line in self.command.stderr.strip().splitlines() if line.strip()][-n:]

    @property
    def watchdog_fired(self) -> bool:
        """faulthandler's watchdog prints "Timeout (h:mm:ss)!" before it ends the child."""
        return any(line.startswith("Timeout (") for line in self.command.stderr.splitlines())

    @property
    def hung(self) -> bool:
        return self.command.timed_out or self.watchdog_fired


def parse_event(line: str) -> dict[str, Any] | None:
    """One stdout line -> its event, or None when the line is not an event object. Never raises."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None


def parse_events(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """All of a child's stdout -> (events, the other non-empty lines). Never raises."""
    events, bad = [], []
    for line in text.splitlines():
        event = parse_event(line)
        if event is not None:
            events.append(event)
        elif line.strip():
            bad.append(line.strip()[:300])
    return events, bad


def child_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment with this very rocmcheck first on PYTHONPATH (installed or a checkout, from
    any working directory) and the Hugging Face libraries kept offline (unless the caller set otherwise)."""
    env = dict(os.environ if base is None else base)
    for key, value in OFFLINE_ENV.items():
        env.setdefault(key, value)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra or {})
    return env


def child_argv(module: str, request_file: str, *, python: str | None = None,
               launcher: Sequence[str] = ()) -> list[str]:
    """`python -m module --request-file FILE`, or under a launcher (`python -m torch.distributed.run ...`)
    that runs `module` itself, one process per rank (each reads the same file)."""
    tail = ["--request-file", request_file]
    if launcher:
        return [*launcher, "-m", module, *tail]
    return [python or sys.executable, "-m", module, *tail]


@contextlib.contextmanager
def request_file(request: dict[str, Any] | None) -> Iterator[str]:
    """The request as a file only this user can read (in a scratch folder, rocmcheck/safe/scratch_folders.py),
    removed afterwards."""
    with scratch_folder("request") as folder:  # mode 0700
        path = os.path.join(folder, "request.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(request or {}, fh)
        yield path


class Word:
    """The parent's one word to a child started ahead (run_child's `word`): go(**fields) runs it, stop() lets it
    leave. The first one said counts; a later one changes nothing, so a caller stops it on every way out."""

    def __init__(self) -> None:
        self._said = threading.Event()
        self._text = ""
        self.go_at: float | None = None  # time.monotonic() when go was said

    @property
    def said(self) -> bool:
        return self._said.is_set()

    def go(self, **fields: Any) -> None:
        if not self._said.is_set():
            self._text = json.dumps({"go": True, **fields}) + "\n"
            self.go_at = time.monotonic()
            self._said.set()

    def stop(self) -> None:
        if not self._said.is_set():
            self._said.set()

    def text(self, wait_s: float) -> str | None:
        """What to write on the child's stdin ("" for stop), or None when nothing was said within wait_s."""
        return self._text if self._said.wait(wait_s) else None


def run_child(module: str, request: dict[str, Any] | None, timeout_s: float, *,
              env: dict[str, str] | None = None, python: str | None = None, launcher: Sequence[str] = (),
              on_event: Callable[[dict[str, Any]], None] | None = None, cwd: str | None = None,
              word: Word | None = None) -> ChildRun:
    """Run a child to its end (or its timeout) and collect its events. Never raises. word: the parent's word for a
    child that waits for one (wait_for_word), written on its stdin when said."""
    run = ChildRun(CommandResult(argv=[]))

    def take(line: str) -> None:
        event = parse_event(line)
        if event is None:
            if line.strip():
                run.bad_lines.append(line.strip()[:300])
            return
        run.events.append(event)
        if on_event is not None:
            on_event(event)

    with request_file(request) as path:
        argv = child_argv(module, path, python=python, launcher=launcher)
        run.command = run_command(argv, timeout=timeout_s, env=env if env is not None else child_env(), cwd=cwd,
                                  on_stdout_line=take, stdout_cap=MAX_EVENT_CHARS,
                                  input_text=word.text if word is not None else None)
    return run


# ---------------------------------------------------------------- child side

class Channel:
    """The child's end: events go to the real stdout, one JSON object per line; everything else printed
    (Python or C) goes to stderr."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def emit(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"event": kind, **fields}, default=str, allow_nan=True)
        self._out.write(line + "\n")
        self._out.flush()


def stdout_to_stderr() -> int:
    """Point file descriptor 1 (Python and C prints alike) at stderr; return a new descriptor on the real
    stdout, for the one thing that must reach it (a child's events, a command's --json document)."""
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    return real_stdout


def restore_stdout(real_stdout: int) -> None:
    """Undo stdout_to_stderr: fd 1 is the real stdout again (the descriptor it returned is closed)."""
    sys.stdout.flush()
    os.dup2(real_stdout, 1)
    os.close(real_stdout)


def open_channel() -> Channel:
    """Claim stdout for the protocol: keep a private copy of fd 1, then point fd 1 at stderr."""
    protocol_fd = stdout_to_stderr()
    faulthandler.enable()  # a segfault prints the Python stack to stderr before the process dies
    return Channel(os.fdopen(protocol_fd, "w", buffering=1, encoding="utf-8"))


def read_request(argv: Sequence[str] | None = None, prog: str | None = None) -> dict[str, Any]:
    """The request a parent passed (--request-file FILE), or one given by hand (--request JSON), a JSON
    object. A bad one ends the child with exit 2."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--request", default=None, help="the request, a JSON object (by hand)")
    parser.add_argument("--request-file", default=None, help="a file holding the request (how a parent passes it)")
    args = parser.parse_args(argv)
    text, flag = args.request or "{}", "--request"
    if args.request_file is not None:
        flag = "--request-file"
        try:
            with open(args.request_file, "rb") as fh:
                data = fh.read(MAX_REQUEST_BYTES + 1)
        except OSError as exc:
            parser.error(f"--request-file {args.request_file}: {exc.strerror or exc}")
        if len(data) > MAX_REQUEST_BYTES:
            parser.error(f"--request-file {args.request_file}: larger than {MAX_REQUEST_BYTES} bytes")
        text = data.decode("utf-8", errors="replace")
    try:
        request = json.loads(text)
    except (ValueError, RecursionError) as exc:
        parser.error(f"{flag} is not JSON: {exc}")
    if not isinstance(request, dict):
        parser.error(f"{flag} must be a JSON object")
    return request


def wait_for_word(wait_s: float) -> dict[str, Any] | None:
    """The child's side of a Word: the object the parent sent on stdin when it said go; None when it said stop (its
    stdin ended without a word), sent something else, or said nothing within wait_s."""
    deadline = time.monotonic() + max(0.0, wait_s)
    data = b""
    while b"\n" not in data and len(data) <= MAX_REQUEST_BYTES:
        left = deadline - time.monotonic()
        try:
            ready, _, _ = select.select([0], [], [], max(0.0, left))
        except (OSError, ValueError):
            return None
        if not ready:
            return None
        try:
            chunk = os.read(0, 65536)
        except OSError:
            return None
        if not chunk:
            break
        data += chunk
    try:
        word = json.loads(data.split(b"\n", 1)[0] or b"null")
    except (ValueError, RecursionError):
        return None
    return word if isinstance(word, dict) and word.get("go") is True else None


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Past `seconds`, dump every thread's stack to stderr and end the child (the parent blames the step)."""
    faulthandler.dump_traceback_later(max(0.1, float(seconds)), exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def leave(code: int | str | None) -> NoReturn:
    """End this process with `code` once its work is done. After torch was imported, the interpreter's own
    teardown (freeing every module and object of torch and transformers, one by one) takes most of a second or
    more (benchmarks/RESULTS.md, sections 17 and 18). So then the non-daemon
    threads are joined, the atexit handlers run and the streams are flushed, as at a normal exit, and the process
    ends without that teardown. A message (sys.exit("...")) takes the interpreter's own way out, which prints it.
    Every child's `__main__` and the CLI end this way."""
    if "torch" not in sys.modules or not (code is None or isinstance(code, int)):
        sys.exit(code)
    import atexit
    import threading

    for thread in threading.enumerate():  # as the interpreter would: wait for the non-daemon threads
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream
            pass
    os._exit(code or 0)

