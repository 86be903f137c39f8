"""Find the one line that explains a failed extension build (DeepSpeed / torch cpp_extension JIT) in a
wall of ninja output. No torch here."""

from __future__ import annotations

import re

# "file.cpp:6:10: fatal error: x.h: No such file or directory", "clang: error: ...", "file.cu(12): error: ..."
_COMPILER_ERROR = re.compile(r"(?<![\w-])(?:fatal\s+)?error(?:\s*#\d+-D)?\s*:", re.IGNORECASE)
_NVCC_FATAL = re.compile(r"^nvcc fatal\s*:", re.IGNORECASE)
_LINKER = re.compile(r"undefined reference to|cannot find -l|\bld(?:\.lld)?: error", re.IGNORECASE)
# A compiler command echoed by ninja ("[1/3] c++ -MMD ... -c x.cpp -o x.o") may contain "error" in a path.
_COMMAND_ECHO = re.compile(r"^\[\d+/\d+\]\s")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")
# Python's own lines are not the compiler's verdict.
_PYTHON_NOISE = re.compile(r"^(Traceback|File \"|raise |subprocess\.CalledProcessError|RuntimeError|During handling)")

MAX_LINE = 300


def _clean(line: str) -> str:
    return _RANK_PREFIX.sub("", line.strip())


def first_compiler_error(log: str) -> str | None:
    """The first compiler or linker error line of a build log; else ninja's FAILED line; else None."""
    failed_line = None
    for raw in log.splitlines():
        line = _clean(raw)
        if not line or _COMMAND_ECHO.match(line) or _PYTHON_NOISE.match(line):
            continue
        if _NVCC_FATAL.match(line) or _COMPILER_ERROR.search(line) or _LINKER.search(line):
            return line[:MAX_LINE]
        if failed_line is None and line.startswith("FAILED:"):
            failed_line = line
    return failed_line[:MAX_LINE] if failed_line else None
