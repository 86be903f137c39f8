"""The one byte-unit module: constants and the formatter every command prints sizes with."""

from __future__ import annotations

from rocmcheck.units import GIB, KIB, MIB, UNIT_BYTES, fmt_bytes


def test_binary_units():
    assert (KIB, MIB, GIB) == (1024, 1024**2, 1024**3)
    # amd-smi's "MB" is MiB: 196592 MB is the 206141652992 B rocm-smi reports for the same MI300X.
    assert 196592 * UNIT_BYTES["MB"] == 206141652992
    assert UNIT_BYTES["GIB"] == UNIT_BYTES["GB"] == GIB


def test_fmt_bytes_digits_and_smallest_unit():
    assert fmt_bytes(141 * GIB) == "141.00 GiB" and fmt_bytes(141 * GIB, 1) == "141.0 GiB"
    assert fmt_bytes(512 * MIB) == "512.0 MiB" and fmt_bytes(512 * MIB, 1) == "512 MiB"
    assert fmt_bytes(3 * KIB) == "0.0 MiB"  # plan and monitor stop at MiB
    assert fmt_bytes(3 * KIB, smallest="B") == "3.0 KiB" and fmt_bytes(12, smallest="B") == "12 B"
    assert fmt_bytes(-2 * GIB) == "-2.00 GiB" and fmt_bytes(None) == "?"
