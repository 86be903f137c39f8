"""`rocmcheck compare BUNDLE... | DIR`: several nodes' doctor bundles side by side, the odd node named. Exit 0 when
the nodes agree, 1 when one differs, 2 on bad input."""

from __future__ import annotations

import sys

import click

from rocmcheck.commands.options import json_option
from rocmcheck.errors import BadInput


@click.command()
@click.argument("bundles", nargs=-1, required=True, metavar="BUNDLE... | DIR")
@json_option()
@click.option("-v", "--verbose", is_flag=True, help="Show the rows where every node agrees too.")
def compare(bundles, as_json, verbose):
    """Compare doctor bundles (`doctor --out` / `--bundle-dir`) of several nodes, or of one machine over
    time, and name the node that differs: versions, GPUs, failing checks, slow probes, kernel-log faults."""
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
    sys.exit(1 if comp.findings else 0)
