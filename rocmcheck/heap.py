"""Python's cyclic garbage collector and big imports. A full collection walks every live object; importing
torch, torch._dynamo and transformers creates hundreds of thousands of them and sets off full collections
again and again while it grows the heap: on the bundled model's CPU smoke-train, about a second of collections
(benchmarks/RESULTS.md, section 17). Modules live as long as
the process, so they need no collecting: import without collections, then freeze what exists, which no
later collection walks again (frozen objects are still freed when nothing refers to them). gc.get_objects
and gc.get_referrers do not see frozen objects either, so whatever looks for a leak's holders through gc
(smoke-train --memory-snapshot) unfreezes first."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def imports_without_gc() -> Iterator[None]:
    """Run the block (imports, and objects made once per run) with the collector off; freeze the heap after.
    Never around anything whose reference cycles must be collected later (a model that a later phase
    frees: frozen cycles are never collected)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
