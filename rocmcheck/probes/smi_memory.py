"""Total GPU memory as the driver tools report it, for the memory probe when the doctor passes none.
No torch here; commands go through the one runner."""

from __future__ import annotations

import json
import re

from rocmcheck.runner import run_command
from rocmcheck.units import MIB


def parse_nvidia_smi_memory_mib(text: str) -> list[int]:
    """`nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits`: one MiB figure per line."""
    return [int(line.strip()) * MIB for line in text.splitlines() if line.strip().isdigit()]


def parse_rocm_smi_vram_json(text: str) -> list[int]:
    """`rocm-smi --showmeminfo vram --json`: {"card0": {"VRAM Total Memory (B)": "21458059264", ...}, ...}."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    cards = sorted((k for k in data if re.fullmatch(r"card\d+", k)), key=lambda k: int(k[4:]))
    totals = []
    for card in cards:
        value = str(data[card].get("VRAM Total Memory (B)", "")) if isinstance(data[card], dict) else ""
        if value.isdigit():
            totals.append(int(value))
    return totals


def read_smi_memory_bytes(vendor: str, timeout: float = 10.0) -> list[int] | None:
    if vendor == "nvidia":
        result = run_command(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"], timeout)
        return (parse_nvidia_smi_memory_mib(result.stdout) or None) if result.ok else None
    if vendor == "amd":
        result = run_command(["rocm-smi", "--showmeminfo", "vram", "--json"], timeout)
        return (parse_rocm_smi_vram_json(result.stdout) or None) if result.ok else None
    return None
