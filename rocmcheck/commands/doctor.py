"""`rocmcheck doctor`: parse options, run the doctor, stream the report, exit by the one rule (0/1/2/3)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from rocmcheck.commands.options import (
    Command,
    FiniteFloat,
    OutputFile,
    alias,
    complete_checks,
    json_option,
    resolve_archs,
)
from rocmcheck.errors import BadInput
from rocmcheck.probes.levels import DEFAULT_DURATION_S, MAX_DURATION_S, MIN_DURATION_S

MAX_DEADLINE_S = 3600.0  # an hour for the fact collection: every tool has a 20 s limit of its own
PEER_POLL_S = 0.5  # --node-per-rank: how often a rank that failed looks for the other ranks' bundles

STAGE_AREAS = {"probe", "train", "cluster"}


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _split_names(values: tuple[str, ...], flag: str) -> tuple[str, ...]:
    """--only/--skip values, comma-separated or repeated; an empty name is a mistake, not "everything"."""
    names = _split(values)
    if any(not v.strip() or any(not part.strip() for part in v.split(",")) for v in values):
        raise BadInput(f"{flag}: " + "an empty name (give check ids or areas, see --list-checks)")
    return names


def _validate_names(names: tuple[str, ...], flag: str) -> None:
    from rocmcheck.checks import known_names
    from rocmcheck.probes.catalog import PROBE_IDS

    known = known_names() | STAGE_AREAS | set(PROBE_IDS)
    for n in names:
        if n in known:
            continue
        import difflib

        from rocmcheck.safe.text import excerpt

        if n.startswith("train."):  # the smoke-train stage is one run; its verdicts come together
            raise BadInput(f"{flag}: no check '{excerpt(n)}': the smoke-train stage runs as a whole; use train")
        close = difflib.get_close_matches(n, sorted(known), n=1)
        raise BadInput(f"{flag}: no check or area '{excerpt(n)}'" + (f"; did you mean {close[0]}?" if close else "")
                       + " (see --list-checks)")


def _nothing_selected(only: tuple[str, ...], skip: tuple[str, ...]) -> bool:
    from rocmcheck.checks import select_checks
    from rocmcheck.doctor import DoctorOptions, _stage_wanted

    opts = DoctorOptions(only=only, skip=skip)
    return not select_checks(only, skip) and not any(_stage_wanted(opts, area) for area in STAGE_AREAS)


@click.command(cls=Command)
@click.option("--arch", "archs", multiple=True, metavar="ARCH",
              help="The GPU you expect: an arch (gfx942, sm_90) or a product (mi300x, h100); a mismatch fails.")
@json_option()
@click.option("--fixes-only", is_flag=True,
              help="Print only the fixes, as lines to paste (nothing when all is well). Skips the smoke-train "
                   "stage, so it never waits for a fine-tune (rocmcheck smoke-train runs it).")
@click.option("--summary", "as_summary", is_flag=True,
              help="Print a short, redacted block of this machine's facts and the verdicts that failed or warned, to "
                   "paste into an issue (`rocmcheck triage` reads it back); no GPU probes, no smoke-train.")
@click.option("--list-checks", is_flag=True, help="List the check ids and exit.")
@click.option("--only", multiple=True, metavar="CHECK", shell_complete=complete_checks,
              help="Run only these checks or areas (repeat or comma-separate).")
@click.option("--skip", multiple=True, metavar="CHECK", shell_complete=complete_checks,
              help="Skip these checks or areas.")
@click.option("--no-gpu-probes", is_flag=True, help="Skip the GPU probe stage.")
@click.option("--no-train", is_flag=True, help="Skip the bundled smoke-train stage.")
@click.option("--level", type=click.IntRange(1, 3), default=1, show_default=True,
              help="GPU probe depth: 1 quick; 2 adds the numerics of every path a fine-tune takes (up to 2 min); "
                   "3 adds stress probes for --duration.")
@click.option("--duration", type=FiniteFloat(MIN_DURATION_S, MAX_DURATION_S), default=None, metavar="SECONDS",
              help=f"With --level 3: seconds the stress probes run in all (default {DEFAULT_DURATION_S:g}).")
@click.option("-o", "--out", "save_bundle", type=OutputFile(),
              help="Write every raw input the checks used to FILE, a bundle (secrets redacted; a new file, --force "
                   "replaces one).")
@alias("--save-bundle", "save_bundle", type=OutputFile())
@click.option("--bundle", type=click.Path(dir_okay=False, path_type=Path),
              help="Re-run the checks on a saved bundle instead of this machine.")
@click.option("--deadline", type=FiniteFloat(1, MAX_DEADLINE_S), default=60.0, show_default=True,
              help="Seconds the fact collection may take in all; a tool still running then becomes a verdict.")
@click.option("--bundle-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Under a launcher, one doctor per node: write DIR/<host name>.json (a shared folder for compare).")
@click.option("--knowledge", type=click.Path(path_type=Path), metavar="DIR",
              help="Add a site's own rules: a folder of rule files (*.json) or one file, as docs/knowledge.md "
                   "describes (expected driver and firmware, floors, forbidden variables, version ranges).")
@click.option("--write-reference", type=OutputFile(), metavar="FILE",
              help="Record this node as known-good: write its driver, firmware, ROCm and torch, and 0.9 x its "
                   "probes' rates as floors, to FILE, a site rule file for --knowledge (a new file; --force "
                   "replaces one).")
@click.option("--force", is_flag=True,
              help="Replace an existing bundle file (--out FILE, or DIR/<host>.json) or --write-reference FILE.")
@click.option("--across-nodes", is_flag=True,
              help="Also run an all-reduce / all-gather over every GPU of every node on the launcher's rendezvous.")
@click.option("--across-timeout", type=FiniteFloat(10, MAX_DEADLINE_S), default=180.0, show_default=True,
              help="Seconds the cross-node stage may take, waiting for the other nodes included.")
@click.option("--node-per-rank", is_flag=True,
              help="Every launcher rank stands in for a node (its own GPU and bundle): the cross-node path on one "
                   "machine.")
@click.option("--python", "python", metavar="PATH",
              help="Judge the stack (torch, flash-attn, DeepSpeed, the packages) of this Python interpreter or "
                   "environment folder [default: the active virtualenv or conda environment, else rocmcheck's own].")
@click.option("--fail-on", type=click.Choice(["fail", "warn"]), default="fail", show_default=True,
              help="Exit 1 when a verdict is this bad or worse: `warn` makes warnings fail a CI job too.")
@click.option("-v", "--verbose", is_flag=True,
              help="Show every verdict, area by area as it is known, with its evidence (the default shows only the "
                   "problems and a tally per area).")
def doctor(archs, as_json, fixes_only, list_checks, only, skip, no_gpu_probes, no_train, save_bundle, bundle, deadline,
           bundle_dir, force, across_nodes, across_timeout, node_per_rank, verbose, level, duration, as_summary,
           python, fail_on, knowledge, write_reference):
    """Check this machine for fine-tuning LLaMA on ROCm (or CUDA): one verdict per check, each with a fix.
    Prints the problems first, each group with its fix as a line to paste, then a tally per area (-v: every
    verdict as each stage finishes). Exit 0: nothing failed (warnings included, unless --fail-on warn); 1: a
    verdict failed; 2: bad input; 3: nothing could be judged."""
    from rocmcheck.checks import select_checks

    if list_checks:
        for spec in select_checks():
            click.echo(f"{spec.id:<28} {spec.title}")
        click.echo(f"{'probe.*':<28} GPU probes (rocmcheck probe --list)")
        click.echo(f"{'train.*':<28} the bundled smoke-train (rocmcheck smoke-train --help)")
        click.echo(f"{'cluster.collective':<28} the cross-node collective (--across-nodes)")
        return
    only, skip = _split_names(only, "--only"), _split_names(skip, "--skip")
    _validate_names(only, "--only")
    _validate_names(skip, "--skip")
    if _nothing_selected(only, skip):
        raise BadInput(f"nothing to run: --only {','.join(only) or '(all)'} --skip {','.join(skip)} "
                               "leaves no check selected")
    expected = resolve_archs(archs)
    if as_summary and (as_json or fixes_only):
        raise BadInput("--summary cannot be combined with --json or --fixes-only")
    if as_summary:  # the facts and the cheap checks: seconds, not the GPU stages
        no_gpu_probes = no_train = True
    train_skipped_by = "--no-train" if no_train else None
    if fixes_only and not no_train:  # the fixes print in seconds, never after minutes of a CPU fine-tune
        no_train, train_skipped_by = True, "--fixes-only prints without waiting for it: run rocmcheck smoke-train"
    if bundle is not None and save_bundle is not None:
        raise BadInput("--bundle and --out cannot be combined")
    if save_bundle is not None:  # fail now, not after the whole run
        from rocmcheck.safe.files import check_target

        check_target(save_bundle, force=force)
    if write_reference is not None:
        from rocmcheck.safe.files import check_target

        check_target(write_reference, force=force)
    site_rules = None
    if knowledge is not None:  # read and checked whole before anything runs: a bad file is exit 2 now
        from rocmcheck.knowledge.site import load_site_rules

        site_rules = load_site_rules(knowledge)

    if bundle is not None and (bundle_dir is not None or across_nodes):
        raise BadInput("--bundle replays a saved bundle: it cannot be combined with --bundle-dir or --across-nodes")
    from rocmcheck.probes.levels import level_problem

    problem = level_problem(level, duration, gpu_probes=not no_gpu_probes, replay=bundle is not None)
    if problem:
        raise BadInput(problem)
    if bundle is not None and python is not None:
        raise BadInput("--bundle replays a saved bundle: --python has nothing to run")
    from rocmcheck.facts.python_env import find_target

    target, passed_over = find_target(python) if bundle is None else (None, "")
    launch, node_bundle = _launch(bundle_dir, force, across_nodes, node_per_rank)
    started = time.time()

    from rocmcheck.doctor import DoctorOptions, load_bundle, run_doctor
    from rocmcheck.doctor import save_bundle as write_bundle
    from rocmcheck.report import render
    from rocmcheck.report.console import Stream
    from rocmcheck.report.json_report import build_report, dumps
    from rocmcheck.report.progress import Progress
    from rocmcheck.result import exit_code

    opts = DoctorOptions(expected_archs=expected, only=only, skip=skip, gpu_probes=not no_gpu_probes,
                         train=not no_train, deadline_s=deadline, launch=launch, across_nodes=across_nodes,
                         across_timeout_s=across_timeout, level=level, duration_s=duration, python=target,
                         site_rules=site_rules, train_skipped_by=train_skipped_by or "--no-train")
    facts = None
    if bundle is not None:
        facts = load_bundle(bundle)
    # stdout carries the report; with --json or --fixes-only it carries nothing else, so progress goes to stderr.
    # One doctor per node under a launcher prints one line per node (below) unless asked for more.
    node_line = node_bundle is not None and not as_json and not verbose
    quiet_stdout = as_json or fixes_only or node_line or as_summary
    out = render.console()
    progress_console = render.console(stderr=True) if quiet_stdout else out
    stream = None if quiet_stdout else Stream(out, verbose=verbose)
    with Progress(progress_console, plain=not quiet_stdout or progress_console.is_terminal,
                  prefix="doctor ") as progress:
        if stream is not None:
            stream.title("rocmcheck doctor" + (f" (replaying {bundle})" if bundle else ""))

        def on_results(new, revised):
            if stream is not None:
                stream.results(new, revised)
                progress.printed()

        run = run_doctor(opts, facts, on_results=on_results, progress=progress)
    write_error = None
    if save_bundle is not None:
        from rocmcheck.safe.files import describe_write_error

        try:
            write_bundle(run, save_bundle, force=force)
        except OSError as exc:  # the report still prints; the old file (if any) is untouched
            write_error = describe_write_error(save_bundle, exc) + " (an existing file is unchanged)"
    if node_bundle is not None:
        try:
            write_bundle(run, node_bundle, force=force)
        except OSError as exc:
            write_error = describe_write_error(node_bundle, exc)
    if write_reference is not None:
        from rocmcheck.doctor import write_reference as write_ref
        from rocmcheck.safe.files import describe_write_error

        try:
            _, recorded = write_ref(run, write_reference, force=force)
            what = ", ".join(recorded) or "nothing known to record"
            click.echo(render.clean(f"Reference written to {write_reference}: {what} (read it back with --knowledge)"),
                       err=True)
        except OSError as exc:
            write_error = describe_write_error(write_reference, exc) + " (an existing file is unchanged)"
    machine = run.machine_summary()
    if node_line:
        counts = {s: sum(1 for r in run.results if r.status.value == s) for s in ("fail", "warn", "pass")}
        where = (f"node {launch.node_rank} of {launch.nnodes}" if launch.node_rank is not None else "node")
        click.echo(render.clean(f"{launch.hostname} ({where}, {launch.launcher}): {render.verdict(run.results)}, "
                                f"{counts['fail']} fail, {counts['warn']} warn, {counts['pass']} pass; "
                                f"bundle {node_bundle}"))
    elif as_json:
        click.echo(dumps(build_report(run.results, machine, run.duration_s, run.source)))
    elif fixes_only:
        render.print_fixes(run.results, heading=False)
    elif as_summary:
        from rocmcheck.triage.summary import render_summary

        click.echo(render.clean(render_summary(run.facts, run.context, run.results)), nl=False)
    else:
        stream.finish(run.results, header=[machine.get("headline") or "", _stack_line(run.facts)]
                      + ([passed_over] if passed_over else []))
        if save_bundle is not None and write_error is None:
            out.print(f"Bundle written to {render.clean(save_bundle)}", markup=False)
    if write_error:
        click.echo(f"Error: {write_error}", err=True)
        sys.exit(2)
    code = exit_code(run.results)  # the one rule (rocmcheck/result.py): 0 judged, 1 failed, 3 nothing judged
    if code == 0 and fail_on == "warn" and any(r.status.value == "warn" for r in run.results):
        code = 1  # --fail-on warn: a warning fails the job as well
    if code != 0 and node_per_rank and node_bundle is not None:
        _wait_for_peer_bundles(node_bundle.parent, _peer_bundles(launch), started, across_timeout)
    sys.exit(code)


STACK_PACKAGES = ("torch", "transformers", "accelerate", "peft", "deepspeed", "flash-attn", "bitsandbytes")


def _stack_line(facts) -> str:
    """The header's second line: the Python the stack was judged in, and the versions of its training stack."""
    from rocmcheck.facts.python_env import TargetPython

    versions = facts.packages or {}
    platform = facts.platform or {}
    where = platform.get("executable") or ""
    source = platform.get("python_source")
    if source:  # another interpreter than rocmcheck's own: say which, and why that one
        where += f", {TargetPython(where, source).describe()}"
    parts = [f"Python {platform.get('python') or '?'}" + (f" ({where})" if where else "")]
    if platform.get("python_error"):
        parts.append(f"not read: {platform['python_error']}")
    parts += [f"{name} {versions[name]}" for name in STACK_PACKAGES if versions.get(name)]
    return "stack: " + ", ".join(parts)


def _bundle_name(hostname: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in hostname) or "node"
    return f"{safe}.json"


def _peer_bundles(launch) -> list[str]:
    """--node-per-rank: the bundle names of the launch's other ranks (facts/launch.py: node_per_rank names them)."""
    base = launch.hostname.rsplit(f"-rank{launch.rank}", 1)[0]
    return [_bundle_name(f"{base}-rank{r}") for r in range(launch.world_size) if r != launch.rank]


def _wait_for_peer_bundles(folder: Path, names: list[str], since: float, timeout_s: float) -> list[str]:
    """Before a rank exits non-zero: torchrun ends every other rank the moment one does, so a slower rank would
    never write its bundle and compare would lack it. Wait (bounded by --across-timeout) until each other rank's
    bundle has been written since this run began; the names still missing, said on stderr."""
    from rocmcheck.safe.text import one_line

    if not names:
        return []
    click.echo(f"doctor: waiting up to {timeout_s:g} s for the other {len(names)} rank(s)' bundles in "
               f"{one_line(str(folder))} (the launcher ends every rank when one exits non-zero)", err=True)
    deadline = time.monotonic() + timeout_s
    missing = list(names)
    while missing:
        missing = [n for n in missing if not _written_since(folder / n, since)]
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(PEER_POLL_S)
    if missing:
        click.echo(f"doctor: not written within {timeout_s:g} s: {one_line(', '.join(missing))}", err=True)
    return missing


def _written_since(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since - 1  # the bundle is written whole, then renamed into place
    except OSError:
        return False


def _launch(bundle_dir: Path | None, force: bool, across_nodes: bool, node_per_rank: bool):
    """(the launch this process is part of, the bundle file it writes) or (None, None) outside the per-node
    mode. Every process but one per node leaves here, quietly, exit 0."""
    if bundle_dir is None and not across_nodes and not node_per_rank:
        return None, None
    import os
    import platform

    from rocmcheck.facts.launch import node_per_rank as stand_in
    from rocmcheck.facts.launch import read_launch, visible_for_rank

    launch = read_launch(os.environ, platform.node() or "localhost")
    if node_per_rank:
        os.environ.update(visible_for_rank(os.environ, launch.local_rank))  # the children inherit it
        launch = stand_in(launch)
    if not launch.leads_node:
        sys.exit(0)  # the node's local rank 0 does the node's work
    if bundle_dir is None:
        return launch, None
    target = bundle_dir / _bundle_name(launch.hostname)
    if target.exists() and not force:  # fail now, not after the whole run
        raise BadInput(f"{target} exists (use --force to replace it)")
    if bundle_dir.exists() and not bundle_dir.is_dir():
        raise BadInput(f"--bundle-dir {bundle_dir} is not a directory")
    try:
        bundle_dir.mkdir(parents=True, exist_ok=True)  # the shared folder: every node may be first
    except OSError as exc:
        raise BadInput(f"cannot create --bundle-dir {bundle_dir}: {exc.strerror or exc}") from None
    return launch, target
