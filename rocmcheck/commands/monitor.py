"""`rocmcheck monitor -- COMMAND ...`: run a training command unchanged and watch its GPUs; `--pid PID` attaches to
one already running; `--replay FILES` judges recorded curves (several nodes' files merge). The verdicts go to
stderr and to verdict-<host>.json, so the command's own stdout stays exactly its own."""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from pathlib import Path

import click

from rocmcheck.commands.options import MAX_SECONDS, BoundedInt, FiniteFloat
from rocmcheck.errors import BadInput
from rocmcheck.report import render
from rocmcheck.result import CheckResult

MAX_PID = 1 << 22  # Linux's pid_max ceiling (PID_MAX_LIMIT)


def _print_results(results: list[CheckResult], files: list[Path], header: str) -> None:
    """The verdicts through the one renderer, on stderr: the command's own stdout stays exactly its own."""
    console = render.console(stderr=True)
    render.print_report(results, console, title=header, verbose=True)
    if files:
        console.print(render.clean("files: " + ", ".join(str(f) for f in files)), markup=False, soft_wrap=True)


def _finish(samples, watched, out_dir: Path | None, host: str, header: str, extra: dict) -> list[CheckResult]:
    from rocmcheck.monitor.curve import judge_curves
    from rocmcheck.monitor.output import plot
    from rocmcheck.monitor.wrap import curves

    verdicts = curves(samples, watched)
    results = judge_curves(verdicts)
    files: list[Path] = []
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        capacity = {}
        for s in samples:
            if s.total_bytes:
                capacity[f"{s.host}:{s.gpu}" if s.host else str(s.gpu)] = s.total_bytes
        png = plot([s for s in samples if watched is None or s.gpu in watched], out_dir / f"memory-{host}.png",
                   capacity)
        verdict_path = out_dir / f"verdict-{host}.json"
        from rocmcheck.report.json_report import envelope

        verdict_path.write_text(json.dumps(envelope("monitor", results, **extra), indent=2, default=str) + "\n")
        files = [p for p in (out_dir / f"memory-{host}.csv", out_dir / f"memory-{host}.jsonl", png, verdict_path)
                 if p is not None and p.exists()]
    _print_results(results, files, header)
    return results


def _default_out() -> Path:
    return Path(f"rocmcheck-monitor-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")


@click.command("monitor", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--interval", type=FiniteFloat(0.05, MAX_SECONDS), default=1.0, show_default=True,
              help="Seconds between readings.")
@click.option("--pid", type=BoundedInt(1, MAX_PID), default=None,
              help="Attach to this running process (and its children) instead of running a command.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for memory-<host>.csv/.jsonl/.png and verdict-<host>.json "
                   "[default: ./rocmcheck-monitor-<date>-<time>].")
@click.option("--backend", type=click.Choice(["auto", "nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi"]),
              default="auto", show_default=True, help="How GPUs are read (auto: bindings first, then the CLIs).")
@click.option("--timeout", type=FiniteFloat(0, MAX_SECONDS, low_open=True), default=None,
              help="Stop after this many seconds: SIGTERM to the command's process group, SIGKILL 15 s later "
                   "(exit 124); with --pid, stop watching.")
@click.option("--replay", "replay", type=click.Path(exists=True, path_type=Path), multiple=True,
              help="Judge recorded memory-*.jsonl/.csv files or folders (several nodes merge) instead of running.")
@click.option("--quiet", is_flag=True, help="No live status line.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def monitor(interval: float, pid: int | None, out_dir: Path | None, backend: str, timeout: float | None,
            replay: tuple[Path, ...], quiet: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND unchanged and watch the GPUs it uses: memory, power, utilisation, temperature, clocks.

    \b
      rocmcheck monitor -- torchrun --nproc-per-node 8 train.py --config c.yaml
      rocmcheck monitor --pid 12345
      rocmcheck monitor --replay rocmcheck-monitor-20260101-120000/
    At the end (or Ctrl-C): is the memory curve flat, a sawtooth back to a baseline, or a staircase heading
    for out-of-memory, and how close the peak came to the GPU's capacity. Exit code: the command's."""
    from rocmcheck.monitor.output import StatusLine, read_samples
    from rocmcheck.monitor.sampler import open_reader
    from rocmcheck.monitor.wrap import Monitor

    modes = sum([bool(command), pid is not None, bool(replay)])
    if modes != 1:
        raise BadInput("give exactly one of: a command (after --), --pid PID, --replay FILES")
    if replay:
        samples = read_samples(replay)
        if not samples:
            raise BadInput(f"no readings in {', '.join(map(str, replay))} (expected memory-*.jsonl or .csv)")
        hosts = sorted({s.host for s in samples if s.host}) or ["recorded"]
        results = _finish(samples, None, out_dir, "merged" if len(hosts) > 1 else hosts[0],
                          f"rocmcheck monitor: {len(samples)} readings from {len(hosts)} node(s)", {"replay": True})
        sys.exit(1 if any(r.status.is_problem for r in results) else 0)
    if pid is not None and not os.path.exists(f"/proc/{pid}"):
        raise BadInput(f"no process {pid}")
    out_dir = out_dir or _default_out()
    reader, problems = open_reader(backend)
    if reader is None:
        click.echo("rocmcheck monitor: no GPU reader (" + "; ".join(problems) + "); running without sampling",
                   err=True)
    status = None if quiet else StatusLine(sys.stderr)
    try:
        mon = Monitor(reader, interval=interval, out_dir=out_dir, status=status, timeout=timeout)
    except FileExistsError as exc:
        raise BadInput(f"{exc} exists; choose another --out folder") from None
    mon.outcome.reader_problems = problems
    try:
        if pid is not None:
            outcome = mon.attach(pid)
        else:
            try:
                outcome = mon.run_command(list(command))
            except FileNotFoundError:
                click.echo(f"rocmcheck monitor: {command[0]}: command not found", err=True)
                sys.exit(127)
            except PermissionError:
                click.echo(f"rocmcheck monitor: {command[0]}: permission denied", err=True)
                sys.exit(126)
    finally:
        if reader is not None:
            reader.close()
    what = f"pid {pid}" if pid is not None else " ".join(command)[:80]
    ending = ("timed out" if outcome.timed_out else
              f"exit {outcome.exit_code}" if outcome.exit_code is not None else "ended")
    header = (f"rocmcheck monitor: {what}: {ending} after {outcome.duration_s:.0f} s; "
              f"{len(outcome.samples)} readings via {outcome.reader or 'nothing'}"
              + (f"; watched {outcome.watched_by}" if outcome.watched else ""))
    extra = {"watched_command": list(command), "pid": pid, "exit_code": outcome.exit_code, "reader": outcome.reader,
             "watched": outcome.watched, "watched_by": outcome.watched_by, "timed_out": outcome.timed_out,
             "duration_s": outcome.duration_s, "read_errors": outcome.read_errors,
             "reader_problems": outcome.reader_problems}
    host = mon.host
    results = _finish(outcome.samples, outcome.watched or None, out_dir if reader is not None else None, host,
                      header, extra)
    if pid is not None:
        sys.exit(1 if any(r.status.is_problem for r in results) else 0)
    sys.exit(outcome.exit_code if outcome.exit_code is not None else 0)
