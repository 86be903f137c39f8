"""The one way CheckResults reach a person, for every command: the status words and styles, the table of
verdicts (whole or one area at a time, as the doctor streams), the problems-first report (only the verdicts that
warn, fail or crash, each group under the one fix that answers it, then a tally per area), the verdict line, and
the fixes again as plain,
unwrapped lines: the shell fixes to paste (one command per line, grouped per failing check; `#` lines are shell
comments, so the whole block can be pasted or saved as a script), then the edits to make in named files and the
notes, each under its own heading (rocmcheck/fixes.py: a fix is a shell line, an edit or a note).

Text that comes from the machine (tool output, versions, paths) is printed with markup off; every string goes
through `clean` first, the single place where output is sanitised.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rocmcheck.fixes import Fix, FixKind
from rocmcheck.result import NOT_JUDGED, CheckResult, Status
from rocmcheck.result import verdict as run_verdict
from rocmcheck.safe.text import clean as sanitise
from rocmcheck.safe.text import safe_console

WORD = {Status.PASS: "pass", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip", Status.CRASH: "CRASH"}
STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim",
         Status.CRASH: "bold magenta"}
VERDICT_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", NOT_JUDGED: "bold magenta"}
VERDICT_WORD = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", NOT_JUDGED: "NOT JUDGED"}
ID_WIDTH = 24  # the check column when areas print one at a time: wide enough for every doctor id
EVIDENCE_LINES = 8


def clean(text: Any) -> str:
    """Every piece of text printed goes through here: escape sequences and control characters from data (a tool's
    output, a bundle, a config key) never reach the terminal (rocmcheck/safe/text.py)."""
    return sanitise(str(text))


def counts(results: Iterable[CheckResult]) -> dict[str, int]:
    out = {s.value: 0 for s in Status}
    for r in results:
        out[r.status.value] += 1
    return out


def verdict(results: list[CheckResult]) -> str:
    """The run's verdict (rocmcheck/result.py): fail, warn, pass, or not_judged when nothing could be judged."""
    return run_verdict(results)


def console(stderr: bool = False) -> Console:
    """The console every command prints through: data is text (no markup, emoji codes or highlighting), every
    rendered segment is cleaned, and rich's own styling reaches the real stream (safe_console)."""
    return safe_console(stderr=stderr)


def needs_fix(r: CheckResult) -> bool:
    return bool(r.fix) and r.status in (Status.WARN, Status.FAIL, Status.CRASH)


def table(results: list[CheckResult], *, area_titles: dict[str, str] | None = None, verbose: bool = False,
          title: str | None = None, show_header: bool = True, id_width: int | None = None,
          after_area: str | None = None) -> Table:
    """One row per verdict, an area title row where the area changes (after_area: the area the piece printed
    before this one ended in, so a table printed in pieces names it once). Fixes are not wrapped into cells:
    a row that has one says so, and `fixes_block` prints it whole."""
    t = Table(title=clean(title) if title else None, title_justify="left", show_header=show_header,
              header_style="bold", box=None, pad_edge=False, expand=False)
    t.add_column("", no_wrap=True, width=5)
    t.add_column("check", no_wrap=True, min_width=id_width or 0)
    t.add_column("verdict", overflow="fold")
    current = after_area
    for r in results:
        if area_titles is not None and r.area != current:
            current = r.area
            t.add_row("", Text(clean(area_titles.get(r.area, r.area)), style="bold cyan"), "")
        body = Text(clean(r.summary))
        if needs_fix(r):
            body.append("  (fix below)", style="dim")
        if verbose or r.status.is_problem:
            for line in r.evidence[:EVIDENCE_LINES]:
                body.append("\n· " + clean(line), style="dim")
        t.add_row(Text(WORD[r.status], style=STYLE[r.status]), Text(clean(r.id)), body)
    return t


def verdict_line(results: list[CheckResult]) -> Text:
    c = counts(results)
    v = verdict(results)
    line = Text("Verdict: ", style="bold").append(VERDICT_WORD[v], style=VERDICT_STYLE[v])
    line.append(f"  ({c['pass']} pass, {c['warn']} warn, {c['fail']} fail, {c['skip']} skip"
                + (f", {c['crash']} crashed" if c["crash"] else "") + ")")
    if v == NOT_JUDGED:
        line.append(": nothing could be judged here (every verdict is a skip; the skips say why)")
    return line


def _header(r: CheckResult) -> str:
    return " ".join(f"# {WORD[r.status]} {r.id}: {clean(r.summary)}".split())


def _grouped(results: list[CheckResult], kind: FixKind) -> list[tuple[Fix, list[CheckResult]]]:
    """The fixes of one kind, failures before warnings; a fix shared by several checks once, with all of them."""
    order = [Status.CRASH, Status.FAIL, Status.WARN]
    groups: dict[tuple[str, str], tuple[Fix, list[CheckResult]]] = {}
    for r in sorted((r for r in results if needs_fix(r) and r.fix.kind is kind), key=lambda r: order.index(r.status)):
        key = (r.fix.file, r.fix.text)
        groups.setdefault(key, (r.fix, []))[1].append(r)
    return list(groups.values())


def fix_lines(results: list[CheckResult]) -> list[str]:
    """The shell fixes as lines to paste: `# FAIL check.id: summary` then the command, per failing check; a
    command shared by several checks prints once, under all their headers. Failures before warnings."""
    lines: list[str] = []
    for fix, rs in _grouped(results, FixKind.SHELL):
        if lines:
            lines.append("")
        lines += [_header(r) for r in rs]
        lines.append(clean(fix.line()))
    return lines


def other_fix_lines(results: list[CheckResult], kind: FixKind) -> list[str]:
    """The edits (or notes) as lines of text: `- FILE: the change (why)  [check.id]`."""
    return [clean(f"- {fix.line()}  [{', '.join(r.id for r in rs)}]") for fix, rs in _grouped(results, kind)]


PASTE_HEADING = "Fixes (paste a line; lines starting with # are comments):"
EDIT_HEADING = "Edit these files:"
NOTE_HEADING = "What to do by hand:"


def print_fixes(results: list[CheckResult], out: TextIO | None = None, *, heading: str | bool = True) -> None:
    """Plain text, never wrapped or styled: what a terminal shows is what pastes. heading=False (`--fixes-only`)
    prints a script: the shell lines, and the edits and notes as `#` comments."""
    out = out or sys.stdout
    shell = fix_lines(results)
    edits = other_fix_lines(results, FixKind.EDIT)
    notes = other_fix_lines(results, FixKind.NOTE)
    if not (shell or edits or notes):
        return
    if not heading:
        comments = [f"# edit {line[2:]}" for line in edits] + [f"# {line[2:]}" for line in notes]
        out.write("\n".join(shell + ([""] if shell and comments else []) + comments) + "\n")
        out.flush()
        return
    blocks = []
    if shell:
        blocks.append((heading if isinstance(heading, str) else PASTE_HEADING, shell))
    if edits:
        blocks.append((EDIT_HEADING, edits))
    if notes:
        blocks.append((NOTE_HEADING, notes))
    for title, lines in blocks:
        out.write("\n" + title + "\n\n" + "\n".join(lines) + "\n")
    out.flush()


def print_report(results: list[CheckResult], con: Console | None = None, *, title: str | None = None,
                 area_titles: dict[str, str] | None = None, verbose: bool = False, fixes: bool = True) -> None:
    """The whole report: table, verdict line, fixes."""
    con = con or console()
    if results:
        con.print(table(results, area_titles=area_titles, verbose=verbose, title=title))
    con.print(verdict_line(results))
    if fixes:
        con.file.flush()
        print_fixes(results, con.file)


# ---- problems first: what the doctor prints without -v -------------------------------------------------------

PROBLEMS = (Status.CRASH, Status.FAIL, Status.WARN)  # worst first
FIX_LABEL = {FixKind.SHELL: "fix: ", FixKind.EDIT: "edit: ", FixKind.NOTE: "do: "}
# The tally's marks, and their ASCII stand-ins where the output's encoding has no room for them (LANG=C).
MARKS = {"pass": "✓", "fail": "✗", "warn": "!", "skip": "–", "sep": " · "}
ASCII_MARKS = {"pass": "ok", "fail": "x", "warn": "!", "skip": "-", "sep": " | "}
SKIP_REASON_CHARS = 48  # an area skipped for one reason names it, cut to this many characters


def problems(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.status in PROBLEMS]


def problem_groups(results: list[CheckResult]) -> list[tuple[Fix | None, list[CheckResult]]]:
    """The verdicts that warn, fail or crash, grouped by the fix that answers them (a fix shared by several checks
    is one group with all of them), the group with the worst verdict first; a verdict without a fix is its own
    group."""
    groups: dict[Any, tuple[Fix | None, list[CheckResult]]] = {}
    for r in sorted(problems(results), key=lambda r: PROBLEMS.index(r.status)):
        key = (r.fix.kind, r.fix.file, r.fix.text) if r.fix else ("none", r.id)
        groups.setdefault(key, (r.fix, []))[1].append(r)
    return list(groups.values())


def marks(con: Console | None = None) -> dict[str, str]:
    encoding = getattr(getattr(con, "file", None), "encoding", None) or "utf-8"
    try:
        "".join(MARKS.values()).encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return ASCII_MARKS
    return MARKS


def _skip_reason(text: str) -> str:
    """A skip's summary as a short reason: "GPU probes skipped: torch sees no GPU" -> "torch sees no GPU",
    "smoke-train skipped (--no-train)" -> "--no-train", a trailing "(...)" left out."""
    reason = clean(text)
    if "skipped: " in reason:
        reason = reason.split("skipped: ", 1)[1]
    elif reason.endswith(")") and "skipped (" in reason:
        reason = reason.rsplit("skipped (", 1)[1][:-1]
    reason = reason.split(" (", 1)[0].strip()
    return reason if len(reason) <= SKIP_REASON_CHARS else reason[: SKIP_REASON_CHARS - 1].rstrip() + "…"


def area_tally(results: list[CheckResult], area_titles: dict[str, str] | None = None,
               mark: dict[str, str] | None = None) -> list[str]:
    """One item per area, in report order: "Operating system ✓ 2", "GPUs ✗ 1 – 3 skipped", and for an area
    skipped whole, its first skip's reason: "Driver – skipped: no AMD GPU stack found"."""
    mark = mark or MARKS
    areas: dict[str, list[CheckResult]] = {}
    for r in results:
        areas.setdefault(r.area, []).append(r)
    order = list(area_titles or {})
    items = []
    for area, rs in sorted(areas.items(), key=lambda a: order.index(a[0]) if a[0] in order else len(order)):
        title = clean((area_titles or {}).get(area, area))
        c = counts(rs)
        skips = [r for r in rs if r.status is Status.SKIP]
        if len(skips) == len(rs):
            items.append(f"{title} {mark['skip']} skipped: {_skip_reason(skips[0].summary)}")
            continue
        parts = []
        if c["fail"] + c["crash"]:
            parts.append(f"{mark['fail']} {c['fail'] + c['crash']}")
        if c["warn"]:
            parts.append(f"{mark['warn']} {c['warn']}")
        if c["pass"]:
            parts.append(f"{mark['pass']} {c['pass']}")
        if skips:
            parts.append(f"{mark['skip']} {len(skips)} skipped")
        items.append(f"{title} {' '.join(parts)}")
    return items


def fill(items: list[str], width: int, sep: str = " · ") -> list[str]:
    """Items joined by sep into lines of at most width characters, never breaking an item."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(sep) + len(item) <= width:
            lines[-1] += sep + item
        else:
            lines.append(item)
    return lines


def print_problems(results: list[CheckResult], con: Console | None = None, *, header: list[str] = (),
                   area_titles: dict[str, str] | None = None) -> None:
    """The doctor's default report: the header lines, then each problem group (its verdicts, then its fix once,
    as one unwrapped line to paste), then the tally per area and the verdict line. `-v` prints the whole table
    instead (print_report)."""
    con = con or console()
    for line in header:
        con.print(Text(clean(line)), overflow="fold")
    groups = problem_groups(results)
    width = max((len(r.id) for _, rs in groups for r in rs), default=0)
    for fix, rs in groups:
        con.print()
        t = Table(show_header=False, box=None, pad_edge=False, expand=False)
        t.add_column("", no_wrap=True, width=5)
        t.add_column("check", no_wrap=True, min_width=width)
        t.add_column("verdict", overflow="fold")
        for r in rs:
            body = Text(clean(r.summary))
            for line in r.evidence[:3] if r.status.is_problem else []:
                body.append("\n· " + clean(line), style="dim")
            t.add_row(Text(WORD[r.status], style=STYLE[r.status]), Text(clean(r.id)), body)
        con.print(t)
        con.file.flush()
        if fix is not None:  # plain and unwrapped: what the terminal shows is what pastes
            con.file.write(f"  {FIX_LABEL[fix.kind]}{clean(fix.line())}\n")
            con.file.flush()
    mark = marks(con)
    con.print()
    for line in fill(area_tally(results, area_titles, mark), max(40, con.width), mark["sep"]):
        con.print(Text(line), overflow="fold", no_wrap=False)
    line = verdict_line(results)
    if any(r.status is not Status.PASS and r.status not in PROBLEMS for r in results) or groups:
        line.append("  -v: every check", style="dim")
    con.print(line)
