"""`rocmcheck probe NAME|all`: one GPU probe (or all) in a child process, the same code doctor's GPU stage runs.
The facts the judges read (GPU names and memory from the system tools, the ROCm version, the kernel command line,
NUMA balancing) are read once here, before the stage (rocmcheck/probes/host.py); the doctor passes its own. A site's
rules (`--knowledge`, as doctor reads them: rocmcheck/knowledge/site.py) give the judges the site's floors."""

from __future__ import annotations

from pathlib import Path

import click

from rocmcheck.commands.options import MAX_SECONDS, Command, FiniteFloat, complete_probes, json_option
from rocmcheck.errors import BadInput
from rocmcheck.probes.catalog import BY_NAME, PROBE_NAMES, PROBES
from rocmcheck.probes.levels import MAX_DURATION_S, MIN_DURATION_S

DEFAULT_TIMEOUT_S = 60.0
ALL_TIMEOUT_S = 180.0  # `all` at level 1; a higher --level adds its budget (rocmcheck/probes/levels.py)
BUILD_EXTRA_S = 60.0  # a probe allowed to build: its build limit plus the torch import and the run itself
# A level-2 or level-3 probe by name: its own limit (plus its run time) and this for the torch import around it.
RUN_EXTRA_S = BUILD_EXTRA_S


def _list(as_json: bool) -> None:
    if not as_json:
        for spec in PROBES:
            click.echo(f"{spec.name:15} level {spec.level}  {spec.proves}")
        return
    from rocmcheck.report.json_report import dumps, envelope

    click.echo(dumps(envelope("probe list", [], probes=[spec.listing() for spec in PROBES])))


@click.command("probe", cls=Command)
@click.argument("name", required=False, shell_complete=complete_probes)
@click.option("--list", "list_only", is_flag=True, help="List the probes and what each proves.")
@json_option()
@click.option("--timeout", "timeout_s", type=FiniteFloat(1.0, MAX_SECONDS), default=None,
              help="Overall time limit in seconds (default 60; 180 for all; deepspeed_ops may JIT-build: 960).")
@click.option("--level", type=click.IntRange(1, 3), default=None,
              help="With all: the probes of doctor --level N (default 1).")
@click.option("--duration", type=FiniteFloat(MIN_DURATION_S, MAX_DURATION_S), default=None, metavar="SECONDS",
              help="Seconds the level-3 stress probes run in all.")
@click.option("--knowledge", type=click.Path(path_type=Path), metavar="DIR",
              help="A site's own rules, as doctor --knowledge reads them (docs/knowledge.md): its floors judge the "
                   "probes' rates in place of AMD's.")
def probe(name: str | None, list_only: bool, as_json: bool, timeout_s: float | None, level: int | None,
          duration: float | None, knowledge: Path | None) -> None:
    """Run one GPU probe (or all) in a child process and print its verdict. Exit 0 when nothing failed, 1 when a
    probe failed, 3 when nothing could be judged (no torch, no GPU)."""
    if list_only:
        _list(as_json)
        return
    valid = ", ".join((*PROBE_NAMES, "all"))
    if not name:
        raise BadInput(f"give a probe name; valid names: {valid}")
    if name != "all" and name not in PROBE_NAMES:
        raise BadInput("NAME: " + f"unknown probe {name!r}; valid names: {valid}")
    if level is not None and name != "all":
        raise BadInput(f"--level chooses the probes of `rocmcheck probe all`; {name} runs whatever its level")
    site_rules = None
    if knowledge is not None:  # read and checked whole before anything runs: a bad file is exit 2 now
        from rocmcheck.knowledge.site import load_site_rules

        site_rules = load_site_rules(knowledge)
    from rocmcheck.probes.host import read_host_facts
    from rocmcheck.probes.levels import durations, probes_at, stage_budget_s
    from rocmcheck.probes.stage import run_stage
    from rocmcheck.report import render
    from rocmcheck.report.json_report import dumps, envelope
    from rocmcheck.report.progress import Progress
    from rocmcheck.result import exit_code

    only = None if name == "all" else {name}
    # Asked for by name, a probe that builds what it tests may do so (deepspeed_ops: minutes); doctor's stage never.
    spec = BY_NAME.get(name)
    allow_build = spec is not None and spec.builds
    chosen = probes_at(level or 1) if spec is None else (spec,)
    if duration is not None and not durations(chosen, duration):
        raise BadInput("--duration sets how long the level-3 stress probes run: none of them is asked for")
    if timeout_s is None:
        if spec is None:
            timeout_s = stage_budget_s(ALL_TIMEOUT_S, level or 1, chosen, duration)
        elif allow_build:
            timeout_s = spec.limit(True) + BUILD_EXTRA_S
        elif spec.level > 1:
            timeout_s = spec.limit(False, durations(chosen, duration).get(spec.name)) + RUN_EXTRA_S
        else:
            timeout_s = DEFAULT_TIMEOUT_S
    con = render.console(stderr=as_json)
    with Progress(con, plain=not as_json or con.is_terminal, plain_after_s=2.0, prefix="probe ") as progress:
        progress.begin("reading the GPU tools, the ROCm version and /proc")
        host = read_host_facts()
        host.site_rules = site_rules
        progress.begin(f"GPU probe {name} (child process, up to {timeout_s:g} s)")
        results = run_stage(timeout_s=timeout_s, host=host, only=only, allow_build=allow_build, level=level or 1,
                            duration_s=duration)
    if as_json:
        click.echo(dumps(envelope("probe", results, probe=name)))
    else:
        render.print_report(results, con, verbose=True)
    code = exit_code(results)
    if code:
        raise SystemExit(code)
