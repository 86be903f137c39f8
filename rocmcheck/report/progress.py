"""The one progress display: what a person sees while a command waits. On a terminal one live status line (a
spinner, what runs now, for how long, a counter and the time left); where the terminal cannot redraw a line (a
pipe, CI, Slurm, `| tee`, TERM=dumb) plain lines: one per stage, a line every HEARTBEAT_S while a stage lasts
(with its count and time left when it has them), and a few lines of a counted stage, so a log shows where a run
is. doctor, lint, probe, plan --measure, smoke-train and monitor all show their progress here.

    with Progress(con, plain_after_s=2.0) as progress:
        progress.begin("importing torch", limit_s=45)  # ends the previous stage; limit_s: its bound, when known
        progress.note("step 10/50 loss 2.31")   # the live line's detail (plain mode: printed)
        progress.count(12, 120, "loss 2.31")    # a counted stage: 12 of 120, and the time left at its pace so far
        progress.say("no GPU: the fine-tune runs on the CPU")  # a line of its own, above the live line
        progress.show("GPU0 41.2G/192G")        # the whole line, formatted by the caller (monitor)

`plain_after_s`: in plain mode print a stage only once it has lasted that long (a quick lint stays silent); the
doctor prints every stage at once (0). `plain_every_s`: in plain mode print a note or a shown line at most once per
that many seconds (the monitor reads every second and logs every 30 s).

Control codes and data travel apart: the console is rocmcheck's safe console (rocmcheck/safe/text.py), which
cleans every segment of text (a GPU name, a loss, a path) and writes rich's own cursor and erase codes to the
real stream, below the sanitising wrapper that would strip them, so the live line redraws in place and nothing
from the data can move the cursor.

The live line is gone on every way out: `end` (the `with` block's exit, an exception included) erases it, and a
stop signal's handler, which leaves with os._exit, calls `clear_live_lines` first (rocmcheck/cli.py).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import IO, Any

from rich.console import Console
from rich.spinner import Spinner
from rich.text import Text

from rocmcheck.report.render import clean
from rocmcheck.safe.text import raw_stream, safe_console

# Plain mode: a line once this long without output, so a log shows life and where the stage is at least every
# 10 s (a counted stage's line carries its count and the time left; any other stage's says how long it has run).
HEARTBEAT_S = 5.0
# Plain mode: a counted stage (smoke-train's steps) prints its first and last count, one every LOG_LINES-th of the
# way, and one whenever HEARTBEAT_S passed without a line.
LOG_LINES = 10
BAR_WIDTH = 20  # characters of the live line's counter bar
# Environment variables that name a CI runner, whose log shows a redrawn line as a pile of control codes.
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "JENKINS_URL", "BUILDKITE", "TF_BUILD")
# A stop signal's handler waits at most this long for a redraw in progress before it erases the line.
CLEAR_WAIT_S = 0.5

_LIVE: list["Progress"] = []  # the displays whose live line is on the screen now (clear_live_lines)
_OPEN: list["Progress"] = []  # every display entered and not ended: silenced by clear_live_lines


def can_redraw(con: Console, environ: dict[str, str] | None = None) -> bool:
    """Whether `con` can redraw a line in place: a terminal that is not TERM=dumb (rich draws nothing live there,
    so nothing would show for the whole stage), outside CI."""
    env = os.environ if environ is None else environ
    return con.is_terminal and not con.is_dumb_terminal and not any(env.get(v) for v in CI_VARIABLES)


def duration(seconds: float) -> str:
    """A time left as a person reads it: "8 s", "2 min 5 s", "1 h 4 min"."""
    s = max(0, math.ceil(seconds))
    if s < 90:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class _Line:
    """The live renderable: re-reads the stage, its clock, counter and detail at each refresh."""

    def __init__(self, progress: "Progress") -> None:
        self.progress = progress
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> Any:
        p = self.progress
        with p._lock:
            stage, detail, whole, counter = p.stage, p.detail, p.whole, p.counter
            since, limit = p.stage_start, p.limit_s
        left = p.time_left()
        if whole:
            text = Text(clean(whole), no_wrap=True, overflow="ellipsis")
        else:
            text = Text(no_wrap=True, overflow="ellipsis").append(clean(stage), style="bold")
            if counter is not None:
                done, total = counter
                filled = round(BAR_WIDTH * min(done, total) / total) if total > 0 else 0
                text.append(f"  {done}/{total} ").append("━" * filled, style="cyan")
                text.append("━" * (BAR_WIDTH - filled), style="dim")
            text.append(f"  {time.monotonic() - since:4.0f} s", style="dim")
            if left is not None:
                text.append(f", ~{duration(left)} left", style="dim")
            elif limit and counter is None:
                text.append(f" of at most {duration(limit)}", style="dim")
            if detail:
                text.append("  " + clean(detail), style="dim")
        self.spinner.text = text
        return self.spinner


class Progress:
    def __init__(self, con: Console, *, live: bool | None = None, plain: bool = True, plain_after_s: float = 0.0,
                 prefix: str = "", plain_every_s: float = 0.0) -> None:
        """live: None = when `con` can redraw a line (can_redraw). plain: print stage lines when not live (False:
        silent)."""
        self.console = con
        self.live_mode = can_redraw(con) if live is None else live
        self.plain = plain and not self.live_mode
        self.plain_after_s = plain_after_s
        self.plain_every_s = plain_every_s
        self.prefix = prefix
        self.start = self.stage_start = time.monotonic()
        self.stage = ""
        self.detail = ""
        self.whole = ""  # show(): the caller's own line, in place of stage + clock + detail
        self.counter: tuple[int, int] | None = None
        self.limit_s: float | None = None  # the running stage's own bound (a stage without a count says it)
        self._first_count: tuple[float, int] | None = None  # (when, done) at the stage's first count: its pace
        self._live = None
        self._lock = threading.Lock()
        self._last_output = self.start
        self._last_note = -1e18  # plain_every_s: when a note or shown line was last printed
        self._timer: threading.Timer | None = None
        self._silenced = False  # clear_live_lines: nothing more is printed (a process on its way out)

    # ---- context -----------------------------------------------------------------------------
    def __enter__(self) -> "Progress":
        _OPEN.append(self)
        if self.live_mode:
            from rich.live import Live

            self._live = Live(_Line(self), console=self.console, refresh_per_second=8, transient=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    # ---- stages ------------------------------------------------------------------------------
    def begin(self, stage: str, limit_s: float | None = None) -> None:
        """A new stage starts (the previous one ends). limit_s: the longest it may take (its timeout or deadline),
        shown beside its clock while it has no count to give a time left."""
        self._stop_timer()
        with self._lock:
            self.stage, self.detail, self.whole, self.counter = stage, "", "", None
            self.limit_s = limit_s
            self._first_count = None
            self.stage_start = time.monotonic()
        if self._start_live():
            return
        if self.plain:
            if self.plain_after_s <= 0:
                self._plain_line()
            else:
                self._timer = threading.Timer(self.plain_after_s, self._plain_line)
                self._timer.daemon = True
                self._timer.start()

    def note(self, detail: str) -> None:
        """A detail of the running stage: on the live line, or (plain mode) as its own line."""
        with self._lock:
            self.detail = detail
        if self._live is None and self.plain and self.stage and self._note_due():
            self._plain_line(detail)

    def count(self, done: int, total: int, detail: str = "") -> None:
        """The running stage has done `done` of `total` (smoke-train's steps): a counter, a bar and the time left
        (at the pace since the stage's first count) on the live line; in plain mode a line for the first, the last
        and every LOG_LINES-th of the way, and one whenever HEARTBEAT_S passed without a line."""
        now = time.monotonic()
        with self._lock:
            self.counter, self.detail = (done, total), detail
            if self._first_count is None:
                self._first_count = (now, done)
        if self._live is not None or not (self.plain and self.stage):
            return
        every = max(1, total // LOG_LINES)
        if done == 1 or done == total or done % every == 0 or now - self._last_output >= HEARTBEAT_S:
            self._plain_line(self._count_text())

    def time_left(self) -> float | None:
        """Seconds the counted stage still needs at its pace since its first count; None before two counts and
        once it is done."""
        with self._lock:
            counter, first = self.counter, self._first_count
        if counter is None or first is None or counter[0] <= first[1] or counter[0] >= counter[1]:
            return None
        done, total = counter
        per = (time.monotonic() - first[0]) / (done - first[1])
        return max(0, total - done) * per

    def say(self, text: str) -> None:
        """A line of its own (what the stage is about to do), printed above the live line, or as it is in plain
        mode; shown when anything of the display is."""
        if self._live is None and not self.plain:
            return
        self._print(text)

    def _count_text(self) -> str:
        with self._lock:
            counter, detail = self.counter, self.detail
        if counter is None:
            return ""
        left = self.time_left()
        return (f"{counter[0]}/{counter[1]}" + (f"  {detail}" if detail else "")
                + (f"  ~{duration(left)} left" if left is not None else ""))

    def show(self, text: str) -> None:
        """The whole line as the caller formats it (a monitor's readings, with their own clock): redrawn in place
        on a terminal; in plain mode printed as it is, at most once per plain_every_s."""
        self._stop_timer()
        with self._lock:
            self.whole = text
        if self._start_live() or not self.plain or not self._note_due():
            return
        self._print(text)

    def end(self) -> None:
        self._stop_timer()
        if self._live is not None and self._live.is_started:
            self._live.stop()  # first: its last frame is still the line, which a transient display then erases
        for shown in (_LIVE, _OPEN):
            if self in shown:
                shown.remove(self)
        with self._lock:
            self.stage, self.detail, self.whole, self.counter = "", "", "", None
            self._first_count = None

    def abandon(self, wait_s: float = CLEAR_WAIT_S) -> None:
        """Erase the live line for a process about to leave with os._exit (a stop signal's handler), which runs no
        `finally`: the redraw thread is held off for good (its lock taken, waiting at most wait_s for a redraw in
        progress), rich gives stdout and stderr back, and the line is erased and the cursor shown with a direct
        write, which takes no lock the interrupted thread might hold."""
        self._stop_timer()
        live = self._live
        if live is None or not live.is_started:
            return
        lock = getattr(live, "_lock", None)
        if lock is not None:
            lock.acquire(timeout=wait_s)  # an RLock: the main thread may hold it already; never released
        give_back = getattr(live, "_disable_redirect_io", None)
        if give_back is not None:
            give_back()
        erase = "\r\x1b[2K\x1b[?25h"  # to the line's start, erase it, show the cursor (rich hid it)
        try:
            os.write(self.console.file.fileno(), erase.encode())
        except (OSError, ValueError, AttributeError):
            try:
                self.console.file.write(erase)
                self.console.file.flush()
            except (OSError, ValueError, RuntimeError):
                pass

    def printed(self) -> None:
        """The caller printed something (a verdict): the heartbeat counts from now."""
        self._last_output = time.monotonic()

    # ---- live mode ---------------------------------------------------------------------------
    def _start_live(self) -> bool:
        """True in live mode (the line is drawn, and redrawn by rich's refresh thread)."""
        if self._live is None:
            return False
        if not self._live.is_started:
            self._live.start()
            _LIVE.append(self)
        return True

    # ---- plain mode --------------------------------------------------------------------------
    def _note_due(self) -> bool:
        if self.plain_every_s <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            if now - self._last_note < self.plain_every_s:
                return False
            self._last_note = now
        return True

    def _print(self, text: str) -> None:
        if self._silenced:
            return
        self.console.print(clean(text), markup=False, highlight=False, soft_wrap=True)
        self.console.file.flush()
        self._last_output = time.monotonic()

    def _plain_line(self, detail: str | None = None) -> None:
        with self._lock:
            if not self.stage:
                return
            at = time.monotonic() - self.start
            text = f"{self.prefix}[{at:6.1f} s] {self.stage}" + (f": {detail}" if detail else " ...")
        self._print(text)
        if detail is None:
            self._schedule_heartbeat()

    def _schedule_heartbeat(self) -> None:
        """The next look HEARTBEAT_S after the last line printed, so no gap grows past it by much."""
        self._stop_timer()
        delay = max(0.5, HEARTBEAT_S - (time.monotonic() - self._last_output))
        self._timer = threading.Timer(delay, self._heartbeat)
        self._timer.daemon = True
        self._timer.start()

    def _heartbeat(self) -> None:
        with self._lock:
            stage, since, limit = self.stage, time.monotonic() - self.stage_start, self.limit_s
        if not stage or self._silenced:
            return
        if time.monotonic() - self._last_output >= HEARTBEAT_S - 0.5:
            counted = self._count_text()
            at = time.monotonic() - self.start
            bound = f", at most {duration(limit)}" if limit else ""
            self._print(f"{self.prefix}[{at:6.1f} s] {stage}: " + (counted or f"still running ({since:.0f} s{bound})"))
        self._schedule_heartbeat()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def clear_live_lines(wait_s: float = CLEAR_WAIT_S) -> None:
    """Erase every live line on the screen now: what a stop signal's handler calls before its last word, so the
    terminal's last line is that word, then the shell's prompt, and no spinner redrawn below them."""
    for progress in list(_OPEN):  # a plain display's heartbeat must not print after the last word either
        progress._silenced = True
        progress._stop_timer()
    for progress in list(_LIVE):
        progress.abandon(wait_s)
    _LIVE.clear()
    _OPEN.clear()


def stream_console(stream: IO[str] | None = None) -> Console:
    """The safe console on `stream` (default: stderr), below any sanitising wrapper (safe/text.py)."""
    return safe_console(file=raw_stream(stream if stream is not None else sys.stderr))


class StatusLine:
    """The monitor's status line on the one display: `show(t, text)` at every reading, `clear()` at the end. On a
    terminal the line is redrawn in place; elsewhere a plain line every `every` seconds (the first one at once)."""

    def __init__(self, stream: IO[str] | None = None, every: float = 30.0) -> None:
        self.progress = Progress(stream_console(stream), plain_every_s=every)
        self.progress.__enter__()

    def show(self, t: float, text: str) -> None:  # noqa: ARG002 - the text carries its own clock
        self.progress.show(text)

    def clear(self) -> None:
        self.progress.end()
