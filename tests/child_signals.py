"""Starting a rocmcheck child for the signal tests: with its stop signals (INT, TERM, HUP, QUIT, USR1, USR2) at
their defaults.

A signal ignored when a program starts stays ignored (rocmcheck keeps it so, as nohup and a script's background
job ask), and a script runs its background jobs with SIGINT ignored: so a test suite started as
`python -m pytest ... &` from a script would hand its children an ignored SIGINT, and a Ctrl-C test would test
nothing. Every signal test starts its child through default_signals."""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def default_signals() -> None:
    """A Popen preexec_fn: the child starts with the stop signals at their default dispositions."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
