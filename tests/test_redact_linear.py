"""The redactor is linear in its input (rocmcheck/facts/redact.py): counted in steps, not timed.

redact_value(text, meter) counts the characters each regex call is handed and each handler reads past its match.
Rescanning a region from every position (the URL rule once took 34 s for 100 kB of one letter, hours for the
runner's 2 MB cap) makes that count grow with the square of the input; here it must stay under STEPS_PER_CHAR
per character on adversarial shapes: long runs of each pattern's character class and prefixes that nearly match
(benchmarks/bench_redact.py's ADVERSARIAL_UNITS, mixed by hypothesis). The count cannot see inside one regex
call; that each pattern reads a run once is what the wall-time check below (far above the measured figure, and
interrupting a runaway call) and the benchmark's table show."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocmcheck.facts.redact import Meter, redact_value

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_redact", REPO / "benchmarks" / "bench_redact.py")
bench_redact = importlib.util.module_from_spec(_spec)
sys.modules["bench_redact"] = bench_redact
_spec.loader.exec_module(bench_redact)

# Measured: at most 13.0 steps per character (`sshpass x ` then key=0123456789abcdefghij/ repeated: the count
# settles at 13 as the run grows, 7.0 without the prefix); real tool outputs 2 to 3. A rescan grows without bound.
STEPS_PER_CHAR = 16
# Measured on the 2-core CI box: at most 1.2 s per MB (benchmarks/bench_redact.py); a rescan is minutes.
WALL_S_FOR_256_KB = 10.0
UNITS = list(bench_redact.ADVERSARIAL_UNITS.values())


def _steps(text: str) -> int:
    meter = Meter()
    redact_value(text, meter)
    return meter.steps


@contextlib.contextmanager
def _within(seconds: float):
    """Interrupt the block past `seconds` (the regex engine checks for signals as it runs)."""
    def expire(signum, frame):
        raise TimeoutError(f"redaction took more than {seconds:g} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# A few units, each repeated, glued together: runs of one class next to near-misses of another rule.
_SHAPES = st.lists(st.tuples(st.sampled_from(UNITS), st.integers(1, 4000)), min_size=1, max_size=4).map(
    lambda parts: "".join(unit * n for unit, n in parts))


@settings(max_examples=80, deadline=None)
@given(text=_SHAPES)
def test_steps_stay_linear_on_adversarial_shapes(text):
    assert _steps(text) <= STEPS_PER_CHAR * len(text) + 64


@pytest.mark.parametrize("kind", list(bench_redact.ADVERSARIAL_UNITS))
def test_each_shape_at_256_kb_is_linear_in_steps_and_quick(kind):
    text = bench_redact.adversarial(kind, 256 * 1024)
    with _within(WALL_S_FOR_256_KB):
        assert _steps(text) <= STEPS_PER_CHAR * len(text) + 64


def test_the_count_grows_with_the_input_not_its_square():
    """The same shape at 16 kB and at 256 kB: the steps per character stay the same (a rescan multiplies them
    by the size)."""
    for unit in UNITS:
        small, large = (unit * (n // len(unit)) for n in (16_000, 256_000))
        per_small, per_large = _steps(small) / len(small), _steps(large) / len(large)
        assert per_large <= per_small * 1.2 + 0.1, (unit, per_small, per_large)


def test_real_tool_outputs_cost_a_few_steps_per_character():
    for kind in bench_redact.REAL_OUTPUTS:
        text = bench_redact.real(kind, 200_000)
        assert _steps(text) <= 4 * len(text), kind
