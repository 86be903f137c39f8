"""`rocmcheck monitor -- COMMAND ...`: run a training command unchanged and watch its GPUs; `--pid PID` attaches to
one already running; `--replay FILES` judges recorded curves (several nodes' files merge). The verdicts go to
stderr and to verdict-<host>.json, so the command's own stdout stays exactly its own.

Exit code: when the watched command failed (a non-zero exit, a signal, --timeout, not found), the command's;
otherwise the one rule (rocmcheck.result.exit_code): 0 judged and nothing failed, 1 a verdict failed, 3 nothing
could be judged (no GPU reader, a run too short). 2 is bad input, before anything runs."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import sys
from pathlib import Path

import click

from rocmcheck.commands.options import MAX_SECONDS, BoundedInt, FiniteFloat
from rocmcheck.errors import BadInput
from rocmcheck.report import render
from rocmcheck.result import CheckResult, exit_code
from rocmcheck.safe.text import excerpt, one_line

MAX_PID = 1 << 22  # Linux's pid_max ceiling (PID_MAX_LIMIT)
# How much of the watched command the stderr header shows (all of it, redacted, is in verdict-<host>.json).
HEADER_COMMAND_CHARS = 80
# Default folders taken in the same second (one monitor per task of a node) get a suffix: -2, -3, ...
MAX_DEFAULT_FOLDERS = 1000


def _print_results(results: list[CheckResult], files: list[Path], header: str) -> None:
    """The verdicts through the one renderer, on stderr: the command's own stdout stays exactly its own."""
    console = render.console(stderr=True)
    render.print_report(results, console, title=header, verbose=True)
    if files:
        console.print(render.clean("files: " + ", ".join(str(f) for f in files)), markup=False, soft_wrap=True)


def _check_verdict_target(out_dir: Path, host: str, force: bool) -> None:
    """verdict-<host>.json and memory-<host>.png in out_dir, checked before any work (an existing one is kept
    unless --force; a link is never written through)."""
    from rocmcheck.safe.files import check_target

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create {excerpt(out_dir)}: {exc.strerror or exc}") from None
    for name in (f"verdict-{host}.json", f"memory-{host}.png"):
        check_target(out_dir / name, force=force)


def _finish(samples, watched, out_dir: Path | None, host: str, header: str, extra: dict,
            force: bool) -> list[CheckResult]:
    from rocmcheck.monitor.curve import judge_curves
    from rocmcheck.monitor.output import plot
    from rocmcheck.monitor.wrap import curves
    from rocmcheck.report.json_report import envelope
    from rocmcheck.safe.files import describe_write_error, write_atomic

    results = judge_curves(curves(samples, watched))
    files: list[Path] = []
    if out_dir is not None:
        capacity = {}
        for s in samples:
            if s.total_bytes:
                capacity[f"{s.host}:{s.gpu}" if s.host else str(s.gpu)] = s.total_bytes
        verdict_path = out_dir / f"verdict-{host}.json"
        document = json.dumps(envelope("monitor", results, **extra), indent=2, default=str) + "\n"
        for what, write in (("plot", lambda: plot([s for s in samples if watched is None or s.gpu in watched],
                                                  out_dir / f"memory-{host}.png", capacity, force)),
                            ("verdict", lambda: write_atomic(verdict_path, document, force=force))):
            try:
                write()
            except (OSError, BadInput) as exc:  # a full disk at the end, a file that appeared since the start:
                why = one_line(describe_write_error(out_dir, exc))
                click.echo(f"rocmcheck monitor: {why} (the {what} is not saved)", err=True)  # the verdicts still print
        files = [p for p in (out_dir / f"memory-{host}.csv", out_dir / f"memory-{host}.jsonl",
                             out_dir / f"memory-{host}.png", verdict_path) if p.exists()]
    _print_results(results, files, header)
    return results


def _default_out() -> Path:
    """./rocmcheck-monitor-<date>-<time>, created now; when another monitor took it in the same second, the next
    free -2, -3, ... (mkdir is atomic: two monitors never get one folder)."""
    stem = f"rocmcheck-monitor-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, MAX_DEFAULT_FOLDERS + 1):
        path = Path(stem if n == 1 else f"{stem}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise BadInput(f"cannot create {path}: {exc.strerror or exc} (choose a folder with --out)") from None
    raise BadInput(f"{MAX_DEFAULT_FOLDERS} folders {stem}-N exist already: choose one with --out")


def _ending(outcome) -> str:
    if outcome.timed_out:
        return "timed out"
    return f"exit {outcome.exit_code}" if outcome.exit_code is not None else "ended"


def _exit(results: list[CheckResult], command_code: int | None) -> None:
    """The watched command's failure first; otherwise the one rule."""
    sys.exit(command_code if command_code else exit_code(results))


# The GPU readers by the vendor they read, for the one line per family said when none starts.
READER_FAMILIES = {"NVIDIA": ("nvml", "nvidia-smi"), "AMD": ("amdsmi", "amd-smi", "rocm-smi")}
REASON_CHARS = 60


def _short_reason(reason: str) -> str:
    low = reason.lower()
    if "not found on path" in low:
        return "not installed"
    if any(w in low for w in ("librarynotfound", "shared object", "could not load", "no module named")):
        return "library not found"
    return excerpt(reason.split(" (", 1)[0], REASON_CHARS)


def reader_lines(problems: list[str]) -> list[str]:
    """open_reader's "name: why" per reader -> one short line per family: "  AMD: amdsmi library not found,
    amd-smi not installed, rocm-smi not installed" (the whole of each reason stays in the verdicts' JSON)."""
    why = dict(p.split(": ", 1) if ": " in p else (p, "") for p in problems)
    lines = []
    for family, names in READER_FAMILIES.items():
        said = [f"{name} {_short_reason(why[name])}" for name in names if name in why]
        if said:
            lines.append(f"  {family}: " + ", ".join(said))
    return lines


@click.command("monitor", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--interval", type=FiniteFloat(0.05, MAX_SECONDS), default=1.0, show_default=True,
              help="Seconds between readings.")
@click.option("--pid", type=BoundedInt(1, MAX_PID), default=None,
              help="Attach to this running process (and its children) instead of running a command.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for memory-<host>.csv/.jsonl/.png and verdict-<host>.json "
                   "[default: ./rocmcheck-monitor-<date>-<time>].")
@click.option("--force", is_flag=True, help="Replace this node's files in --out if they exist.")
@click.option("--backend", type=click.Choice(["auto", "nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi"]),
              default="auto", show_default=True, help="How GPUs are read (auto: bindings first, then the CLIs).")
@click.option("--timeout", type=FiniteFloat(0, MAX_SECONDS, low_open=True), default=None,
              help="Stop after this many seconds: SIGTERM to the command's process group, SIGKILL 15 s later "
                   "(exit 124); with --pid, stop watching.")
@click.option("--replay", "replay", type=click.Path(exists=True, path_type=Path), multiple=True,
              help="Judge recorded memory-*.jsonl/.csv files or folders (several nodes merge) instead of running.")
@click.option("--quiet", is_flag=True, help="No live status line.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def monitor(interval: float, pid: int | None, out_dir: Path | None, force: bool, backend: str,
            timeout: float | None, replay: tuple[Path, ...], quiet: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND unchanged and watch the GPUs it uses: memory, power, utilisation, temperature, clocks.

    \b
      rocmcheck monitor -- torchrun --nproc-per-node 8 train.py --config c.yaml
      rocmcheck monitor --pid 12345
      rocmcheck monitor --replay rocmcheck-monitor-20260101-120000/
    At the end (or Ctrl-C): is the memory curve flat, a sawtooth back to a baseline, or a staircase heading
    for out-of-memory, and how close the peak came to the GPU's capacity.

    \b
    Exit code: the command's when it failed (128+N for signal N, 124 after --timeout, 127 not found, 126 cannot
    run); otherwise 0 judged and nothing failed (warnings included), 1 a verdict failed, 3 nothing could be
    judged (no GPU reader here, a run too short); 2 bad input."""
    from rocmcheck.monitor.output import StatusLine
    from rocmcheck.monitor.recording import read_recordings
    from rocmcheck.monitor.sampler import open_reader
    from rocmcheck.monitor.wrap import CannotRun, Monitor, redacted_command, this_host

    modes = sum([bool(command), pid is not None, bool(replay)])
    if modes != 1:
        raise BadInput("give exactly one of: a command (after --), --pid PID, --replay FILES")
    if command and command[0].startswith("-") and command[0] != "-":
        raise BadInput(f"no such option: {command[0][:80]} (the command to watch goes after --)")
    if replay:
        samples = read_recordings(replay)
        if not samples:
            raise BadInput(f"no readings in {', '.join(map(str, replay))} (expected memory-*.jsonl or .csv)")
        hosts = sorted({s.host for s in samples if s.host}) or ["recorded"]
        host = "merged" if len(hosts) > 1 else hosts[0]
        if out_dir is not None:
            _check_verdict_target(out_dir, host, force)
        results = _finish(samples, None, out_dir, host,
                          f"rocmcheck monitor: {len(samples)} readings from {len(hosts)} node(s)", {"replay": True},
                          force)
        _exit(results, None)
    if pid is not None and not os.path.exists(f"/proc/{pid}"):
        raise BadInput(f"no process {pid}")
    reader, problems = open_reader(backend)
    if reader is None:  # nothing to record: no files, and the verdicts say nothing could be judged
        unwritten = f"; nothing is written to {excerpt(out_dir)}" if out_dir is not None else ""
        click.echo("rocmcheck monitor: no GPU reader, running without sampling" + unwritten, err=True)
        for line in reader_lines(problems):
            click.echo(line, err=True)
        out_dir = None
    host, status = this_host(), None
    try:
        out_dir = out_dir or (_default_out() if reader is not None else None)
        if out_dir is not None:
            _check_verdict_target(out_dir, host, force)
        status = None if quiet or reader is None else StatusLine(sys.stderr)
        mon = Monitor(reader, interval=interval, out_dir=out_dir, host=host, status=status, timeout=timeout,
                      force=force)
    except BadInput:
        if status is not None:
            status.clear()
        if reader is not None:
            reader.close()
        raise
    mon.outcome.reader_problems = problems
    shown = redacted_command(list(command))
    try:
        if pid is not None:
            outcome = mon.attach(pid)
        else:
            try:
                outcome = mon.run_command(list(command))
            except CannotRun as exc:
                click.echo(f"rocmcheck monitor: {exc}", err=True)
                sys.exit(exc.exit_code)
    finally:
        if reader is not None:
            reader.close()
    what = f"pid {pid}" if pid is not None else shlex.join(shown)[:HEADER_COMMAND_CHARS]
    header = (f"rocmcheck monitor: {what}: {_ending(outcome)} after {outcome.duration_s:.0f} s; "
              f"{len(outcome.samples)} readings via {outcome.reader or 'nothing'}"
              + (f"; watched {outcome.watched_by}" if outcome.watched else ""))
    extra = {"watched_command": shown, "pid": pid, "exit_code": outcome.exit_code, "reader": outcome.reader,
             "watched": outcome.watched, "watched_by": outcome.watched_by, "timed_out": outcome.timed_out,
             "duration_s": outcome.duration_s, "read_errors": outcome.read_errors,
             "reader_problems": outcome.reader_problems,
             "recording_stopped": mon.writer.failed if mon.writer is not None else None}
    results = _finish(outcome.samples, outcome.watched or None, out_dir, mon.host, header, extra, force)
    _exit(results, outcome.exit_code if pid is None else None)
