"""`rocmcheck probe NAME|all [--list] [--json]`: run GPU probes on their own. Parses options, calls the stage."""

from __future__ import annotations

import json

import click

from rocmcheck.commands.options import MAX_SECONDS, FiniteFloat

from rocmcheck.probes.catalog import DEEPSPEED_BUILD_TIMEOUT_S, PROBE_NAMES, PROBES
from rocmcheck.result import CheckResult, Status

DEFAULT_TIMEOUT_S = 60.0
ALL_TIMEOUT_S = 180.0


def _echo_result(r: CheckResult) -> None:
    click.echo(f"[{r.status.value.upper():5}] {r.id}: {r.summary}")
    for line in r.evidence:
        click.echo(f"          {line}")
    if r.fix:
        click.echo(f"          fix: {r.fix}")


@click.command("probe")
@click.argument("name", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the probes and what each proves.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
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
        raise click.UsageError(f"give a probe name; valid names: {valid}")
    if name != "all" and name not in PROBE_NAMES:
        raise click.BadParameter(f"unknown probe {name!r}; valid names: {valid}", param_hint="NAME")
    from rocmcheck.probes.stage import run_stage

    only = None if name == "all" else {name}
    # Asked for explicitly, deepspeed_ops may JIT-build the ops (minutes); doctor's stage never does.
    allow_build = name == "deepspeed_ops"
    if timeout_s is None:
        timeout_s = ALL_TIMEOUT_S if name == "all" else DEEPSPEED_BUILD_TIMEOUT_S + 60 if allow_build else DEFAULT_TIMEOUT_S
    results = run_stage(timeout_s=timeout_s, only=only, allow_build=allow_build)
    if as_json:
        click.echo(json.dumps({"schema": 1, "results": [r.to_dict() for r in results]}, indent=2))
    else:
        for r in results:
            _echo_result(r)
    if any(r.status.is_problem for r in results):
        raise SystemExit(1)
