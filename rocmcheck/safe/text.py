"""The terminal sanitiser: no byte a tool, a bundle, a config or a package prints reaches the terminal as a
control sequence. OSC 52 writes the clipboard, OSC 0 the window title, CSI moves the cursor or recolours text so
a FAIL reads as a PASS; a lone carriage return overwrites a line.

Two points apply it to everything rocmcheck prints: `install_console_streams()` (called once by the CLI) wraps
sys.stdout and sys.stderr so every write is cleaned (and a console that cannot encode a character prints `?`
instead of raising UnicodeEncodeError); `safe_console()` is the rich Console for reports: markup and emoji codes
off (a `[/x]` in a GPU name is text), each rendered segment cleaned, and rich's own styling written to the real
stream so its colours survive."""

from __future__ import annotations

import io
import re
import sys
import unicodedata
from typing import Any, Iterable

# ECMA-48 sequences: OSC/DCS/SOS/PM/APC strings up to BEL or ST (or the end of the text when unterminated),
# CSI with its parameters, two-byte escapes, and their 8-bit C1 forms.
_SEQUENCES = re.compile(
    r"\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC (0 title, 8 links, 52 clipboard), DCS, SOS, PM, APC
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # the same, 8-bit introducers
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: colours, cursor moves, screen clears
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|\x1b[ -/]*[0-~]?"  # other escapes (ESC c resets the terminal)
)
# What is left: C0 controls but tab and newline, DEL, C1 controls, the bidirectional overrides that make text
# display in another order than it reads ("Trojan Source"), and the invisible characters that can hide or fake
# text (zero-width space and joiners, word joiner, soft hyphen, byte-order mark, tag characters).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e"
                       r"\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")


# Escape sequences as normalize() drops them: a string sequence (OSC, DCS, ...) ends at its terminator or at the
# end of its line, so an unterminated one hides no later line.
_LINE_SEQUENCES = re.compile(
    r"\x1b[\]PX^_][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
)
# Characters that show nothing: every format character (Unicode category Cf: the soft hyphen, zero-width space,
# joiners and word joiner, the byte-order mark, the bidirectional controls, the tag characters U+E0000-E007F,
# Arabic and other number signs), the fillers and joiners that render blank (combining grapheme joiner, Hangul
# fillers, Mongolian variation selectors, variation selectors), and the C0/C1 controls but tab, newline and
# carriage return (a backspace inside a token is deleted at print like a colour code). tests/test_redact_normalize.py
# checks the list against unicodedata's categories.
INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]+"
)


def normalize(text: str) -> str:
    """text as the redactor reads it and a person sees it: terminal escape sequences dropped, Unicode normalized
    (NFKC: a fullwidth `ｈｆ＿` is `hf_`), and the invisible characters above dropped, so nothing that does not
    show can split a token and hide it from the redactor, or fake text in a quote. Tab, newline and carriage
    return stay (the paste readers split lines). Linear: one regex pass each, unicodedata's normalization."""
    if text.isascii():
        if "\x1b" not in text and not _ASCII_CONTROL.search(text):
            return text
        return INVISIBLE.sub("", _LINE_SEQUENCES.sub("", text))
    text = _LINE_SEQUENCES.sub("", text)
    text = unicodedata.normalize("NFKC", INVISIBLE.sub("", text))
    return INVISIBLE.sub("", text)


_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean(text: str) -> str:
    """text without escape sequences and control characters (tab and newline kept)."""
    if not _CONTROLS.search(text):
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


# How much of one piece of user data (a key from a config, a file name, an option value) a message echoes: real
# keys, paths and names are far shorter; a 5 MB key would otherwise be printed whole in every line that names it.
MAX_ECHO_CHARS = 200
# How much of one key (of a config, a bundle) a message that says where a value sits echoes: DeepSpeed's longest
# key, `stage3_gather_16bit_weights_on_model_save`, has 41 characters; twice that is left whole.
KEY_ECHO_CHARS = 80
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """text with a newline, a tab or any control character written as its escape (`\\n`): it cannot start a
    second line or reach the terminal as a control."""
    if _CONTROLS.search(text) or "\n" in text or "\t" in text:
        return "".join(_ESCAPES.get(c) or (ascii(c)[1:-1] if _CONTROLS.match(c) else c) for c in text)
    return text


def excerpt(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """User data as it may be echoed in a message: one line (one_line: a file name with a newline cannot start a
    second line), at most `limit` characters of it, then how many were left out. The one helper every message
    uses for data it repeats."""
    text = str(value)
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return one_line(text)


def clean_tree(value: Any) -> Any:
    """clean() applied to every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_tree(k): clean_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_tree(v) for v in value]
    return value


class SanitizingStream(io.TextIOBase):
    """A text stream that cleans what is written to it and passes it on. It has no `buffer`, so libraries that
    look for the binary stream under sys.stdout (click does, when the encoding is ASCII) write through it too."""

    def __init__(self, raw: Any) -> None:
        super().__init__()
        self.raw_stream = raw

    def write(self, text: str | bytes) -> int:  # type: ignore[override]
        """Text, or bytes (click writes bytes where it finds no binary stream, as for its shell-completion
        scripts, UTF-8 from str.encode()): decoded (undecodable bytes become U+FFFD), then cleaned."""
        if isinstance(text, (bytes, bytearray, memoryview)):
            shown = bytes(text).decode("utf-8", errors="replace")
            self.raw_stream.write(clean(shown))
            return len(text)
        self.raw_stream.write(clean(text))
        return len(text)

    def writelines(self, lines: Iterable[str | bytes]) -> None:  # type: ignore[override]
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.raw_stream.flush()

    def isatty(self) -> bool:
        return self.raw_stream.isatty()

    def fileno(self) -> int:
        return self.raw_stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw_stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return getattr(self.raw_stream, "errors", None) or "replace"

    def close(self) -> None:
        """Flush only: the real stream belongs to the interpreter. A flush that fails here (a reader that closed the
        pipe) is the command's exit path's to report, not the finalizer's: from Python 3.14 on, io's finalizer
        prints an error close() raises as "Exception ignored ... Traceback"."""
        try:
            self.flush()
        except OSError:
            pass


def _tolerant(stream: Any) -> Any:
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="replace")  # PYTHONIOENCODING=ascii: "?" for what the console cannot show
        except (ValueError, OSError):
            pass
    return stream


def install_console_streams() -> None:
    """Wrap sys.stdout and sys.stderr (once): every later write is cleaned and never fails to encode."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, SanitizingStream):
            continue
        setattr(sys, name, SanitizingStream(_tolerant(stream)))


def raw_stream(stream: Any) -> Any:
    """The stream under a SanitizingStream (for writers that clean their own data: safe_console)."""
    return stream.raw_stream if isinstance(stream, SanitizingStream) else stream


def safe_console(*, stderr: bool = False, **kwargs: Any):
    """A rich Console for reports: data is text (no markup, emoji codes or highlighting), each segment is cleaned,
    and the output goes to the real stream so the report's own colours survive the stream wrapper."""
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def render(self, renderable: Any, options: Any = None):  # type: ignore[override]
            for segment in super().render(renderable, options):
                if segment.control is None and _CONTROLS.search(segment.text):
                    segment = Segment(clean(segment.text), segment.style, segment.control)
                yield segment

    stream = sys.stderr if stderr else sys.stdout
    kwargs.setdefault("file", raw_stream(stream))
    kwargs.setdefault("markup", False)
    kwargs.setdefault("emoji", False)
    kwargs.setdefault("highlight", False)
    return _SafeConsole(**kwargs)
