"""The one exception for input a person must fix: a bad flag value, a file that cannot be read or written, a
config or bundle that does not parse, an arch nobody knows. `rocmcheck.cli.main` prints it as one line
("Error: ...") on stderr and exits 2 (result.EXIT_BAD_INPUT), for every command alike. Imports nothing."""

from __future__ import annotations


class BadInput(ValueError):
    """Input a person must fix. The message is the whole line shown: say what is wrong and with which input."""
