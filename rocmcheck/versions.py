"""The one way rocmcheck reads and compares versions: packaging's Version, lenient about the shapes tools print.

Tools print more than PEP 440: hipconfig "6.2.41133-dd7f95766", a file's " 6.3.1\n", uname -r "6.8.0-52-generic",
a dkms module "6.12.12-2164967.24.04". parse() takes the PEP 440 reading when there is one and otherwise the leading
dotted release; series() is the major.minor a release line is named by ("6.3"), from any of them.
"""

from __future__ import annotations

import re

from packaging.version import Version

_RELEASE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def parse(text: object) -> Version | None:
    """A Version from a tool's version text; None when it holds no version."""
    if text is None:
        return None
    raw = str(text).strip()
    try:
        return Version(raw)
    except ValueError:  # InvalidVersion, or more digits than int() takes
        pass
    m = _RELEASE.match(raw)
    if not m:
        return None
    try:
        return Version(m.group(1))
    except ValueError:  # more digits than int() takes
        return None


def series(text: object) -> str | None:
    """"6.3" from " 6.3.1", "6.3.42131-abc" or "6.3"; None when the text has no major.minor."""
    v = parse(text)
    if v is None or len(v.release) < 2:
        return None
    return f"{v.release[0]}.{v.release[1]}"


def release(text: object, parts: int = 2) -> tuple[int, ...] | None:
    """The first `parts` numbers of the release ((4, 36) from "4.36.2"), zero-padded; None without a version."""
    v = parse(text)
    if v is None:
        return None
    return tuple((v.release + (0,) * parts)[:parts])


def within(version: object, listed: object) -> bool:
    """Whether version belongs to the listed one, which may name fewer parts: "12.7" within "12", "22.04" within
    "22.04", "9.4" not within "9.5"."""
    v, lv = parse(version), parse(listed)
    if v is None or lv is None:
        return False
    return v.release[:len(lv.release)] == lv.release


def at_least(text: object, minimum: str) -> bool | None:
    """text >= minimum (by release numbers, pre-releases of the minimum counted as below it); None when unreadable."""
    v = parse(text)
    return None if v is None else v >= Version(minimum)
