"""The pastes a person names: files, or `-` for stdin, each read bounded through rocmcheck.safe. A FIFO, a folder, a
device, a file over MAX_PASTE_BYTES, an empty one, a binary one and a closed stdin are each one line and exit 2
(BadInput). All the pastes together are bounded too (MAX_TOTAL_BYTES): past it the rest is not read, and one line
on stderr says so.

Text: UTF-8 (a byte-order mark is dropped), or UTF-16/UTF-32 with a byte-order mark (what Windows' PowerShell
`>` writes); CRLF and CR-only line ends (old Mac files, a terminal log saved with bare CRs) read as lines. A NUL
byte in UTF-8 text is refused as binary (UTF-16 without a byte-order mark is said so)."""

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
# All the pastes of one triage together: one paste's cap, so many pastes cost no more than the biggest one can
# (64 pastes of 8 MiB each would be 512 MiB to read, for an answer that a few MB give).
MAX_TOTAL_BYTES = MAX_PASTE_BYTES
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
    out: list[tuple[str, str]] = []
    total = 0
    for i, name in enumerate(names):
        left = MAX_TOTAL_BYTES - total
        if left <= 0:
            _say(f"rocmcheck triage: the pastes hold more than {MAX_TOTAL_BYTES // MIB} MiB together: "
                 f"{len(names) - i} of {len(names)} not read ({', '.join(excerpt(n, 40) for n in names[i:i + 3])}"
                 f"{', ...' if len(names) - i > 3 else ''})")
            break
        if name == STDIN:
            data = _read_stdin(stdin if stdin is not None else _stdin_buffer())
            shown = "stdin"
        else:
            data = read_bytes_capped(name, limit=MAX_PASTE_BYTES, what="paste")
            shown = excerpt(name)
        if len(data) > left:
            _say(f"rocmcheck triage: the pastes hold more than {MAX_TOTAL_BYTES // MIB} MiB together: "
                 f"{shown} read to its first {left} bytes" + (f", {len(names) - i - 1} more not read"
                                                               if i + 1 < len(names) else ""))
            out.append((shown, _text(shown, data[:left], cut=True)))
            break
        total += len(data)
        out.append((shown, _text(shown, data)))
    return out


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _stdin_buffer() -> BinaryIO:
    """The binary stdin, or BadInput when there is none (`triage - <&-`, a cron job or CI step without one)."""
    stream = sys.stdin
    buffer = getattr(stream, "buffer", None) if stream is not None else None
    if buffer is None:
        raise BadInput("stdin is closed: nothing to read (give the paste as a file, or pipe it in)")
    return buffer


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


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"),
         (b"\xfe\xff", "utf-16-be"))


def _text(name: str, data: bytes, cut: bool = False) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            body = data[len(bom):]
            unit = 4 if "32" in encoding else 2
            text = body[:len(body) - len(body) % unit].decode(encoding, errors="replace")
            return _checked(name, text.replace("\x00", ""))
    nul = data.find(b"\x00")
    if nul >= 0:
        if data[1:64:2].count(0) >= 16 or data[0:64:2].count(0) >= 16:
            raise BadInput(f"{name}: UTF-16 text without a byte-order mark (NUL bytes between the letters); "
                           "save it as UTF-8 (iconv -f UTF-16LE -t UTF-8)")
        raise BadInput(f"{name}: a binary file (a NUL byte at offset {nul}), not a paste")
    text = data.decode("utf-8-sig", errors="replace")
    if cut and text.endswith("\ufffd"):  # a character cut by the bound, not a bad byte
        text = text.rstrip("\ufffd")
    return _checked(name, text)


def _checked(name: str, text: str) -> str:
    bad = text.count("\ufffd")
    if bad and bad > MAX_UNDECODABLE_SHARE * max(1, len(text)):
        raise BadInput(f"{name}: not UTF-8 text ({bad} bytes that are not), not a paste")
    if not text.strip():
        raise BadInput(f"{name}: is empty")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\n" not in text.rstrip("\n"):  # CR-only line ends: each CR ends a line (a progress bar's CRs sit on
            text = text.replace("\r", "\n")  # lines that end in LF, which the readers read as redraws)
    return text
