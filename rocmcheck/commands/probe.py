"""`rocmcheck probe NAME|all [--list] [--json]`: run GPU probes on their own. Parses options, calls the stage."""

from __future__ import annotations

import click

from rocmcheck.commands.options import MAX_SECONDS, Command, FiniteFloat, json_option
from rocmcheck.errors import BadInput
from rocmcheck.probes.catalog import DEEPSPEED_BUILD_TIMEOUT_S, PROBE_NAMES, PROBES

DEFAULT_TIMEOUT_S = 60.0
ALL_TIMEOUT_S = 180.0


@click.command("probe", cls=Command)
@click.argument("name", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the probes and what each proves.")
@json_option()
@click.option("--timeout", "timeout_s", type=FiniteFloat(1.0, MAX_SECONDS), default=None,
              help="Overall time limit in seconds (default 60; 180 for all; deepspeed_ops may JIT-build: 960).")
def probe(name: str | None, list_only: bool, as_json: bool, timeout_s: float | None) -> None:
    """Run one GPU probe (or all) in a child process and print its verdict. Exit 1 when one fails."""
    if list_only:
        for spec in PROBES:
            click.echo(f"{spec.name:15} {spec.proves}")
        return
    valid = ", ".join((*PROBE_NAMES, "all"))
    if not name:
        raise BadInput(f"give a probe name; valid names: {valid}")
    if name != "all" and name not in PROBE_NAMES:
        raise BadInput("NAME: " + f"unknown probe {name!r}; valid names: {valid}")
    from rocmcheck.probes.stage import run_stage

    only = None if name == "all" else {name}
    # Asked for explicitly, deepspeed_ops may JIT-build the ops (minutes); doctor's stage never does.
    allow_build = name == "deepspeed_ops"
    if timeout_s is None:
        timeout_s = ALL_TIMEOUT_S if name == "all" else DEEPSPEED_BUILD_TIMEOUT_S + 60 if allow_build else DEFAULT_TIMEOUT_S
    from rocmcheck.report import render
    from rocmcheck.report.json_report import dumps, envelope
    from rocmcheck.report.progress import Progress

    con = render.console(stderr=as_json)
    with Progress(con, plain=not as_json or con.is_terminal, plain_after_s=2.0, prefix="probe ") as progress:
        progress.begin(f"GPU probe {name} (child process, up to {timeout_s:g} s)")
        results = run_stage(timeout_s=timeout_s, only=only, allow_build=allow_build)
    if as_json:
        click.echo(dumps(envelope("probe", results, probe=name)))
    else:
        render.print_report(results, con, verbose=True)
    if any(r.status.is_problem for r in results):
        raise SystemExit(1)
