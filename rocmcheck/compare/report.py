"""`rocmcheck compare`: the nodes side by side. Runs the judges over the loaded bundles, puts the rows where a
node differs first, and renders the table (rich) or the JSON document."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.compare.bundles import GPU_FACETS, METRICS, VERSION_FACETS, NodeBundle
from rocmcheck.compare.judge import (
    AGREE_ID,
    judge_kernel_logs,
    judge_metric,
    judge_statuses,
    judge_values,
    shared_problems,
)
from rocmcheck.result import CheckResult, Status, passed

MAX_NODE_COLUMNS = 8  # more nodes than this: the table shows the odd nodes and one column for the rest


@dataclass
class Row:
    key: str  # a facet, metric or check id
    label: str
    cells: dict[str, str]  # node label -> what it shows
    finding: CheckResult | None = None

    @property
    def differs(self) -> bool:
        return len(set(self.cells.values())) > 1


@dataclass
class Comparison:
    nodes: list[NodeBundle]
    over_time: bool
    findings: list[CheckResult] = field(default_factory=list)
    shared: list[dict[str, Any]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """"differ" when any node was named, else "same"."""
        return "differ" if self.findings else "same"

    @property
    def odd_nodes(self) -> list[str]:
        return list(dict.fromkeys(n for f in self.findings for n in f.data.get("nodes", [])))

    @property
    def results(self) -> list[CheckResult]:
        """The verdicts the one exit rule reads: the findings, or the one pass when no node differs (a warning
        alone is exit 0, a failure 1)."""
        if self.findings:
            return list(self.findings)
        what = "over time" if self.over_time else "side by side"
        return [passed(f"{len(self.nodes)} bundles compared {what}: no node differs in the {len(self.rows)} rows",
                       id=AGREE_ID, nodes=[n.label for n in self.nodes])]


def _fmt(value: float | None) -> str:
    return "-" if value is None else (f"{value:,.1f}" if value >= 10 else f"{value:.2f}")


def _kernel_cell(findings: list[dict[str, Any]] | None) -> str:
    if findings is None:
        return "not readable"
    if not findings:
        return "clean"
    return ", ".join(f"{f.get('count', 1)}x {f.get('title')}" for f in findings[:3])


def compare_nodes(nodes: list[NodeBundle]) -> Comparison:
    """Every judge over every row. One machine's bundles (same host name) are compared over time, oldest first."""
    over_time = len(nodes) >= 2 and len({n.host for n in nodes}) == 1
    if over_time:
        nodes = sorted(nodes, key=lambda n: n.collected_at)
    comp = Comparison(nodes, over_time)
    labels = [n.label for n in nodes]
    hosts = {n.label: n.host for n in nodes}
    folders = {os.path.dirname(os.path.abspath(n.path)) for n in nodes}
    bundle_dir = folders.pop() if len(folders) == 1 else None

    for key, label in VERSION_FACETS + GPU_FACETS:
        values = {n.label: n.facets.get(key) for n in nodes}
        if all(v is None for v in values.values()):
            continue
        comp.rows.append(Row(key, label, {k: "-" if v is None else str(v) for k, v in values.items()},
                             judge_values(key, label, values, over_time, hosts)))

    for key, (label, unit, check_id, _path) in METRICS.items():
        measured = {n.label: n.numbers[key] for n in nodes if key in n.numbers}
        if not measured:
            continue
        finding = judge_metric(key, label, unit, measured, check_id, over_time, hosts, bundle_dir)
        comp.rows.append(Row(key, f"{label} ({unit})", {lab: _fmt(measured.get(lab)) for lab in labels}, finding))

    kernel = {n.label: (n.kernel_log if n.result("health.kernel_log") is not None
                        and n.result("health.kernel_log").status != Status.SKIP else None) for n in nodes}
    if any(v is not None for v in kernel.values()):
        comp.rows.append(Row("kernel_log", "kernel-log faults", {k: _kernel_cell(v) for k, v in kernel.items()},
                             judge_kernel_logs(kernel, over_time)))

    statuses = {n.label: n.statuses for n in nodes}
    summaries = {n.label: {r.id: r.summary for r in n.results} for n in nodes}
    fixes = {n.label: {r.id: r.fix for r in n.results} for n in nodes}
    check_ids = list(dict.fromkeys(cid for s in statuses.values() for cid in s))
    for cid in check_ids:
        per = {lab: statuses[lab].get(cid) for lab in labels}
        finding = None
        if cid != "health.kernel_log":  # its findings have their own row above
            finding = judge_statuses(cid, per, {lab: summaries[lab].get(cid, "") for lab in labels},
                                     {lab: fixes[lab].get(cid) for lab in labels}, over_time)
        comp.rows.append(Row(cid, cid, {k: v or "-" for k, v in per.items()}, finding))
    comp.shared = shared_problems(statuses, summaries)

    order = {Status.FAIL: 0, Status.CRASH: 0, Status.WARN: 1}
    comp.findings = sorted((r.finding for r in comp.rows if r.finding is not None),
                           key=lambda f: order.get(f.status, 2))
    # Outliers first, then rows that differ without a verdict, then the rows where every node agrees.
    comp.rows.sort(key=lambda r: (0 if r.finding is not None else 1 if r.differs else 2,
                                  order.get(r.finding.status, 2) if r.finding else 2))
    return comp


# ------------------------------------------------------------------------------------------------ output

def to_json(comp: Comparison) -> dict[str, Any]:
    """The shared JSON envelope (rocmcheck/report/json_report.py): the findings (or the one pass) are its results;
    the nodes, the table and the problems every node shares are the command's payload."""
    from rocmcheck.report.json_report import envelope

    return envelope("compare", comp.results,
                    mode="over_time" if comp.over_time else "nodes",
                    comparison=comp.verdict,
                    odd_nodes=comp.odd_nodes,
                    nodes=[{"label": n.label, "host": n.host, "bundle": n.path, "collected_at": n.collected_at,
                            "launch": n.facts.launch or None} for n in comp.nodes],
                    shared_problems=comp.shared,
                    table=[{"key": r.key, "label": r.label, "differs": r.differs, "cells": r.cells,
                            "finding": r.finding.id if r.finding else None} for r in comp.rows])


def _columns(comp: Comparison) -> tuple[list[str], int]:
    labels = [n.label for n in comp.nodes]
    if len(labels) <= MAX_NODE_COLUMNS:
        return labels, 0
    odd = [lab for lab in labels if lab in comp.odd_nodes][:MAX_NODE_COLUMNS - 1]
    rest = [lab for lab in labels if lab not in odd]
    return odd + rest[:1], len(rest) - 1  # one ordinary node stands for the rest


_WORDS = {Status.FAIL: ("FAIL", "red"), Status.CRASH: ("FAIL", "red"), Status.WARN: ("WARN", "yellow")}


def render(comp: Comparison, console: Any, verbose: bool = False) -> None:
    """Data (host names, versions, summaries) is built as rich Text, never parsed as markup; the fixes follow
    as plain lines to paste (rocmcheck/report/render.py)."""
    from rich.table import Table
    from rich.text import Text

    from rocmcheck.report.render import clean, print_fixes

    n = len(comp.nodes)
    mode = "one machine over time, oldest first" if comp.over_time else f"{n} nodes"
    console.print(Text(f"rocmcheck compare — {mode}"))
    columns, hidden = _columns(comp)
    table = Table(show_lines=False, header_style="bold")
    table.add_column("", no_wrap=True)
    for col in columns:
        table.add_column(col + (f" (+{hidden} like it)" if hidden and col == columns[-1] else ""), overflow="fold")
    shown = [r for r in comp.rows if r.finding is not None or r.differs or verbose]
    for row in shown:
        word, style = _WORDS.get(row.finding.status if row.finding else None, ("    ", ""))
        cells = []
        odd = set(row.finding.data.get("nodes", [])) if row.finding else set()
        for col in columns:
            cells.append(Text(clean(row.cells.get(col, "-")), style="bold red" if col in odd else ""))
        table.add_row(Text(word, style=style).append(" " + clean(row.label), style=""), *cells)
    if shown:
        console.print(table)
    same = len(comp.rows) - len([r for r in comp.rows if r.finding is not None or r.differs])
    if not verbose and same:
        console.print(f"{same} rows agree on every node (-v shows them).")
    for f in comp.findings:
        colour = "red" if f.status in (Status.FAIL, Status.CRASH) else "yellow"
        console.print(Text(f.status.value.upper(), style=colour).append(" " + clean(f.summary)))
    for s in comp.shared:
        console.print(Text(clean(f"{s['status']:>5} on every node: {s['id']}: {s['summary']}")))
    if comp.findings:
        where = ", ".join(comp.odd_nodes) or "the rows above"
        console.print(Text(clean(f"Verdict: the nodes differ; look at {where}.")))
        console.file.flush()
        print_fixes(comp.findings, console.file)
    else:
        console.print("Verdict: no node differs from the others." if not comp.over_time
                      else "Verdict: nothing changed for the worse between these bundles.")
