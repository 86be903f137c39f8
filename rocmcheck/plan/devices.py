"""GPU memory sizes by product name ("mi300x", "H200", "rtx4090"), from rocmcheck/knowledge/gpus.json."""

from __future__ import annotations

import difflib
import re

from rocmcheck.knowledge import all_archs
from rocmcheck.units import GIB


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def gpu_memory_by_name(name: str) -> tuple[str, float]:
    """(product name, memory in bytes). Raises ValueError for an unknown name or one without a memory size."""
    wanted = _key(name.replace("AMD Instinct", "").replace("NVIDIA", ""))
    products = {_key(p.name): (p, arch) for arch in all_archs().values() for p in arch.products}
    hit = products.get(wanted)
    if hit is None:
        close = difflib.get_close_matches(wanted, list(products), n=1, cutoff=0.6)
        hint = f"; did you mean {products[close[0]][0].name}?" if close else ""
        known = sorted(p.name for p, _ in products.values() if p.vram_gib)
        raise ValueError(f"unknown GPU {name!r}{hint} (known: {', '.join(known)}; or give --gpu-memory GiB)")
    product, arch = hit
    if not product.vram_gib:
        raise ValueError(f"{product.name} ({arch.name}) has no memory size in rocmcheck's table: give --gpu-memory GiB")
    return product.name, float(product.vram_gib) * GIB
