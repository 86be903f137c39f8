"""The private bytecode cache (bytecode.py) filled ahead on a first run: the sources rocmcheck's torch-importing
processes import, compiled into it with every core before anything imports them one file at a time.

On one H200 a default smoke-train without bytecode took 22.3 s with rocmcheck's cache empty and 9.7 s with it
written (benchmarks/RESULTS.md, section 18): the first run compiled what it imported, one file at a time, and the
doctor's children, importing side by side, each compiled the same files. SOURCES_FILE lists those sources, recorded
from real runs by scripts/record_bytecode_sources.py; `prefill` compiles the ones found here that the cache lacks
in one child (rocmcheck.bytecode_compile, through the command runner). A source not on the list (another version's
module, a GPU probe's import) is compiled as before, by the process that imports it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from typing import Any, Iterable

from rocmcheck import bytecode, package_data
from rocmcheck.runner import run_command

# The sources, in this package: "stdlib:<path under the standard library>" or "site:<path under the folder its
# top-level package is installed in>", one a line; "#" starts a comment.
SOURCES_FILE = "bytecode_sources.txt"
# The whole prefill may take this long (it is killed after, and the imports compile what is left): the list took
# 4.5-7.2 s on 2 cores and 1.2-1.7 s on 16 (benchmarks/RESULTS.md, section 18).
PREFILL_TIMEOUT_S = 120.0
last_prefill: dict[str, Any] | None = None  # this process's prefill: sources, seconds, and what the child said


def listed_sources(lines: Iterable[str]) -> list[str]:
    """The sources SOURCES_FILE's lines name that exist here, as paths. A top-level package is located without
    being imported (importlib.util.find_spec of a top-level name)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    roots: dict[str, str | None] = {}
    found = []
    for line in lines:
        kind, _, rel = line.strip().partition(":")
        if kind == "stdlib":
            root: str | None = stdlib
        elif kind == "site" and rel:
            top = rel.split("/", 1)[0].removesuffix(".py")
            if top not in roots:
                roots[top] = install_folder(top)
            root = roots[top]
        else:
            continue  # a comment, or a kind this version does not know
        if root is None:
            continue
        path = os.path.join(root, *rel.split("/"))
        if os.path.isfile(path):
            found.append(path)
    return found


def install_folder(top: str) -> str | None:
    """The folder a top-level package or module is installed in (its site-packages), or None when it is not here."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package, also a namespace package: its folder's parent
        return os.path.dirname(list(spec.submodule_search_locations)[0])
    return os.path.dirname(spec.origin) if spec.origin and spec.origin.endswith(".py") else None


def prefill(timeout: float = PREFILL_TIMEOUT_S, lines: Iterable[str] | None = None) -> dict[str, Any] | None:
    """Compile the listed sources (default: SOURCES_FILE's) into the private cache with every core, in one child
    (rocmcheck.bytecode_compile, through the command runner); what it did, also kept in `last_prefill`, or None
    when the cache is off, nothing is left to compile, or this is a rank other than its node's first (LOCAL_RANK, as
    torchrun sets it: ranks start together, and one prefill per node compiles for all of them). Never raises: a child
    that fails, hangs or is killed leaves the rest to the imports."""
    global last_prefill
    if not bytecode.private_cache_on() or os.environ.get("LOCAL_RANK", "0") not in ("", "0"):
        return None
    if lines is None:
        lines = package_data.read_text("rocmcheck", SOURCES_FILE).splitlines()
    paths = [p for p in listed_sources(lines) if not os.path.isfile(importlib.util.cache_from_source(p))]
    if not paths:
        return None
    result = run_command([sys.executable, "-m", "rocmcheck.bytecode_compile"], timeout, input_text="\n".join(paths)
                         + "\n")
    last_prefill = {"sources": len(paths), "seconds": result.duration_s,
                    "said": result.stdout.strip()[:200] if result.ok else result.describe_failure()}
    return last_prefill
