"""The doctor on a console. By default, problems first: once every verdict is in, the header (machine, GPUs, stack),
only the verdicts that warn, fail or crash, each group under the fix that answers it, then a tally per area and the
verdict line (render.print_problems). With -v, every verdict streams area by area as it is known (one table,
printed in pieces with the same column widths), then the verdict line and the fixes to paste. Everything goes
through report/render.py."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from rocmcheck.checks import AREA_TITLES
from rocmcheck.report import render as r
from rocmcheck.result import CheckResult


def render(results: list[CheckResult], machine: dict[str, Any], console: Console, verbose: bool = False) -> None:
    """The whole report at once (a replayed bundle, or any caller with every result in hand)."""
    r.print_report(results, console, title=machine.get("headline") or "rocmcheck doctor", area_titles=AREA_TITLES,
                   verbose=verbose)


class Stream:
    """Prints each batch of verdicts as it arrives; `finish` prints the verdict line and the fixes."""

    def __init__(self, console: Console, verbose: bool = False, id_width: int = r.ID_WIDTH) -> None:
        self.console = console
        self.verbose = verbose
        self.id_width = id_width
        self.header_done = False
        self.area: str | None = None  # the area the last piece printed ended in

    def title(self, text: str) -> None:
        self.console.print(Text(r.clean(text), style="bold"))

    def results(self, new: list[CheckResult], revised: list[CheckResult]) -> None:
        if not self.verbose:  # problems first: nothing is printed until every verdict is in (finish)
            return
        if new:  # one verdict at a time as the GPU probes finish: the area's title row once, not per verdict
            self.console.print(r.table(new, area_titles=AREA_TITLES, verbose=self.verbose,
                                       show_header=not self.header_done, id_width=self.id_width,
                                       after_area=self.area))
            self.header_done = True
            self.area = new[-1].area
        if revised:  # the note stays out of the table: a long title row would widen the check column
            self.console.print(Text("judged again now that every fact is in:", style="dim"))
            self.console.print(r.table(revised, area_titles=AREA_TITLES, verbose=self.verbose, show_header=False,
                                       id_width=self.id_width))
            self.area = None  # the next piece names its area again, below the note
        self.console.file.flush()

    def finish(self, results: list[CheckResult], fixes: bool = True, header: list[str] = ()) -> None:
        if not self.verbose:
            r.print_problems(results, self.console, header=list(header), area_titles=AREA_TITLES)
            return
        for line in header:
            self.console.print(Text(r.clean(line)))
        self.console.print(r.verdict_line(results))
        if fixes:
            self.console.file.flush()
            r.print_fixes(results, self.console.file)
