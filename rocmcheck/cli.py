"""Command line: parses options and calls one function per command. Subcommands load lazily so
`rocmcheck --help` and `rocmcheck doctor` never pay for modules they do not use."""

from __future__ import annotations

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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rocmcheck")
def cli() -> None:
    """Can this machine fine-tune LLaMA-class models on ROCm (or CUDA)? rocmcheck finds out and says what to fix."""


def _stop(code: int) -> None:
    """Leave at once and leave nothing behind: every tool, probe child and training rank started through the
    runner is killed (they run in their own process groups, so the terminal's Ctrl-C does not reach them).
    os._exit, because worker threads still waiting on those children would otherwise be joined first."""
    from rocmcheck.runner import kill_live_children

    kill_live_children()
    _flush_streams()
    os._exit(code)


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream
            pass


def _on_sigterm(signum: int, frame: object) -> None:
    print("rocmcheck: terminated", file=sys.stderr, flush=True)
    _stop(128 + signum)


def main() -> None:
    """Errors a person causes end as ONE line on stderr and exit 2: click's standalone mode would print a usage
    block first, so its exceptions are caught here for every command alike. Ctrl-C exits 130 and SIGTERM 143,
    with every child process ended."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    from rocmcheck.safe.text import install_console_streams

    install_console_streams()  # no escape sequence from data reaches the terminal; no UnicodeEncodeError
    try:
        result = cli.main(prog_name="rocmcheck", standalone_mode=False)
        code: int | str | None = result if isinstance(result, int) else 0
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `rocmcheck`: the help, not an error line
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        sys.exit(0)
    except click.ClickException as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except BadInput as exc:  # the one bad-input type (rocmcheck/errors.py): one line, exit 2
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        print("rocmcheck: interrupted", file=sys.stderr, flush=True)
        _stop(130)
    except SystemExit as exc:  # a command's own sys.exit(code)
        code = exc.code
    _leave(code)


def _leave(code: int | str | None) -> None:
    """End the process with `code` once a command is done. After torch was imported, the interpreter's own
    teardown (freeing every module and object of torch and transformers, one by one) adds a second or more to
    a smoke-train (benchmarks/RESULTS.md, section 17); so then the threads are joined, the atexit handlers
    run and the streams are flushed as at a normal exit, and the process ends without that teardown. A message
    (sys.exit("...")) takes the interpreter's own way out, which prints it."""
    if "torch" not in sys.modules or not (code is None or isinstance(code, int)):
        sys.exit(code)
    import atexit
    import threading

    for thread in threading.enumerate():  # as the interpreter would: wait for the non-daemon threads
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    _flush_streams()
    os._exit(code or 0)
