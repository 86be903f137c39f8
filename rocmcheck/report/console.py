"""The console report: one table of verdicts grouped by area, the fixes, and a final line."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rocmcheck.checks import AREA_TITLES
from rocmcheck.report.json_report import overall, summarize
from rocmcheck.result import CheckResult, Status

STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim",
         Status.CRASH: "bold magenta"}
MARK = {Status.PASS: "pass", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip", Status.CRASH: "CRASH"}


def render(results: list[CheckResult], machine: dict[str, Any], console: Console, verbose: bool = False) -> None:
    title = machine.get("headline") or "rocmcheck doctor"
    table = Table(title=title, show_lines=False, expand=False, title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("verdict", overflow="fold")
    current_area = None
    for r in results:
        if r.area != current_area:
            current_area = r.area
            table.add_row("", Text(AREA_TITLES.get(r.area, r.area), style="bold cyan"), "")
        body = Text(r.summary)
        if r.fix and r.status not in (Status.PASS, Status.SKIP):
            body.append("\n  fix: ", style="bold").append(r.fix)
        if verbose or r.status in (Status.FAIL, Status.CRASH):
            for line in r.evidence[:8]:
                body.append(f"\n  · {line}", style="dim")
        table.add_row(Text(MARK[r.status], style=STYLE[r.status]), r.id, body)
    console.print(table)
    counts = summarize(results)
    verdict = overall(results)
    style = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red"}[verdict]
    line = Text("Verdict: ", style="bold").append(verdict.upper(), style=style)
    line.append(f"  ({counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail, {counts['skip']} skip"
                + (f", {counts['crash']} crashed" if counts["crash"] else "") + ")")
    console.print(line)
