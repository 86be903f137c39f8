"""`python -m rocmcheck.bytecode_compile`: compile the Python sources named on stdin (one path a line) to bytecode
where this interpreter keeps it (with PYTHONPYCACHEPREFIX set: that folder, rocmcheck's private cache; see
bytecode_prefill.py), one worker process per core. `python -m compileall -j` works in parallel only over folders, and a
file list is compiled one file at a time.

Prints one line: how many sources were compiled, of how many, in how many seconds, by how many processes. A source
that does not compile (a syntax error, an unreadable file) is counted as not compiled and left to the process that
imports it, which reports its own error. Exits 0 whatever was compiled."""

from __future__ import annotations

import os
import py_compile
import sys
import time
from concurrent.futures import ProcessPoolExecutor

CHUNK = 16  # sources handed to a worker at a time: a few milliseconds of work each, against the pool's round trip


def compile_source(path: str) -> bool:
    try:
        py_compile.compile(path, doraise=True)
    except (py_compile.PyCompileError, OSError, ValueError, SyntaxError):
        return False
    return True


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def main() -> int:
    paths = [line.strip() for line in sys.stdin if line.strip()]
    t0 = time.perf_counter()
    workers = max(1, min(cores(), len(paths) // CHUNK or 1))
    if workers == 1:
        done = sum(map(compile_source, paths))
    else:
        with ProcessPoolExecutor(workers) as pool:
            done = sum(pool.map(compile_source, paths, chunksize=CHUNK))
    print(f"compiled {done} of {len(paths)} sources in {time.perf_counter() - t0:.2f} s by {workers} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
