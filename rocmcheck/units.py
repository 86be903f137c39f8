"""Byte units, binary throughout: the GPU tools rocmcheck reads mean 1024-based units even when they print "MB"
(amd-smi's 196592 MB is the 206141652992 B rocm-smi reports for the same MI300X; nvidia-smi's MiB likewise)."""

from __future__ import annotations

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

# A unit as the tools print it, upper-cased -> bytes.
UNIT_BYTES = {"B": 1, "KB": KIB, "MB": MIB, "GB": GIB, "TB": TIB, "KIB": KIB, "MIB": MIB, "GIB": GIB, "TIB": TIB}


def fmt_bytes(n: float | None, digits: int = 2, *, smallest: str = "MiB") -> str:
    """GiB with `digits` decimals from 1 GiB up, MiB with one decimal fewer below; smallest="B" goes on down to
    KiB (one decimal) and whole bytes. "?" when the size is unknown."""
    if n is None:
        return "?"
    if abs(n) >= GIB:
        return f"{n / GIB:.{digits}f} GiB"
    if abs(n) >= MIB or smallest == "MiB":
        return f"{n / MIB:.{max(digits - 1, 0)}f} MiB"
    return f"{n / KIB:.1f} KiB" if abs(n) >= KIB else f"{n:.0f} B"
