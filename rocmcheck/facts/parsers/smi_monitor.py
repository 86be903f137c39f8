"""Pure parsers of the GPU monitoring outputs `rocmcheck monitor`'s command-line readers ask for: one GpuReading
per GPU (what the tool says about it now). Never raise; unknown values become None.

- `nvidia-smi --query-gpu=<fields> --format=csv,nounits`: read by its header row, so a driver that prints the
  fields in another order or with units ("81559 MiB", "245.12 W", "100 %") reads the same.
- `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,nounits`: which process holds memory on
  which GPU.
- `amd-smi monitor -p -t -u -m -v -q`: a table per release with different column names (ROCm 6.2: GPU_TEMP,
  GFX_UTIL, VRAM_USED/VRAM_TOTAL; 6.4.1: GPU_T, GFX%, VRAM_USAGE "0.3/192.0 GB"; 6.5: VRAM_FREE, VRAM%), so
  columns are read by name through aliases; `-q` adds the PROCESS INFO table (GPU, PID, VRAM_MEM).
- `rocm-smi --showuse --showmeminfo vram --showpower --showtemp --json` (older ROCm without amd-smi).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from typing import Any

from rocmcheck.facts.parsers._text import clean_lines, none_if_na
from rocmcheck.facts.parsers.smi import size_bytes
from rocmcheck.units import MIB


@dataclass
class GpuReading:
    """One GPU as a monitoring tool or binding reads it at one moment (None: the tool did not say)."""

    gpu: int  # index as the reading tool numbers it (NVML / amd-smi / nvidia-smi index)
    used_bytes: int | None = None  # device memory in use (all processes, as the driver counts it)
    total_bytes: int | None = None
    power_w: float | None = None
    util_pct: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None  # NVIDIA SM clock / AMD GFX clock
    mem_clock_mhz: float | None = None


# Above any memory size (bytes), power, clock or index a GPU reports (2^63: what a signed 64-bit counter holds).
MAX_VALUE = float(2**63)
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z°/%]*)\s*$")

# nvidia-smi query field -> GpuReading attribute and unit multiplier (memory is MiB in csv).
NVIDIA_FIELDS = {
    "index": ("gpu", None),
    "uuid": (None, None),
    "memory.used": ("used_bytes", MIB),
    "memory.total": ("total_bytes", MIB),
    "power.draw": ("power_w", 1),
    "utilization.gpu": ("util_pct", 1),
    "temperature.gpu": ("temp_c", 1),
    "clocks.sm": ("sm_clock_mhz", 1),
    "clocks.mem": ("mem_clock_mhz", 1),
    # nvidia-smi answers a query for clocks.sm / clocks.mem under their long names (seen with driver 580 on H200:
    # tests/fixtures/nvidia-smi-monitor/).
    "clocks.current.sm": ("sm_clock_mhz", 1),
    "clocks.current.memory": ("mem_clock_mhz", 1),
}


def _number(value: str | None) -> float | None:
    """245.12 from "245.12", "245.12 W", "100 %", "1980 MHz"; None for "[N/A]", "N/A", "[Not Supported]"."""
    value = none_if_na(value.strip()) if isinstance(value, str) else None
    if value is None:
        return None
    m = _NUMBER.match(value)
    number = float(m.group(1)) if m else None
    # A reading no GPU can show (a 400-digit "index" is infinite as a float) is not a number either.
    return number if number is not None and abs(number) <= MAX_VALUE else None


def _size(value: str | None) -> int | None:
    """size_bytes, bounded like _number: a size past MAX_VALUE is not a reading."""
    try:
        size = size_bytes(value)
    except (OverflowError, ValueError):
        return None
    return size if size is not None and 0 <= size <= MAX_VALUE else None


# ---- nvidia-smi -----------------------------------------------------------------------------------------------

def _header_name(cell: str) -> str:
    """'memory.used [MiB]' -> 'memory.used'. (Not a regular expression: a lazy match up to the end of the cell takes
    quadratic time on a cell of many `[`.)"""
    cell = cell.strip()
    if cell.endswith("]") and "[" in cell:
        cell = cell[:cell.rfind("[")]
    return cell.strip().lower()


def _csv_rows(text: str) -> list[list[str]]:
    lines = [line for line in clean_lines(text) if line.strip()]
    try:
        return [row for row in csv.reader(lines, skipinitialspace=True)]
    except csv.Error:
        return [[c.strip() for c in line.split(",")] for line in lines]


def parse_nvidia_query(text: str, fields: list[str] | None = None) -> tuple[list[GpuReading], dict[int, str]]:
    """Readings per GPU and {index: uuid}. The header row names the columns; without one (noheader), `fields`
    does. Rows of another width (a warning line, an error) are skipped."""
    rows = _csv_rows(text)
    names = [f.strip().lower() for f in fields] if fields else None
    samples, uuids = [], {}
    for row in rows:
        cleaned = [_header_name(c) for c in row]
        if any(c in NVIDIA_FIELDS for c in cleaned) and all(not re.match(r"^-?\d", c) for c in cleaned):
            names = cleaned  # a header row
            continue
        if names is None or len(row) != len(names):
            continue
        values = dict(zip(names, (c.strip() for c in row)))
        index = _number(values.get("index"))
        sample = GpuReading(gpu=int(index) if index is not None else len(samples))
        for name, (attr, scale) in NVIDIA_FIELDS.items():
            if attr is None or attr == "gpu" or name not in values:
                continue
            number = _number(values[name])
            if number is not None:
                setattr(sample, attr, int(number * scale) if attr.endswith("bytes") else number * scale)
        if values.get("uuid"):
            uuids[sample.gpu] = values["uuid"]
        samples.append(sample)
    return samples, uuids


def parse_nvidia_compute_apps(text: str, fields: list[str] | None = None) -> list[dict[str, Any]]:
    """[{"gpu_uuid", "pid", "used_bytes"}] from --query-compute-apps (header row or `fields` when noheader)."""
    names = [f.strip().lower() for f in fields] if fields else None
    out = []
    for row in _csv_rows(text):
        cleaned = [_header_name(c) for c in row]
        if "pid" in cleaned:
            names = ["used_memory" if c == "used_gpu_memory" else c for c in cleaned]
            continue
        if names is None or len(row) != len(names):
            continue
        values = dict(zip(names, (c.strip() for c in row)))
        pid = _number(values.get("pid"))
        if pid is None:
            continue
        mem = _number(values.get("used_memory"))
        out.append({"gpu_uuid": values.get("gpu_uuid"), "pid": int(pid),
                    "used_bytes": int(mem * MIB) if mem is not None else None})
    return out


# ---- amd-smi --------------------------------------------------------------------------------------------------

# GpuReading attribute -> the column names amd-smi monitor has used for it, newest last.
AMD_COLUMNS = {
    "power_w": ("POWER",),
    "temp_c": ("GPU_TEMP", "GPU_T"),  # hotspot/junction on MI-series
    "util_pct": ("GFX_UTIL", "GFX%"),
    "sm_clock_mhz": ("GFX_CLOCK", "GFX_CLK"),
    "mem_clock_mhz": ("MEM_CLOCK", "MEM_CLK"),
}


def _table_cells(line: str) -> list[str]:
    """amd-smi separates columns by two or more spaces; a value and its unit by one ("248 W")."""
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


def parse_amd_smi_monitor(text: str) -> tuple[list[GpuReading], list[dict[str, Any]]]:
    """Readings per GPU and the PROCESS INFO rows ([{"gpu", "pid", "used_bytes"}]) of `amd-smi monitor`."""
    samples: list[GpuReading] = []
    procs: list[dict[str, Any]] = []
    header: list[str] | None = None
    in_procs = False
    for line in clean_lines(text):
        if not line.strip():
            continue
        if line.strip().upper().startswith("PROCESS INFO"):
            in_procs, header = True, None
            continue
        cells = _table_cells(line)
        if cells and cells[0].upper() == "GPU" and len(cells) > 1:
            header = [c.upper() for c in cells]
            continue
        if header is None or len(cells) != len(header) or not cells[0].isdigit():
            continue
        values = dict(zip(header, cells))
        if in_procs:
            pid = _number(values.get("PID"))
            if pid is not None:
                procs.append({"gpu": int(cells[0]), "pid": int(pid), "used_bytes": _size(values.get("VRAM_MEM"))})
            continue
        sample = GpuReading(gpu=int(cells[0]))
        for attr, names in AMD_COLUMNS.items():
            for name in names:
                if name in values:
                    setattr(sample, attr, _number(values[name]))
                    break
        sample.used_bytes = _size(values.get("VRAM_USED"))
        sample.total_bytes = _size(values.get("VRAM_TOTAL"))
        usage = values.get("VRAM_USAGE")  # "0.3/192.0 GB" (6.4.1+ default table)
        m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$", usage or "")
        if m and sample.used_bytes is None:
            sample.used_bytes = _size(f"{m.group(1)} {m.group(3)}")
            sample.total_bytes = _size(f"{m.group(2)} {m.group(3)}")
        samples.append(sample)
    return samples, procs


# ---- rocm-smi -------------------------------------------------------------------------------------------------

def parse_rocm_smi_monitor_json(text: str) -> list[GpuReading]:
    """`rocm-smi --showuse --showmeminfo vram --showpower --showtemp --json`: {"card0": {...}, "system": {...}}."""
    try:
        data = json.loads(text[text.find("{"):]) if "{" in text else None
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    samples = []
    for key, value in data.items():
        m = re.fullmatch(r"card(\d+)", str(key).strip(), re.IGNORECASE)
        if not m or not isinstance(value, dict):
            continue
        fields = {str(k).lower(): str(v) for k, v in value.items()}
        sample = GpuReading(gpu=int(m.group(1)))
        used, total = _number(fields.get("vram total used memory (b)")), _number(fields.get("vram total memory (b)"))
        sample.used_bytes = int(used) if used is not None else None
        sample.total_bytes = int(total) if total is not None else None
        sample.util_pct = _number(fields.get("gpu use (%)"))
        for k, v in fields.items():
            if sample.power_w is None and "graphics package power (w)" in k and not k.startswith("max"):
                sample.power_w = _number(v)  # "Current Socket ..." (MI300) or "Average ..." (older)
        for sensor in ("junction", "edge", "memory"):
            if sample.temp_c is None:
                sample.temp_c = _number(fields.get(f"temperature (sensor {sensor}) (c)"))
        samples.append(sample)
    return sorted(samples, key=lambda s: s.gpu)
