"""Helpers the paste readers share: bounded clean lines, and the words tools print for "not known"."""

from __future__ import annotations

import re
from typing import Any

from rocmcheck.facts.parsers._text import strip_ansi, to_text

# A reader looks at no more than this of a text, and no more than this of one line: a paste of many MB is read in
# bounded time and memory (the splitter has already cut its blocks to size; a reader called on raw text is cut here).
MAX_READ_LINES = 200_000
MAX_READ_LINE_CHARS = 16_384

# What tools print where a value is not known or does not apply. "N/A" from collect_env means "not a CUDA build",
# "Could not collect" that it could not find out; both leave the value None (the raw text stays in `fields`).
_UNKNOWN = {"", "n/a", "na", "none", "could not collect", "no cuda", "unknown", "not available", "[n/a]", "-",
            "not supported", "[not supported]", "not set", "null"}


def read_lines(text: Any) -> list[str]:
    """The text's lines: colour codes and control bytes removed, trailing spaces kept out, each line and the
    number of lines bounded. Never raises."""
    raw = to_text(text)
    out: list[str] = []
    pos, size = 0, len(raw)
    while pos < size and len(out) < MAX_READ_LINES:
        end = raw.find("\n", pos)
        if end < 0:
            end = size
        line = raw[pos:min(end, pos + MAX_READ_LINE_CHARS)].rstrip("\r")
        if "\r" in line:
            line = line.rsplit("\r", 1)[-1] or line
        if "\x1b" in line or "^[" in line or _CONTROL.search(line, 0, 64):
            line = strip_ansi(line)
        out.append(line.rstrip())
        pos = end + 1
    return out


def known(value: str | None) -> str | None:
    """The value, or None when the tool printed one of its words for "not known"."""
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _UNKNOWN else v


def as_bool(value: str | None) -> bool | None:
    """True/False from "True", "Yes", "(True)"; None for anything else."""
    v = (value or "").strip().strip("()").lower()
    if v in ("true", "yes", "1"):
        return True
    if v in ("false", "no", "0"):
        return False
    return None


_PEP503 = re.compile(r"[-_.]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def normalize_name(name: str) -> str:
    """A package name as pip compares them (PEP 503): "PyYAML" -> "pyyaml", "typing_extensions" ->
    "typing-extensions"."""
    return _PEP503.sub("-", name.strip()).lower()
