"""rocmcheck.versions: the one reading of version texts, on the shapes real tools print."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocmcheck.fixes import rocm_series, torch_index_url
from rocmcheck.versions import at_least, parse, release, series, within


def test_series_of_what_tools_print():
    assert series("6.2.41133-dd7f95766") == "6.2"  # hipconfig --version
    assert series(" 6.3.1\n") == "6.3"  # a version file with its whitespace
    assert series("6.8.0-52-generic") == "6.8"  # uname -r
    assert series("2.10.0+rocm7.13.0a20260416") == "2.10"
    assert series("6.2") == "6.2"
    assert series("6") is None and series("") is None and series(None) is None and series("rocm") is None


def test_a_padded_rocm_version_names_its_own_wheel_index():
    """A version read with its whitespace used to fall back to the default series, naming the wrong index."""
    assert rocm_series(" 6.3.1") == "6.3"
    assert torch_index_url("amd", " 6.3.1").endswith("/rocm6.3")


def test_within_and_order():
    assert within("22.04", "22.04") and within("12.7", "12") and not within("9.4", "9.5")
    assert within("15.6", "15.6") and not within("22.04", "24.04")
    assert at_least("7.0.2", "7.0") and not at_least("6.4.3", "7.0") and at_least(None, "1") is None
    assert release("4.36.2") == (4, 36) and release("5") == (5, 0)
    assert parse("6.10.5") > parse("6.8.5")  # numeric, not textual


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["", " ", "\n"]),
       st.sampled_from(["", "-119", "-dd7f95766", "+rocm6.2"]))
def test_series_is_major_minor_whatever_surrounds_it(major, minor, patch, space, tail):
    assert series(f"{space}{major}.{minor}.{patch}{tail}{space}") == f"{major}.{minor}"
