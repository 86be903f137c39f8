"""The pastes a person names: files, or `-` for stdin, each read bounded through rocmcheck.safe. A FIFO, a folder, a
device, a file over MAX_PASTE_BYTES, an empty one and a binary one are each one line and exit 2 (BadInput)."""

from __future__ import annotations

import sys
from typing import BinaryIO

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import read_bytes_capped
from rocmcheck.safe.text import excerpt
from rocmcheck.units import MIB

# A GitHub comment holds at most 65 536 characters; a log attached to an issue is rarely over a few MB. The readers
# keep at most 4 MiB of a paste (rocmcheck/triage/readers/paste.py MAX_KEPT_CHARS); 8 MiB is far above that.
MAX_PASTE_BYTES = 8 * MIB
MAX_PASTES = 64
STDIN = "-"
# A text paste has no NUL byte; more than this share of bytes that are not UTF-8 is not text either.
MAX_UNDECODABLE_SHARE = 0.01


def read_inputs(names: tuple[str, ...] | list[str], stdin: BinaryIO | None = None) -> list[tuple[str, str]]:
    """(name, text) of each paste, in the order given."""
    if not names:
        raise BadInput("give the pastes to read: FILE... (or - for stdin)")
    if len(names) > MAX_PASTES:
        raise BadInput(f"{len(names)} pastes: at most {MAX_PASTES} at once")
    if list(names).count(STDIN) > 1:
        raise BadInput("- (stdin) given more than once")
    out = []
    for name in names:
        if name == STDIN:
            data = _read_stdin(stdin if stdin is not None else sys.stdin.buffer)
            shown = "stdin"
        else:
            data = read_bytes_capped(name, limit=MAX_PASTE_BYTES, what="paste")
            shown = excerpt(name)
        out.append((shown, _text(shown, data)))
    return out


def _read_stdin(stream: BinaryIO) -> bytes:
    try:
        data = stream.read(MAX_PASTE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"stdin cannot be read: {exc.strerror or exc}") from None
    if data is None:  # a non-blocking stream with nothing in it
        data = b""
    if len(data) > MAX_PASTE_BYTES:
        raise BadInput(f"stdin: more than a paste can be ({MAX_PASTE_BYTES // MIB} MiB)")
    return data


def _text(name: str, data: bytes) -> str:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise BadInput(f"{name}: a binary file (a NUL byte at offset {nul}), not a paste")
    text = data.decode("utf-8-sig", errors="replace")
    bad = text.count("\ufffd")
    if bad and bad > MAX_UNDECODABLE_SHARE * max(1, len(text)):
        raise BadInput(f"{name}: not UTF-8 text ({bad} bytes that are not), not a paste")
    if not text.strip():
        raise BadInput(f"{name}: is empty")
    return text
