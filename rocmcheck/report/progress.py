"""What a person sees while a command waits: on a terminal one live status line (a spinner, what runs now, for
how long); elsewhere (a pipe, CI, Slurm, `| tee`) one plain line per stage, and a line every HEARTBEAT_S while a
stage lasts, so a log shows where a run is.

    with Progress(con, plain_after_s=2.0) as progress:
        progress.begin("importing torch")   # ends the previous stage
        ...
        progress.note("step 10/50 loss 2.31")  # the live line's detail (plain mode: printed)

`plain_after_s`: in plain mode print a stage only once it has lasted that long (a quick lint stays silent);
the doctor prints every stage at once (0).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.spinner import Spinner
from rich.text import Text

from rocmcheck.report.render import clean

HEARTBEAT_S = 30.0  # plain mode: "still running" once this long without output (CI logs show life)


class _Line:
    """The live renderable: re-reads the stage and its clock each refresh."""

    def __init__(self, progress: "Progress") -> None:
        self.progress = progress
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> Any:
        p = self.progress
        elapsed = time.monotonic() - p.stage_start
        text = Text(clean(p.stage), style="bold").append(f"  {elapsed:4.0f} s", style="dim")
        if p.detail:
            text.append("  " + clean(p.detail), style="dim")
        self.spinner.text = text
        return self.spinner


class Progress:
    def __init__(self, con: Console, *, live: bool | None = None, plain: bool = True, plain_after_s: float = 0.0,
                 prefix: str = "") -> None:
        """live: None = when `con` is a terminal. plain: print stage lines when not live (False: silent)."""
        self.console = con
        self.live_mode = con.is_terminal if live is None else live
        self.plain = plain and not self.live_mode
        self.plain_after_s = plain_after_s
        self.prefix = prefix
        self.start = self.stage_start = time.monotonic()
        self.stage = ""
        self.detail = ""
        self._live = None
        self._lock = threading.Lock()
        self._last_output = self.start
        self._timer: threading.Timer | None = None

    # ---- context -----------------------------------------------------------------------------
    def __enter__(self) -> "Progress":
        if self.live_mode:
            from rich.live import Live

            self._live = Live(_Line(self), console=self.console, refresh_per_second=8, transient=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    # ---- stages ------------------------------------------------------------------------------
    def begin(self, stage: str) -> None:
        """A new stage starts (the previous one ends)."""
        self._stop_timer()
        with self._lock:
            self.stage, self.detail = stage, ""
            self.stage_start = time.monotonic()
        if self._live is not None:
            if not self._live.is_started:
                self._live.start()
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
        if self._live is None and self.plain and self.stage:
            self._plain_line(detail)

    def end(self) -> None:
        self._stop_timer()
        with self._lock:
            self.stage, self.detail = "", ""
        if self._live is not None and self._live.is_started:
            self._live.stop()

    def printed(self) -> None:
        """The caller printed something (a verdict): the heartbeat counts from now."""
        self._last_output = time.monotonic()

    # ---- plain mode --------------------------------------------------------------------------
    def _plain_line(self, detail: str | None = None) -> None:
        with self._lock:
            if not self.stage:
                return
            at = time.monotonic() - self.start
            text = f"{self.prefix}[{at:6.1f} s] {self.stage}" + (f": {detail}" if detail else " ...")
        self.console.print(clean(text), markup=False, highlight=False, soft_wrap=True)
        self.console.file.flush()
        self._last_output = time.monotonic()
        if detail is None:
            self._schedule_heartbeat()

    def _schedule_heartbeat(self) -> None:
        self._stop_timer()
        self._timer = threading.Timer(HEARTBEAT_S, self._heartbeat)
        self._timer.daemon = True
        self._timer.start()

    def _heartbeat(self) -> None:
        with self._lock:
            stage, since = self.stage, time.monotonic() - self.stage_start
        if not stage:
            return
        if time.monotonic() - self._last_output >= HEARTBEAT_S - 0.5:
            at = time.monotonic() - self.start
            self.console.print(clean(f"{self.prefix}[{at:6.1f} s] {stage}: still running ({since:.0f} s)"),
                               markup=False, highlight=False, soft_wrap=True)
            self.console.file.flush()
            self._last_output = time.monotonic()
        self._schedule_heartbeat()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

