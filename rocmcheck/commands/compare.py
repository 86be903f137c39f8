"""`rocmcheck compare BUNDLE... | DIR`: several nodes' doctor bundles side by side, the odd node named. Exit code:
the one rule (rocmcheck.result.exit_code): 0 when no node differs or the differences are warnings, 1 when one
is a failure (another driver, ROCm, torch, GPU count...), 2 on bad input, 3 when nothing could be compared
(every verdict a skip)."""

from __future__ import annotations

import sys

import click

from rocmcheck.commands.options import json_option
from rocmcheck.errors import BadInput
from rocmcheck.result import exit_code


@click.command()
@click.argument("bundles", nargs=-1, required=True, metavar="BUNDLE... | DIR")
@json_option()
@click.option("-v", "--verbose", is_flag=True, help="Show the rows where every node agrees too.")
def compare(bundles, as_json, verbose):
    """Compare doctor bundles (`doctor --out` / `--bundle-dir`) of several nodes, or of one machine over
    time, and name the node that differs: versions, GPUs, failing checks, slow probes, kernel-log faults.

    Exit code: 0 no node differs, or only in warnings (a slower GEMM, another OS); 1 a difference that fails
    (another driver, ROCm, torch, GPU count or model, a check that fails on one node); 2 bad input; 3 nothing
    could be compared (every verdict a skip)."""
    from rocmcheck.compare.bundles import bundle_paths, load_nodes
    from rocmcheck.compare.report import compare_nodes, render, to_json
    paths = bundle_paths(list(bundles))
    if len(paths) < 2:
        raise BadInput(f"compare needs two bundles or more; got {len(paths)}")
    nodes = load_nodes(paths)
    comp = compare_nodes(nodes)
    if as_json:
        from rocmcheck.report.json_report import dumps

        click.echo(dumps(to_json(comp)))
    else:
        from rocmcheck.report import render as report

        render(comp, report.console(), verbose=verbose)
    sys.exit(exit_code(comp.results))
