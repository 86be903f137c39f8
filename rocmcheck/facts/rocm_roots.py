"""The places ROCm may be, before anything is observed there: the roots a person named (ROCM_PATH, ROCM_HOME)
and the legacy /opt/rocm, each only if it is a path we accept as a root. Pure: no file is read.

Two modules build on it: rocm_location (which root holds which release) and tools (the one tool locator, which
looks in each root's bin/ after PATH)."""

from __future__ import annotations

import re
from typing import Mapping

# Variables a person sets to say where ROCm is, in the order torch.utils.cpp_extension reads them
# (ROCM_HOME first in older torch, ROCM_PATH in current ROCm docs: either wins over every default).
ROOT_VARIABLES = ("ROCM_PATH", "ROCM_HOME")
LEGACY_ROOT = "/opt/rocm"

# A root we take as ROCM_PATH / ROCM_HOME: absolute, no control characters, quotes, backticks, `$` or
# backslashes (usable_path says why).
_PRINTABLE_PATH = re.compile(r"/[^\x00-\x1f\x7f'\"`$\\]*")


def usable_path(value: str | None) -> str | None:
    """An absolute path we accept as a ROCm root, trailing slash removed; None for anything else.

    Fixes need no such guard: a fix pastes a path as a quoted field (rocmcheck/fixes.py), whatever it holds. The
    root is refused for what it becomes elsewhere: build-env exports it as ROCM_PATH / ROCM_HOME in a shell
    script, a dotenv file or a Dockerfile ENV (buildenv/render.py refuses quotes, `$`, backslashes and control
    characters in a value), and the build tools that read it (hipcc, CMake, torch.utils.cpp_extension) pass it
    on through shells and make files of their own, which would split or expand it. Spaces and `;` pass: the
    formats quote them."""
    if not value:
        return None
    value = value.strip().rstrip("/") or "/"
    return value if _PRINTABLE_PATH.fullmatch(value) else None


def candidate_roots(env: Mapping[str, str]) -> list[str]:
    """ROCM_PATH, ROCM_HOME, /opt/rocm: where a tool that is not on PATH may be (in their bin/)."""
    roots = [usable_path(env.get(var)) for var in ROOT_VARIABLES] + [LEGACY_ROOT]
    return [r for r in dict.fromkeys(roots) if r]
