"""nvidia-smi outputs -> SmiReport: the default table (driver, CUDA version, GPUs) and --query-gpu CSV."""

from __future__ import annotations

import csv
import re

from rocmcheck.facts.parsers._text import clean_lines, leading_int, none_if_na, to_int
from rocmcheck.facts.parsers.models import SmiGpu, SmiReport
from rocmcheck.units import MIB

# nvidia-smi's own words when there is no usable driver or GPU.
_ERRORS = re.compile(
    r"(NVIDIA-SMI has failed because.*|No devices were found.*|Failed to initialize NVML.*)", re.IGNORECASE)
_HEADER = {
    "tool_version": re.compile(r"NVIDIA-SMI\s+([\d.]+)"),
    "driver_version": re.compile(r"Driver Version:\s*([\d.]+)"),
    "cuda_version": re.compile(r"CUDA Version:\s*([\d.]+)"),
}
# First cell of a GPU's first row: "   0  NVIDIA H100 80GB HBM3          On  " (On/Off = persistence;
# WDDM/TCC on Windows). Names may be cut with "..." when long.
_GPU_CELL = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off|WDDM|TCC|N/A)\s*$")
_BUS_CELL = re.compile(r"^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
# Bounded runs of digits that start a number: an unbounded \d+ searched along a line of long digit runs (a
# damaged output) backtracks from every position, quadratic in the line's length.
_MEMORY = re.compile(r"(?<![0-9])([0-9]{1,30})\s*MiB\s*/\s*([0-9]{1,30})\s*MiB")


def parse_nvidia_smi_table(text: str) -> SmiReport:
    """Plain `nvidia-smi`: the banner (NVIDIA-SMI, Driver Version, CUDA Version) and, per GPU, its name,
    bus id and "used MiB / total MiB". Stops at the Processes (and MIG devices) tables."""
    report = SmiReport(tool="nvidia-smi")
    last: SmiGpu | None = None
    for line in clean_lines(text):
        stripped = line.strip()
        if report.error is None:
            m = _ERRORS.search(stripped)
            if m:
                report.error = m.group(1)
                continue
        for attr, pattern in _HEADER.items():
            if getattr(report, attr) is None:
                m = pattern.search(stripped)
                if m:
                    setattr(report, attr, m.group(1))
        if re.search(r"\b(Processes|MIG devices):", stripped):
            break
        cells = [c for c in stripped.strip("|").split("|")]
        if len(cells) < 2:
            continue
        m = _GPU_CELL.match(cells[0])
        if m and _BUS_CELL.match(cells[1]) and to_int(m.group(1)) is not None:
            last = SmiGpu(index=to_int(m.group(1)), product_name=m.group(2).strip())
            last.pci_bus = _BUS_CELL.match(cells[1]).group(1)
            report.gpus.append(last)
            continue
        mem = _MEMORY.search(stripped)
        if mem and last is not None and last.vram_total_bytes is None:
            used, total = to_int(mem.group(1)), to_int(mem.group(2))
            last.vram_used_bytes = used * MIB if used is not None else None
            last.vram_total_bytes = total * MIB if total is not None else None
    return report


def parse_nvidia_smi_q(text: str) -> SmiReport:
    """`nvidia-smi -q` (whole, or with -d sections): Driver Version, CUDA Version and per "GPU <bus id>" block its
    Product Name, GPU UUID, Bus Id and "FB Memory Usage" Total / Used. GPUs are numbered in the order listed
    (nvidia-smi's own order). Tolerates the tool's error lines; never raises."""
    from rocmcheck.facts.parsers.gpu_health import q_tree

    report = SmiReport(tool="nvidia-smi")
    lines = clean_lines(text)
    for line in lines:
        m = _ERRORS.search(line.strip())
        if m and report.error is None:
            report.error = m.group(1)
    section: list[tuple[int, str]] = []
    gpu: SmiGpu | None = None
    for indent, key, value in q_tree("\n".join(lines)):
        if indent == 0 and key.startswith("GPU ") and not value:
            gpu = SmiGpu(index=len(report.gpus), pci_bus=key[4:].strip())
            report.gpus.append(gpu)
            section = []
            continue
        while section and section[-1][0] >= indent:
            section.pop()
        if not value:
            section.append((indent, key))
            continue
        value = none_if_na(value)
        if gpu is None:
            if key == "Driver Version":
                report.driver_version = value
            elif key == "CUDA Version":
                report.cuda_version = value
            continue
        names = [name for _, name in section]
        if not names and key == "Product Name":
            gpu.product_name = value
        elif not names and key == "GPU UUID":
            gpu.uuid = value
        elif names == ["FB Memory Usage"] and key in ("Total", "Used"):
            mib = _mib((value or "").replace("MiB", ""))
            if mib is not None:
                setattr(gpu, "vram_total_bytes" if key == "Total" else "vram_used_bytes", mib * MIB)
    return report


def parse_nvidia_smi_csv(text: str, fields: list[str]) -> SmiReport:
    """`nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`, with `fields` in query order.

    Known fields: index, name, memory.total, memory.used, driver_version, compute_cap, uuid,
    pci.device_id, pci.bus_id. Memory is MiB with or without the " MiB" unit. A header row, if present,
    is skipped. Unknown values ("[N/A]", "[Not Supported]") become None.
    """
    report = SmiReport(tool="nvidia-smi")
    names = [f.strip().lower() for f in fields]
    lines = [l for l in clean_lines(text) if l.strip()]
    for line in lines:
        m = _ERRORS.search(line)
        if m:
            report.error = report.error or m.group(1)
    rows = [l for l in lines if not _ERRORS.search(l)]
    try:
        parsed = list(csv.reader(rows, skipinitialspace=True))
    except csv.Error:
        parsed = [[c.strip() for c in row.split(",")] for row in rows]
    for row in parsed:
        if not row or _is_header(row, names):
            continue
        if len(row) != len(names):
            continue  # not a row of this query (a warning line, a cut-off paste)
        values = {name: none_if_na(cell) for name, cell in zip(names, row)}
        if all(v is None for v in values.values()):
            continue
        gpu = SmiGpu(index=len(report.gpus))
        _apply_csv_fields(gpu, values)
        if values.get("driver_version") and report.driver_version is None:
            report.driver_version = values["driver_version"]
        report.gpus.append(gpu)
    return report


def _is_header(row: list[str], names: list[str]) -> bool:
    """csv (without noheader) prints "index, name, memory.total [MiB]": the field names, with units."""
    cleaned = [re.sub(r"\s*\[.*?\]\s*$", "", cell).strip().lower() for cell in row]
    return cleaned == names


def _apply_csv_fields(gpu: SmiGpu, values: dict[str, str | None]) -> None:
    index = leading_int(values.get("index"))
    if index is not None:
        gpu.index = index
    gpu.product_name = values.get("name")
    gpu.uuid = values.get("uuid")
    gpu.compute_cap = values.get("compute_cap")
    gpu.device_id = values.get("pci.device_id")
    gpu.pci_bus = values.get("pci.bus_id")
    for field_name, attr in (("memory.total", "vram_total_bytes"), ("memory.used", "vram_used_bytes")):
        mib = _mib(values.get(field_name))
        if mib is not None:
            setattr(gpu, attr, mib * MIB)


def _mib(value: str | None) -> int | None:
    """81559 from "81559" (nounits) or "81559 MiB"; None for anything else."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*([0-9]+)\s*(MiB)?\s*", value)
    return to_int(m.group(1)) if m else None
