"""A Python traceback or an error log -> Traceback: the exception's type and message, the last frames, the
library the failing frame is in, and every known GPU-stack error line (HIP/CUDA errors, out-of-memory, a missing
code object, an undefined symbol) wherever it is printed.

Written against tests/fixtures/pastes/traceback/ and the triage corpus copies there: Python 3.11+ tracebacks
with "^^^^" lines, a traceback pasted from its middle (no "Traceback (most recent call last):"), ComfyUI's
"Error occurred when executing X:" with the message BEFORE the frames, torch >= 2.9's
"torch.AcceleratorError: HIP error: invalid device function", "torch.OutOfMemoryError: HIP out of memory ...",
a pytest "FAILED path::test - torch.OutOfMemoryError: ..." line under GitHub Actions timestamps, the HIP
runtime's "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!" (quoted, and with a
localised bash "Aborted" line after it), an ImportError naming an undefined c10 symbol in flash-attn's .so,
pydantic's "ValidationError: 3 validation errors for DeepSpeedZeroConfig", and Python warnings
("/usr/lib/.../torch/cuda/__init__.py:124: UserWarning: CUDA initialization: ..."). Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import read_lines

MAX_FRAMES = 20  # the frames kept: the last ones, nearest the failure
MAX_MESSAGE_LINES = 20
MAX_ERRORS = 50

_PREFIX = re.compile(r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s|\[rank\d+\]:\s?|\[default\d+\]:\s?"
                     r"|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s)")
_HEADER = re.compile(r"^Traceback \(most recent call last\):|^\w+(?:Error|Exception)\s+Traceback \(most recent call")
# `(.*\S|.)\s*$`: what a lazy `(.+?)\s*$` captures, in one pass (it retried `\s*$` inside each run of spaces).
_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in (.*\S|.))?\s*$')
_MANGLED_FRAME = re.compile(r'(\S+\.py)", line (\d+), in (\S+)\s*$')  # a frame whose start was cut or retyped
_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault))"
                        r"(?:\[[^\]]*\])?:(?:\s(.*))?$")
_BARE_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*(?:KeyboardInterrupt|SystemExit|MemoryError|StopIteration))$")
_PYTEST = re.compile(r"^FAILED\s+(?:\[[^\]]*\]\s+)?\S+::\S+\s+-\s+(.+)$")
_CPP_THROW = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_CPP_WHAT = re.compile(r"^\s*what\(\):\s*(.*)$")
_CHAIN = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_WARNING = re.compile(r"^(\S+?\.py|<frozen [\w.]+>):(\d+): (\w*Warning): (.*)$")
_LIBRARY = re.compile(r"(?:site|dist)-packages[/\\]([A-Za-z_][\w]*)")
_SHARED_OBJECT = re.compile(r"(/?[\w./+-]+\.so(?:\.\d+)*)")
# The dynamic loader's "<name>: cannot open shared object file": <name> is a library the object being loaded needs
# and the loader did not find, not that object (which is the module the failing import loads).
_NOT_FOUND = re.compile(r"(?:^|[\s'\"(])([\w.+-]+\.so(?:\.\d+)*): cannot open shared object file")
_UNDEFINED = re.compile(r"undefined symbol: (\S+)")
# GPU-stack error text, wherever it is printed (a message, a log line, prose): each is kept as the line it is in.
_KNOWN_ERRORS = re.compile(
    r"hipError\w+|HIP error: |CUDA error: |(?:HIP|CUDA) out of memory|undefined symbol: |Memory access fault by GPU"
    r"|HSA Error: |HSA_STATUS_ERROR_\w+|No HIP GPUs are available|Found no NVIDIA driver|NVIDIA driver on your system "
    r"is too old|no kernel image is available|invalid device function|Segmentation fault|core dumped|NCCL error"
    r"|nccl\w+Error|Error while creating shared memory segment|(?:HIPBLAS|CUBLAS|ROCBLAS|MIOPEN|CUDNN)_STATUS_\w+"
    r"|rocBLAS error|Unable to find code object|Cannot find CO in the bundle|Device-side assert|illegal memory access"
    r"|GPU core dump failed|Failed to fetch queues snapshot")


@dataclass
class Frame:
    file: str
    line: int | None
    function: str | None
    code: str | None = None  # the source line printed under it
    library: str | None = None  # "torch", "flash_attn" (the package under site-packages / dist-packages)


@dataclass
class PyWarning:
    file: str
    line: int | None
    category: str  # "UserWarning"
    message: str


@dataclass
class Traceback:
    exception_type: str | None = None  # "torch.OutOfMemoryError", "RuntimeError"; None for an error without one
    message: str | None = None  # the message's first line ("HIP error: invalid device function")
    message_lines: list[str] = field(default_factory=list)  # the message and the lines after it (torch's hints)
    frames: list[Frame] = field(default_factory=list)  # the last MAX_FRAMES frames, outermost first
    frame_count: int = 0
    has_header: bool = False  # "Traceback (most recent call last):" is in the text (not an excerpt from the middle)
    chained: list[tuple[str, str]] = field(default_factory=list)  # earlier exceptions of a chain: (type, message)
    errors: list[str] = field(default_factory=list)  # known GPU-stack error lines, verbatim, in order, de-duplicated
    warnings: list[PyWarning] = field(default_factory=list)
    undefined_symbol: str | None = None  # "_ZN3c104cuda9SetDeviceEi"
    shared_object: str | None = None  # the .so an ImportError / OSError names as the object it loaded
    missing_library: str | None = None  # "libcudart.so.12": a library the loader could not find for that object

    @property
    def library(self) -> str | None:
        """The library the failing frame (the innermost one) is in; None when that is the program's own code."""
        return self.frames[-1].library if self.frames else None

    @property
    def failing_frame(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def found(self) -> bool:
        return bool(self.exception_type or self.message or self.frames or self.errors or self.warnings)


def parse_traceback(text: Any) -> Traceback:
    """Never raises; a text with no traceback gives an empty Traceback (found False). Written against
    tests/fixtures/pastes/traceback/hip-oom_GPU7-287.98GiB-MI355X-class_PYTORCH_CUDA_ALLOC_CONF-hint_pytorch-175431_
    excerpt.txt, invalid-device-function_ComfyUI-node-error_message-before-frames_ComfyUI-2842_excerpt.txt (and the
    rest of that folder), corpus/01-ayulockin-neurips-llm-efficiency-challenge-12 and
    corpus/04-pytorch-torchtitan-853."""
    tb = Traceback()
    exceptions: list[tuple[str | None, str, list[str]]] = []  # (type, message, continuation lines)
    collecting: list[str] | None = None  # the continuation lines of the last exception, while they last
    last_frame: Frame | None = None
    cpp_type: str | None = None
    for raw in read_lines(text):
        line = _PREFIX.sub("", raw.strip(), count=1) if raw[:1] in "[(0123456789" or raw.startswith(" ") \
            else raw.strip()
        line = line.strip().strip("`").strip()
        if line.startswith('"') and line.endswith('"') and len(line) > 1:
            line = line[1:-1]
        if not line:
            collecting = None
            continue
        _note_error(tb, line)
        if _HEADER.match(line):
            tb.has_header = True
            collecting = None
            continue
        if _CHAIN.match(line):
            collecting = None
            continue
        # (a frame whose start was retyped, "ImportError: lib/.../x.py", line 10, in <module>", is a frame too)
        m = _FRAME.search(line) or (_MANGLED_FRAME.search(line) if '", line ' in line else None)
        if m:
            last_frame = _frame(tb, m)
            collecting = None
            continue
        m = _WARNING.match(line)
        if m:
            if len(tb.warnings) < 50:
                tb.warnings.append(PyWarning(m.group(1), _int(m.group(2)), m.group(3), m.group(4).strip()))
            collecting = None
            continue
        m = _PYTEST.match(line)
        if m:
            inner = _EXCEPTION.match(m.group(1).strip())
            if inner:
                exceptions.append((inner.group(1), (inner.group(2) or "").strip(), []))
            collecting = None
            continue
        m = _CPP_THROW.search(line)
        if m:
            cpp_type = m.group(1)
            continue
        m = _CPP_WHAT.match(line)
        if m and cpp_type:
            exceptions.append((cpp_type, m.group(1).strip(), []))
            collecting = exceptions[-1][2]
            continue
        m = _EXCEPTION.match(line) or _BARE_EXCEPTION.match(line)
        if m:
            message = (m.group(2) or "").strip() if m.lastindex and m.lastindex >= 2 else ""
            exceptions.append((m.group(1), message, []))
            collecting = exceptions[-1][2]
            last_frame = None
            continue
        if last_frame is not None and last_frame.code is None and raw.startswith((" ", "\t")) and \
                not re.fullmatch(r"[\^~\s]+", line):
            last_frame.code = line[:300]
            continue
        if line.startswith(("[end of output]", "note: ")):
            collecting = None
        if collecting is not None and len(collecting) < MAX_MESSAGE_LINES and not re.fullmatch(r"[\^~\s]+", line):
            collecting.append(line[:500])
    if exceptions:
        for etype, message, _ in exceptions[:-1]:
            if len(tb.chained) < 10:
                tb.chained.append((etype or "", message))
        etype, message, more = exceptions[-1]
        tb.exception_type = etype
        tb.message = message or (more[0] if more else None)
        tb.message_lines = ([message] if message else []) + more
    elif tb.errors:
        tb.message = tb.errors[0]
        tb.message_lines = list(tb.errors[:MAX_MESSAGE_LINES])
    text_of_message = " ".join(tb.message_lines) if tb.message_lines else ""
    m = _UNDEFINED.search(text_of_message) or next((_UNDEFINED.search(e) for e in tb.errors if _UNDEFINED.search(e)),
                                                   None)
    tb.undefined_symbol = m.group(1) if m else None
    if tb.exception_type and tb.exception_type.split(".")[-1] in ("ImportError", "OSError", "ModuleNotFoundError"):
        missing = _NOT_FOUND.search(text_of_message)
        so = None if missing else _SHARED_OBJECT.search(text_of_message)
        tb.missing_library = missing.group(1) if missing else None
        tb.shared_object = so.group(1) if so else None
    return tb


def _frame(tb: Traceback, m: re.Match) -> Frame:
    path = m.group(1)
    library = _LIBRARY.search(path)
    frame = Frame(file=path[:500], line=_int(m.group(2)), function=(m.group(3) or None) and m.group(3)[:200],
                  library=library.group(1) if library else None)
    tb.frame_count += 1
    tb.frames.append(frame)
    if len(tb.frames) > MAX_FRAMES:
        del tb.frames[0]
    return frame


def _note_error(tb: Traceback, line: str) -> None:
    if len(tb.errors) < MAX_ERRORS and _KNOWN_ERRORS.search(line):
        kept = line[:500]
        if kept not in tb.errors:
            tb.errors.append(kept)


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and len(value) < 10 else None
