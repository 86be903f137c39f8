"""Small text helpers every parser shares. None of them raises on odd input."""

from __future__ import annotations

import re
from typing import Any

# CSI escape sequences, as real ESC bytes (rocminfo colours its errors red)
# or as the literal caret text "^[3m" that a terminal copy leaves behind (rocm-smi fixture).
_ANSI = re.compile(r"(?:\x1b|\^\[)\[?[0-9;?]*[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# What strip_ansi (so clean_lines and the paste readers' read_lines) may remove from a line: control and invisible
# characters, escape sequences, caret colour codes. Where none is in a text, a literal is in a cleaned line only if it
# is in the text: a reader may look for its literal in the whole text first, and read no line when it is not there.
MAY_HIDE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                      r"\u2066-\u2069\ufeff\U000e0000-\U000e007f]|\^\[")
_LEADING_INT = re.compile(r"^\s*(-?[0-9]+)")
# A whole number longer than this is no count, size or index any tool prints (2**64 has 20 digits): it is damage,
# and Python's int() refuses more than 4300 digits with a ValueError.
MAX_INT_DIGITS = 30
# The key up to its last non-space before the first colon, the value without its trailing spaces: each read in one
# pass (lazy `([^:]+?)\s*:` and `(.*?)\s*$` retried at each position of a run of spaces: quadratic in the line).
_KEY_VALUE = re.compile(r"^\s*+([^:]*[^:\s]|[^:])\s*:+\s*((?:.*\S)?)\s*$")


def to_text(text: Any) -> str:
    """Whatever a caller hands us (str, bytes, None) as a str."""
    if text is None:
        return ""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    return text if isinstance(text, str) else str(text)


def strip_ansi(line: str) -> str:
    """The line without escape sequences (rocmcheck's one sanitiser, which also drops OSC/DCS strings whole) and
    without the caret-text form of colour codes."""
    from rocmcheck.safe.text import clean

    return _CONTROL.sub("", _ANSI.sub("", clean(line)))


def folded(text: str) -> str:
    """The text case-folded as re.IGNORECASE compares: a lower-case literal of a case-insensitive pattern is in it
    wherever the pattern can match (the dotless i matches i there; casefold() folds the long s and the Kelvin sign)."""
    out = text.casefold()
    return out.replace("\u0131", "i") if "\u0131" in out else out


def clean_lines(text: Any) -> list[str]:
    """Lines without colour codes, control bytes or trailing spaces; CRLF and CR endings handled."""
    return [strip_ansi(line).rstrip() for line in to_text(text).splitlines()]


def to_int(digits: str | None) -> int | None:
    """A run of ASCII digits (optionally signed) as an int; None when it is not one or has more than
    MAX_INT_DIGITS digits."""
    text = (digits or "").strip()
    bare = text[1:] if text[:1] in "+-" else text
    if not (bare.isascii() and bare.isdigit()) or len(bare) > MAX_INT_DIGITS:
        return None
    return int(text)


def leading_int(value: str | None) -> int | None:
    """29857 from "29857(0x74a1)", 64 from "64(0x40)", None from "N/A"."""
    if not value:
        return None
    m = _LEADING_INT.match(value)
    return to_int(m.group(1)) if m else None


def split_key_value(line: str) -> tuple[str, str] | None:
    """("Chip ID", "29857(0x74a1)") from "  Chip ID:   29857(0x74a1)"; the value may itself hold colons."""
    m = _KEY_VALUE.match(line)
    if not m or not m.group(1).strip():
        return None
    return m.group(1).strip(), m.group(2)


def printable(line: str, limit: int = 300) -> str:
    """A line safe to show a person: printable characters only, bounded length."""
    return "".join(ch for ch in line if ch.isprintable())[:limit].strip()


def none_if_na(value: str | None) -> str | None:
    """Tools print "N/A", "[N/A]", "[Not Supported]" for unknown values."""
    if value is None:
        return None
    v = value.strip()
    if not v or v.strip("[]").strip().lower() in {"n/a", "na", "not supported", "unknown", "none", "-"}:
        return None
    return v
