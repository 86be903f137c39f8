"""The one exception every command raises for input a person must fix. Imports only click (no torch)."""

from __future__ import annotations

import click


class BadInput(click.ClickException):
    """A bad flag, file, arch or config: rocmcheck.cli.main prints it as one line ("Error: ...") on stderr and
    exits 2, like click's own usage errors but without the usage block, so every command fails the same way."""

    exit_code = 2
