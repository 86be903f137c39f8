"""Command line: parses options and calls one function per command. Subcommands load lazily so
`rocmcheck --help` and `rocmcheck doctor` never pay for modules they do not use."""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys

import click

from rocmcheck import __version__
from rocmcheck.errors import BadInput
from rocmcheck.result import EXIT_BAD_INPUT

# name -> "module:attribute" of a click.Command. Each command lives in rocmcheck/commands/.
COMMANDS = {
    "doctor": "rocmcheck.commands.doctor:doctor",
    "probe": "rocmcheck.commands.probe:probe",
    "smoke-train": "rocmcheck.commands.smoke_train:smoke_train",
    "lint": "rocmcheck.commands.lint:lint",
    "recipes": "rocmcheck.commands.recipes:recipes",
    "build-env": "rocmcheck.commands.build_env:build_env",
    "plan": "rocmcheck.commands.plan:plan",
    "monitor": "rocmcheck.commands.monitor:monitor",
    "compare": "rocmcheck.commands.compare:compare",
    "triage": "rocmcheck.commands.triage:triage",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("rocmcheck"):
                return None  # command not built yet
            raise
        return getattr(module, attr)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """An unknown command is one line with the closest known one: `rocmcheck doctr` -> did you mean doctor."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            import difflib

            from rocmcheck.safe.text import excerpt

            close = difflib.get_close_matches(name, sorted(COMMANDS), n=1, cutoff=0.6)
            ctx.fail(f"no such command '{excerpt(name)}'" + (f"; did you mean {close[0]}?" if close else "")
                     + f" (commands: {', '.join(sorted(COMMANDS))})")
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rocmcheck")
def cli() -> None:
    """Can this machine fine-tune LLaMA-class models on ROCm (or CUDA)? rocmcheck finds out and says what to fix."""


# The signals that stop rocmcheck, and the word it says on the way out. Each one ends every process rocmcheck
# started (rocmcheck.runner.end_descendants: the commands run in sessions of their own, so neither the terminal's
# Ctrl-C nor its hangup reaches them) and exits 128 + its number, as a shell reports a process a signal ended.
# Every signal whose default would end rocmcheck without its sweep, and that it can catch: SIGQUIT (Ctrl-\\),
# SIGUSR1/SIGUSR2 (what batch scripts ask Slurm to send before a time limit: --signal=USR1@60) and SIGALRM end it
# like SIGTERM, every child ended first. (SIGKILL cannot be caught: rocmcheck.runner's parent-death signal and
# watchdog end the children then.)
STOP_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hangup",
                signal.SIGQUIT: "quit", signal.SIGUSR1: "user signal 1", signal.SIGUSR2: "user signal 2",
                signal.SIGALRM: "alarm"}
# Seconds from a stop signal to the exit, at most, whatever the sweep of children and scratch folders waits on. The
# sweep itself takes well under a second, but for removing a 7B's scratch checkpoint from /dev/shm (about 3 s,
# docs/smoke-train.md), which is worth waiting for: left there, it holds that much memory.
STOP_DEADLINE_S = 15
# stdout could not be written (a full disk, an I/O error): as for a closed pipe (click's own rule), exit 1.
EXIT_OUTPUT_FAILED = 1
# Commands that run a person's own command: what that command leaves behind is the person's, so rocmcheck does
# not adopt it (rocmcheck.runner.adopt_orphans) for those.
RUNS_A_PERSONS_COMMAND = frozenset({"monitor"})


class OutputError(OSError):
    """Writing or flushing stdout failed. An OSError with the same errno, so click still treats a closed pipe
    (EPIPE) its own way."""


class _GuardedOutput:
    """The real stdout, with its write errors told apart from any other OSError a command might let out."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)  # type: ignore[attr-defined,no-any-return]
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror) from None

    def flush(self) -> None:
        try:
            self._stream.flush()  # type: ignore[attr-defined]
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _guard_stdout() -> None:
    """Put _GuardedOutput under the console wrapper (install_console_streams), where click and the reports
    write."""
    stream = sys.stdout
    raw = getattr(stream, "raw_stream", None)
    if raw is not None and not isinstance(raw, _GuardedOutput):
        stream.raw_stream = _GuardedOutput(raw)  # type: ignore[union-attr]


def _say(line: str) -> None:
    """One line on stderr, which may be gone (a closed terminal after a hangup, a full disk) or in the middle of a
    write the signal interrupted (RuntimeError: a reentrant call)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError, RuntimeError):
        pass


def _stop(code: int) -> None:
    """Leave at once and leave nothing behind: every tool, probe child and training rank started through the
    runner is ended, and whatever they left (rocmcheck.runner.end_descendants). os._exit, because worker
    threads still waiting on those children would otherwise be joined first. So no `finally` runs, here or in
    the children: the temporary folders of this process and of the children now ended are removed here
    (rocmcheck.safe.scratch_folders.sweep_on_stop; a 7B's checkpoint in /dev/shm takes about 3 s of that)."""
    # A signal runs this between two bytecodes of whatever the main thread was doing: a buffered write it was in
    # the middle of (the watchdog's pipe, a stream) raises RuntimeError ("reentrant call") if written again here.
    # Nothing raised here may keep os._exit from running: the process would go on, its children with it.
    try:
        from rocmcheck.runner import end_descendants

        end_descendants()
    except BaseException:  # noqa: BLE001 - on the way out, nothing may stop the exit
        pass
    try:
        from rocmcheck.safe.scratch_folders import sweep_on_stop

        sweep_on_stop()
    except BaseException:  # noqa: BLE001
        pass
    _flush_streams()
    os._exit(code)


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):  # a closed pipe, a closed stream, a write the signal interrupted
            pass


def _clear_live_lines() -> None:
    """Erase the progress display's live line before the last word (rocmcheck.report.progress.clear_live_lines),
    so the terminal's last line is that word and no spinner is drawn after it. Taken from sys.modules, never
    imported here: a signal may arrive while the main thread holds the import lock, and a module not loaded has
    no line on the screen."""
    progress = sys.modules.get("rocmcheck.report.progress")
    if progress is not None:
        try:
            progress.clear_live_lines()
        except Exception:  # noqa: BLE001 - on the way out, nothing may stop the children's sweep
            pass


def _on_stop_signal(signum: int, frame: object) -> None:
    _exit_by_deadline(128 + signum)
    _clear_live_lines()
    _say(f"rocmcheck: {STOP_SIGNALS.get(signum, 'stopped')}")
    _stop(128 + signum)


def _exit_by_deadline(code: int) -> None:
    """Whatever the sweep below waits on (a lock another thread holds, a read of /proc that stalls), rocmcheck
    is gone STOP_DEADLINE_S after the signal: SIGALRM (one of the stop signals, caught here again) then exits at
    once with the same code. A timer, not a thread: starting a thread in a signal handler can wait forever on a
    lock the interrupted code holds."""
    try:
        signal.signal(signal.SIGALRM, lambda _signum, _frame: os._exit(code))
        signal.alarm(STOP_DEADLINE_S)
    except (OSError, ValueError):  # no alarm here: the sweep runs without a deadline
        pass


def _install_stop_signals() -> None:
    """One policy for SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM (_on_stop_signal). A signal
    that was ignored when rocmcheck started (nohup, a script's background job) stays ignored: that is what whoever
    started it asked for."""
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, _on_stop_signal)


def _output_failed(exc: OSError, code: int | str | None = None) -> int | str:
    """stdout cannot be written: one line on stderr (none for a closed pipe, as click does), fd 1 pointed at
    /dev/null so the exit's own flush cannot fail again, and a non-zero exit code."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass
    if exc.errno != errno.EPIPE:
        _say(f"rocmcheck: could not write the output: {exc.strerror or exc}")
    return code if code not in (0, None) else EXIT_OUTPUT_FAILED  # type: ignore[return-value]


def _command_name(argv: list[str]) -> str | None:
    """The subcommand asked for: the group's own options (--help, --version) take no value, so it is the first
    argument that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main() -> None:
    """Errors a person causes end as ONE line on stderr and exit 2: click's standalone mode would print a usage
    block first, so its exceptions are caught here for every command alike. SIGINT, SIGTERM, SIGHUP (and
    SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM) exit 128 + the signal (130, 143, 129, ...) with every child process
    ended; so does every exit (rocmcheck.runner). stdout that cannot be written (a full disk) is one line and exit 1."""
    _install_stop_signals()
    from rocmcheck.runner import adopt_orphans
    from rocmcheck.safe.text import install_console_streams, one_line

    if _command_name(sys.argv[1:]) not in RUNS_A_PERSONS_COMMAND:
        adopt_orphans()  # what a tool leaves (setsid, a daemon) stays below rocmcheck, to be ended with it
    install_console_streams()  # no escape sequence from data reaches the terminal; no UnicodeEncodeError
    _guard_stdout()
    code: int | str | None = 0
    try:
        from rocmcheck.commands.config import default_map

        defaults = default_map(lambda name: cli.get_command(click.Context(cli), name), sorted(COMMANDS))
        result = cli.main(prog_name="rocmcheck", standalone_mode=False, default_map=defaults)
        code = result if isinstance(result, int) else 0
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `rocmcheck`: the help, not an error line
        try:
            click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        except OutputError as failure:
            code = _output_failed(failure)
    except click.ClickException as exc:  # one line too: click echoes a bad value as it was given
        click.echo(f"Error: {one_line(exc.format_message())}", err=True)
        code = exc.exit_code
    except BadInput as exc:  # the one bad-input type (rocmcheck/errors.py): one line, exit 2, whatever data it holds
        click.echo(f"Error: {one_line(str(exc))}", err=True)
        code = EXIT_BAD_INPUT
    except OutputError as exc:
        code = _output_failed(exc)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        _clear_live_lines()
        _say("rocmcheck: interrupted")
        _stop(130)
    except SystemExit as exc:  # a command's own sys.exit(code)
        code = exc.code
    _leave(code)


def _leave(code: int | str | None) -> None:
    """End the process with `code` once a command is done. After torch was imported, the interpreter's own
    teardown (freeing every module and object of torch and transformers, one by one) adds a second or more to
    a smoke-train (benchmarks/RESULTS.md, section 17); so the process ends as every child does
    (rocmcheck.child.leave: threads joined, atexit handlers run, streams flushed, no teardown)."""
    from rocmcheck.runner import end_descendants
    from rocmcheck.safe.scratch_folders import sweep_gone

    end_descendants()  # nothing a command started outlives it (a straggler, what a tool left running)
    sweep_gone()  # the temporary folders of those, of a child ended at its timeout, of a run killed outright
    try:
        sys.stdout.flush()  # buffered output fails here when it fails (a full disk): say so while we can
    except OSError as exc:
        code = _output_failed(exc, code)
    from rocmcheck.child import leave

    leave(code)
