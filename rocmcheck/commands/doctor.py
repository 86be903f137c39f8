"""`rocmcheck doctor`: parse options, run the doctor, print the report, exit 0/1/2."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rocmcheck.commands.options import FiniteFloat

MAX_DEADLINE_S = 3600.0  # an hour for the fact collection: every tool has a 20 s limit of its own

STAGE_AREAS = {"probe", "train"}


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _validate_archs(archs: tuple[str, ...]) -> tuple[str, ...]:
    from rocmcheck.knowledge import arch_info, suggest_arch

    out = []
    for a in archs:
        if arch_info(a) is None:
            hint = suggest_arch(a)
            raise click.BadParameter(f"unknown arch {a!r}" + (f"; did you mean {hint}?" if hint else ""),
                                     param_hint="--arch")
        out.append(a.split(":", 1)[0])
    return tuple(out)


def _split_names(values: tuple[str, ...], flag: str) -> tuple[str, ...]:
    """--only/--skip values, comma-separated or repeated; an empty name is a mistake, not "everything"."""
    names = _split(values)
    if any(not v.strip() or any(not part.strip() for part in v.split(",")) for v in values):
        raise click.BadParameter("an empty name (give check ids or areas, see --list-checks)", param_hint=flag)
    return names


def _validate_names(names: tuple[str, ...], flag: str) -> None:
    from rocmcheck.checks import known_names
    from rocmcheck.probes.catalog import PROBE_NAMES

    known = known_names() | STAGE_AREAS | {f"probe.{p}" for p in PROBE_NAMES}
    for n in names:
        if n in known:
            continue
        import difflib

        if n.startswith("train."):  # the smoke-train stage is one run; its verdicts come together
            raise click.BadParameter(f"no check {n!r}: the smoke-train stage runs as a whole; use train",
                                     param_hint=flag)
        close = difflib.get_close_matches(n, sorted(known), n=1)
        raise click.BadParameter(f"no check or area {n!r}" + (f"; did you mean {close[0]}?" if close else "")
                                 + " (see --list-checks)", param_hint=flag)


def _nothing_selected(only: tuple[str, ...], skip: tuple[str, ...]) -> bool:
    from rocmcheck.checks import select_checks
    from rocmcheck.doctor import DoctorOptions, _stage_wanted

    opts = DoctorOptions(only=only, skip=skip)
    return not select_checks(only, skip) and not any(_stage_wanted(opts, area) for area in STAGE_AREAS)


@click.command()
@click.option("--arch", "archs", multiple=True, metavar="ARCH", help="The GPU arch you expect (gfx942, sm_90); a mismatch fails.")
@click.option("--json", "as_json", is_flag=True, help="Print the versioned JSON report instead of the table.")
@click.option("--list-checks", is_flag=True, help="List the check ids and exit.")
@click.option("--only", multiple=True, metavar="CHECK", help="Run only these checks or areas (repeat or comma-separate).")
@click.option("--skip", multiple=True, metavar="CHECK", help="Skip these checks or areas.")
@click.option("--no-gpu-probes", is_flag=True, help="Skip the GPU probe stage.")
@click.option("--no-train", is_flag=True, help="Skip the bundled smoke-train stage.")
@click.option("--save-bundle", type=click.Path(path_type=Path),
              help="Write every raw input the checks used to FILE (secrets redacted).")
@click.option("--force", is_flag=True, help="Replace an existing --save-bundle FILE.")
@click.option("--bundle", type=click.Path(path_type=Path),
              help="Re-run the checks on a saved bundle instead of this machine.")
@click.option("--deadline", type=FiniteFloat(1, MAX_DEADLINE_S), default=60.0, show_default=True,
              help="Seconds the fact collection may take in all; a tool still running then becomes a verdict.")
@click.option("-v", "--verbose", is_flag=True, help="Show the evidence of every verdict.")
def doctor(archs, as_json, list_checks, only, skip, no_gpu_probes, no_train, save_bundle, force, bundle, deadline,
           verbose):
    """Check this machine for fine-tuning LLaMA on ROCm (or CUDA): one verdict per check, each with a fix."""
    from rocmcheck.checks import select_checks

    if list_checks:
        for spec in select_checks():
            click.echo(f"{spec.id:<28} {spec.title}")
        click.echo(f"{'probe.*':<28} GPU probes (rocmcheck probe --list)")
        click.echo(f"{'train.*':<28} the bundled smoke-train (rocmcheck smoke-train --help)")
        return
    only, skip = _split_names(only, "--only"), _split_names(skip, "--skip")
    _validate_names(only, "--only")
    _validate_names(skip, "--skip")
    if _nothing_selected(only, skip):
        raise click.UsageError(f"nothing to run: --only {','.join(only) or '(all)'} --skip {','.join(skip)} "
                               "leaves no check selected")
    expected = _validate_archs(_split(archs))
    if bundle is not None and save_bundle is not None:
        raise click.UsageError("--bundle and --save-bundle cannot be combined")
    if save_bundle is not None:  # fail now, not after the whole run
        from rocmcheck.safe.files import WriteRefused, check_target

        try:
            check_target(save_bundle, force=force)
        except WriteRefused as exc:
            raise click.UsageError(str(exc)) from None

    from rocmcheck.doctor import BundleError, DoctorOptions, load_bundle, run_doctor, save_bundle as write_bundle

    opts = DoctorOptions(expected_archs=expected, only=only, skip=skip, gpu_probes=not no_gpu_probes,
                         train=not no_train, deadline_s=deadline)
    facts = None
    if bundle is not None:
        try:
            facts = load_bundle(bundle)
        except BundleError as exc:
            raise click.UsageError(str(exc)) from None
    run = run_doctor(opts, facts)
    write_error = None
    if save_bundle is not None:
        from rocmcheck.safe.files import describe_write_error

        try:
            write_bundle(run, save_bundle, force=force)
        except OSError as exc:  # the report still prints; the old file (if any) is untouched
            write_error = describe_write_error(save_bundle, exc) + " (an existing file is unchanged)"
    from rocmcheck.facts.redact import redact_tree

    machine = redact_tree(run.machine_summary())
    from rocmcheck.report.json_report import build_report, dumps, overall

    if as_json:
        click.echo(dumps(build_report(run.results, machine, run.duration_s, run.source)))
    else:
        from rocmcheck.report.console import render
        from rocmcheck.safe.text import safe_console

        console = safe_console()
        render(run.results, machine, console, verbose=verbose)
        if save_bundle is not None and write_error is None:
            console.print(f"Bundle written to {save_bundle}")
    if write_error:
        click.echo(f"Error: {write_error}", err=True)
        sys.exit(2)
    sys.exit(1 if overall(run.results) == "fail" else 0)
