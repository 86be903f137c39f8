"""`rocmcheck doctor`: parse options, run the doctor, stream the report, exit 0/1/2."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rocmcheck.commands.options import Command, alias, json_option, resolve_archs

STAGE_AREAS = {"probe", "train"}


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _validate_names(names: tuple[str, ...], flag: str) -> None:
    from rocmcheck.checks import known_names

    known = known_names()
    for n in names:
        if n in known or n.split(".", 1)[0] in STAGE_AREAS:
            continue
        import difflib

        close = difflib.get_close_matches(n, sorted(known), n=1)
        raise click.BadParameter(f"no check or area {n!r}" + (f"; did you mean {close[0]}?" if close else "")
                                 + " (see --list-checks)", param_hint=flag)


@click.command(cls=Command)
@click.option("--arch", "archs", multiple=True, metavar="ARCH",
              help="The GPU you expect: an arch (gfx942, sm_90) or a product (mi300x, h100); a mismatch fails.")
@json_option()
@click.option("--fixes-only", is_flag=True, help="Print only the fixes, as lines to paste (nothing when all is well).")
@click.option("--list-checks", is_flag=True, help="List the check ids and exit.")
@click.option("--only", multiple=True, metavar="CHECK", help="Run only these checks or areas (repeat or comma-separate).")
@click.option("--skip", multiple=True, metavar="CHECK", help="Skip these checks or areas.")
@click.option("--no-gpu-probes", is_flag=True, help="Skip the GPU probe stage.")
@click.option("--no-train", is_flag=True, help="Skip the bundled smoke-train stage.")
@click.option("-o", "--out", "save_bundle", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write every raw input the checks used to FILE, a bundle (secrets redacted).")
@alias("--save-bundle", "save_bundle", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--bundle", type=click.Path(dir_okay=False, path_type=Path),
              help="Re-run the checks on a saved bundle instead of this machine.")
@click.option("--deadline", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Seconds the fact collection may take in all; a tool still running then becomes a verdict.")
@click.option("-v", "--verbose", is_flag=True, help="Show the evidence of every verdict.")
def doctor(archs, as_json, fixes_only, list_checks, only, skip, no_gpu_probes, no_train, save_bundle, bundle, deadline,
           verbose):
    """Check this machine for fine-tuning LLaMA on ROCm (or CUDA): one verdict per check, each with a fix.
    Verdicts print as each stage finishes; the fixes follow as lines to paste."""
    from rocmcheck.checks import select_checks

    if list_checks:
        for spec in select_checks():
            click.echo(f"{spec.id:<28} {spec.title}")
        click.echo(f"{'probe.*':<28} GPU probes (rocmcheck probe --list)")
        click.echo(f"{'train.*':<28} the bundled smoke-train (rocmcheck smoke-train --help)")
        return
    only, skip = _split(only), _split(skip)
    _validate_names(only, "--only")
    _validate_names(skip, "--skip")
    expected = resolve_archs(archs)
    if bundle is not None and save_bundle is not None:
        raise click.UsageError("--bundle and --out cannot be combined")
    if save_bundle is not None and not save_bundle.resolve().parent.is_dir():  # fail now, not after the whole run
        raise click.UsageError(f"cannot write bundle {save_bundle}: {save_bundle.resolve().parent} is not a directory")

    from rocmcheck.doctor import BundleError, DoctorOptions, load_bundle, run_doctor, save_bundle as write_bundle
    from rocmcheck.report import render
    from rocmcheck.report.console import Stream
    from rocmcheck.report.json_report import build_report, dumps
    from rocmcheck.report.progress import Progress

    opts = DoctorOptions(expected_archs=expected, only=only, skip=skip, gpu_probes=not no_gpu_probes,
                         train=not no_train, deadline_s=deadline)
    facts = None
    if bundle is not None:
        try:
            facts = load_bundle(bundle)
        except BundleError as exc:
            raise click.UsageError(str(exc)) from None
    # stdout carries the report; with --json or --fixes-only it carries nothing else, so progress goes to stderr.
    quiet_stdout = as_json or fixes_only
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
    if save_bundle is not None:
        try:
            write_bundle(run, save_bundle)
        except OSError as exc:
            raise click.UsageError(f"cannot write bundle {save_bundle}: {exc.strerror or exc}") from None
    machine = run.machine_summary()
    if as_json:
        click.echo(dumps(build_report(run.results, machine, run.duration_s, run.source)))
    elif fixes_only:
        render.print_fixes(run.results, heading=False)
    else:
        out.print(render.clean(machine.get("headline") or ""), markup=False)
        stream.finish(run.results)
        if save_bundle is not None:
            out.print(f"Bundle written to {render.clean(save_bundle)}", markup=False)
    sys.exit(1 if render.verdict(run.results) == "fail" else 0)
