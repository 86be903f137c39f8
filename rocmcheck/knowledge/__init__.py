"""Knowledge shipped as data (rocmcheck/knowledge/*.json), each entry with its sources."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rocmcheck.package_data import read_json


def load(name: str) -> dict[str, Any]:
    return read_json(__name__, name)


@dataclass(frozen=True)
class Product:
    name: str
    vram_gib: float | None = None
    bf16_tflops: float | None = None
    hbm_tbps: float | None = None
    typical_fraction: float | None = None
    note: str | None = None
    compute_units: int | None = None  # of the whole GPU (a CPX/DPX partition shows a fraction of them)


@dataclass(frozen=True)
class Arch:
    name: str  # "gfx942" or "sm_90"
    vendor: str  # "amd" | "nvidia"
    family: str
    status: str = "supported"
    products: tuple[Product, ...] = field(default_factory=tuple)
    replaced_by: str | None = None
    wavefront: int | None = None
    compute_capability: str | None = None
    note: str | None = None
    sources: tuple[str, ...] = field(default_factory=tuple)
    bf16: bool = True  # False: no bf16 in hardware (NVIDIA before Ampere)
    min_cuda: str | None = None  # NVIDIA: the first CUDA toolkit whose nvcc compiles for this arch (gpus.json)

    def match_product(self, marketing_name: str | None) -> Product | None:
        """The product whose name appears in a tool's marketing name ("AMD Instinct MI300X")."""
        if not marketing_name:
            return None
        text = marketing_name.upper()
        # Longest names first, so "H100 NVL" wins over "H100".
        for product in sorted(self.products, key=lambda p: -len(p.name)):
            if _holds_name(text, product.name.upper()):
                return product
        return None


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _holds_name(text: str, name: str) -> bool:
    """`name` in `text` with no A-Z or 0-9 just before or after it (the regex (?<![A-Z0-9])NAME(?![A-Z0-9]) as a
    str.find loop: no pattern compiled per product)."""
    start = text.find(name)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or text[start - 1] not in _NAME_CHARS) and (end >= len(text) or text[end] not in _NAME_CHARS):
            return True
        start = text.find(name, start + 1)
    return False


def _arch(vendor: str, name: str, entry: dict[str, Any]) -> Arch:
    products = tuple(Product(**p) for p in entry.get("products", []))
    return Arch(
        name=name,
        vendor=vendor,
        family=entry.get("family", ""),
        status=entry.get("status", "supported"),
        products=products,
        replaced_by=entry.get("replaced_by"),
        wavefront=entry.get("wavefront"),
        compute_capability=entry.get("compute_capability"),
        note=entry.get("note"),
        sources=tuple(entry.get("sources", [])),
        bf16=entry.get("bf16", True),
        min_cuda=entry.get("min_cuda"),
    )


@lru_cache(maxsize=None)
def all_archs() -> dict[str, Arch]:
    data = load("gpus.json")
    out: dict[str, Arch] = {}
    for vendor in ("amd", "nvidia"):
        for name, entry in data[vendor].items():
            out[name] = _arch(vendor, name, entry)
    return out


def arch_info(name: str) -> Arch | None:
    """Look up "gfx942" (feature suffixes like ":sramecc+:xnack-" are ignored) or "sm_90"."""
    return all_archs().get(base_gfx(name))


def nvidia_arch_of_product(product_name: str | None) -> Arch | None:
    """The NVIDIA arch whose product list names this GPU ("Tesla T4" -> sm_75), for a tool that gives the name but
    not the compute capability; None when no product matches, or products of several archs do."""
    return product_arch("nvidia", product_name)


def product_arch(vendor: str, product_name: str | None) -> Arch | None:
    """The arch of this vendor whose product list names the GPU ("MI300A" -> gfx942, "Tesla T4" -> sm_75); the longest
    product name that matches wins; None when none matches, or products of several archs match as long."""
    if not product_name:
        return None
    matches = [a for a in all_archs().values() if a.vendor == vendor and a.match_product(product_name)]
    if not matches:
        return None
    best = max(len(a.match_product(product_name).name) for a in matches)
    top = [a for a in matches if len(a.match_product(product_name).name) == best]
    return top[0] if len(top) == 1 else None


def base_gfx(name: str) -> str:
    """"gfx942:sramecc+:xnack-" -> "gfx942"; torch's gcnArchName carries target features."""
    return name.strip().split(":", 1)[0]


def cuda_arch_from_capability(major: int | str, minor: int | str) -> str:
    return f"sm_{major}{minor}"


def suggest_arch(text: str) -> str | None:
    """A "did you mean" for a mistyped arch: "GFX942", "gfx-942", "942", "sm90", "9.0"."""
    names = list(all_archs())
    cleaned = re.sub(r"[^a-z0-9.]", "", text.strip().lower())
    digits = re.sub(r"[^0-9a-f]", "", cleaned.replace("gfx", ""))
    candidates = [cleaned, "gfx" + digits, "sm_" + cleaned.replace("sm", "").replace(".", "")]
    for cand in candidates:
        if cand in names:
            return cand
    close = difflib.get_close_matches(cleaned, names, n=1, cutoff=0.75)
    return close[0] if close else None


def _product_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower().replace("amd instinct", "").replace("nvidia", ""))


def arch_of_product(name: str) -> str | None:
    """"mi300x" / "MI300X" / "AMD Instinct MI300X" -> "gfx942"; "h100" -> "sm_90"; None when unknown."""
    wanted = _product_key(name)
    for arch in all_archs().values():
        if any(_product_key(p.name) == wanted for p in arch.products):
            return arch.name
    return None


def resolve_arch(text: str) -> str:
    """An arch ("gfx942", "gfx942:sramecc+", "sm_90") or a product name ("mi300x", "H100") -> the arch.
    ValueError with a "did you mean" for anything else."""
    if arch_info(text) is not None:
        return base_gfx(text)
    by_product = arch_of_product(text)
    if by_product:
        return by_product
    hint = suggest_arch(text)
    if hint is None:
        products = {_product_key(p.name): p.name for a in all_archs().values() for p in a.products}
        close = difflib.get_close_matches(_product_key(text), list(products), n=1, cutoff=0.6)
        hint = f"{products[close[0]]} ({arch_of_product(products[close[0]])})" if close else None
    raise ValueError(f"unknown GPU arch or product {text!r}" + (f"; did you mean {hint}?" if hint else "")
                     + " (an arch like gfx942 or sm_90, or a product like mi300x or h100)")
