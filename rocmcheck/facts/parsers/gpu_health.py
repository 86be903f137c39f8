"""GPU error counters and link state from text: `nvidia-smi -q -d ECC,PERFORMANCE` and sysfs files.

Pure and total (any input gives a value, never an exception). Used when the vendor binding (NVML /
amdsmi) is not importable; the sysfs PCIe link files need no tool at all.
"""

from __future__ import annotations

import re
from typing import Any

from rocmcheck.facts.parsers._text import to_int

# PCIe transfer rate per lane (GT/s) -> generation, as sysfs prints it ("16.0 GT/s PCIe").
GTS_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# NVML clock event (throttle) reason bits (nvml.h nvmlClocksEventReason*): the ones that mean the GPU is slowed
# by heat or power hardware, not by being idle or by a setting.
NVML_REASON_BITS = {
    0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap", 0x8: "HW slowdown",
    0x10: "sync boost", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown", 0x80: "HW power brake slowdown",
    0x100: "display clock setting",
}
NVML_REASON_IDLE = 0x1
NVML_REASONS_SLOWDOWN = 0x8 | 0x20 | 0x40 | 0x80


_GPU_HEADER = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$")


def q_tree(text: str) -> list[tuple[int, str, str]]:
    """`nvidia-smi -q` as (indent, key, value) rows; a "GPU 00000000:00:06.0" header is a key of its own."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip() or line.lstrip().startswith("="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if _GPU_HEADER.match(line):  # "GPU 00000000:00:06.0": the colons belong to the bus id
            rows.append((indent, line.strip(), ""))
            continue
        key, sep, value = line.strip().partition(":")
        rows.append((indent, key.strip(), value.strip() if sep else ""))
    return rows


def _int(value: str | None) -> int | None:
    m = re.match(r"^\s*([0-9]+)", value or "")
    return to_int(m.group(1)) if m else None


def parse_nvidia_smi_q(text: str | None) -> list[dict[str, Any]]:
    """Per GPU from `nvidia-smi -q -d ECC,PERFORMANCE`: bus id, ECC mode, ECC totals, active clock event reasons."""
    gpus: list[dict[str, Any]] = []
    path: list[tuple[int, str]] = []
    for indent, key, value in q_tree(text or ""):
        if indent == 0 and _GPU_HEADER.match(key) and not value:
            gpus.append({"bus_id": key[4:].strip(), "reasons_active": [], "ecc_uncorrected_volatile": None,
                         "ecc_corrected_volatile": None, "ecc_uncorrected_aggregate": None, "ecc_mode_current": None})
            path = []
            continue
        if not gpus:
            continue
        while path and path[-1][0] >= indent:
            path.pop()
        names = [p[1] for p in path]
        gpu = gpus[-1]
        if not value:
            path.append((indent, key))
            continue
        if names[-1:] == ["ECC Mode"] and key == "Current":
            gpu["ecc_mode_current"] = value
        elif "Clocks Event Reasons" in names or "Clocks Throttle Reasons" in names:
            if names[-1] in ("Clocks Event Reasons", "Clocks Throttle Reasons", "HW Slowdown") and value == "Active":
                gpu["reasons_active"].append(key)
        elif "ECC Errors" in names and len(names) >= 2:
            scope = "volatile" if "Volatile" in names else "aggregate" if "Aggregate" in names else None
            count = _int(value)
            if scope is None or count is None or "Sources" in names[-1]:
                continue
            # Current drivers: "SRAM Uncorrectable Parity", "DRAM Correctable"; older: "Double Bit" > "Total".
            label = " ".join(names[names.index("ECC Errors") + 2:] + [key]).lower()
            if "double bit" in label and key != "Total":
                continue
            if "single bit" in label and key != "Total":
                continue
            kind = "uncorrected" if ("uncorrect" in label or "double bit" in label) else \
                "corrected" if ("correct" in label or "single bit" in label) else None
            if kind is None or (kind == "corrected" and scope == "aggregate"):
                continue
            field = f"ecc_{kind}_{scope}"
            gpu[field] = (gpu.get(field) or 0) + count
    return gpus


def pcie_gen(speed_text: str | None) -> int | None:
    """sysfs "32.0 GT/s PCIe" -> 5; amdsmi MT/s 32000 -> 5 (pass the number as text)."""
    m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)", speed_text or "")
    if not m:
        return None
    rate = float(m.group(1))  # finite: at most digits, a point and digits
    if rate > 1000:  # MT/s
        rate /= 1000
    return GTS_TO_GEN.get(rate)


def parse_ras_count(text: str | None) -> tuple[int | None, int | None]:
    """amdgpu ras/<block>_err_count: "ue: 0\\nce: 3" -> (0, 3)."""
    ue = re.search(r"ue:\s*([0-9]+)", text or "")
    ce = re.search(r"ce:\s*([0-9]+)", text or "")
    return (to_int(ue.group(1)) if ue else None, to_int(ce.group(1)) if ce else None)


def count_bad_pages(text: str | None) -> int | None:
    """amdgpu ras/gpu_vram_bad_pages: one "0xPFN : 0xSIZE : R|P|F" line per retired page."""
    if text is None:
        return None
    return sum(1 for line in text.splitlines() if line.strip().startswith("0x"))


def describe_reasons(mask: int | None) -> list[str]:
    if not isinstance(mask, int):
        return []
    return [name for bit, name in NVML_REASON_BITS.items() if mask & bit]
