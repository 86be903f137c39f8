"""rocm-smi and amd-smi outputs -> SmiReport (one SmiGpu per GPU index), and merge_smi to combine them.

rocm-smi's concise table changed shape across releases (5.7: "GPU Temp (DieEdge) ..."; 6.0: "Device
[Model : Revision]" with the name on a second line; 6.2+: "Device Node IDs ... Partitions (Mem, Compute,
ID)"), so rows are read by pattern, not by column position. amd-smi changed its JSON top level (a list of
GPUs, later {"gpu_data": [...]}), so the JSON readers walk whatever shape they get.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import fields
from typing import Any, Iterable

from rocmcheck.facts.parsers._text import MAY_HIDE, clean_lines, folded, leading_int, none_if_na, to_int, to_text
from rocmcheck.facts.parsers.models import SmiGpu, SmiReport
from rocmcheck.units import UNIT_BYTES

# The tools' own failure text when the amdgpu driver is absent: rocm-smi "ERROR:root:Driver not initialized
# (amdgpu not found in modules)" (https://github.com/ROCm/ROCm/issues/1498), amd-smi "ERROR:root:Drivers not
# loaded (amdgpu, amd_hsmp, ionic, bnxt_en drivers not found in modules)" (amd-smi 10.1, Debian; both on stderr).
_SMI_ERRORS = re.compile(r"((?:ERROR:root:)?Drivers? not (?:initialized|loaded).*|ROCk module is NOT loaded.*)",
                         re.IGNORECASE)
# The tools' words when they see no GPU at all: rocm-smi "WARNING: No AMD GPUs specified", amd-smi "ERROR: Unable to
# detect any GPU devices, check amdgpu version and module status" (both in ROCm/ROCm#6176, /dev/kfd unusable).
_NO_GPU = re.compile(r"((?:WARNING:\s*)?No AMD GPUs specified.*|(?:ERROR:\s*)?Unable to detect any GPU devices.*)",
                     re.IGNORECASE)
# Every match of _SMI_ERRORS or _NO_GPU holds one of these words (case-folded).
_ERROR_WORDS = ("not initialized", "not loaded", "no amd gpus specified", "unable to detect any gpu devices")
_ROW = re.compile(r"^\s*(\d+)\s+\S")
_PARTITION = re.compile(r"\b(NPS\d|N/A)\s*,\s*([SDTQC]PX|N/A)(?:\s*,\s*(\d+|N/A))?", re.IGNORECASE)
_DEVICE_ID = re.compile(r"\b0x[0-9a-fA-F]{4}\b")
_PERCENT = re.compile(r"(?<![0-9.])([0-9]{1,30}(?:\.[0-9]{1,30})?)%")  # bounded: see nvidia_smi._MEMORY
# Each part read in one pass: a lazy `(.*?)\s*:` retried at each position of a run of spaces (quadratic).
_GPU_KV = re.compile(r"^\s*GPU\[(\d+)\]\s*:\s*+((?:[^:]*[^:\s])?)\s*:\s*((?:.*\S)?)\s*$")
_GFX = re.compile(r"^gfx[0-9a-f]+$", re.IGNORECASE)


# ---- rocm-smi ------------------------------------------------------------------------------------

def smi_error(text: str) -> str | None:
    """The tool's own failure line: the driver not loaded, or no GPU detected; None when it printed neither."""
    raw = to_text(text)
    low = folded(raw)
    if not any(word in low for word in _ERROR_WORDS) and not MAY_HIDE.search(raw):
        return None  # none of the failure lines' words, and nothing clean_lines removes could hide them
    for line in clean_lines(raw):
        stripped = line.strip()
        for pattern in (_SMI_ERRORS, _NO_GPU):
            m = pattern.search(stripped)
            if m:
                return m.group(1).removeprefix("ERROR:root:").strip()
    return None


# An in-kernel amdgpu (no amdgpu-dkms) has no version of its own: amd-smi prints the kernel's build string squashed
# ("Linuxversion6.8.0-79-generic(buildd@...)...", cut to "Linuxver" in its table banner), rocm-smi the kernel release
# ("6.14.0-28-generic"). amdgpu-dkms versions have no "-" ("6.7.0", "6.8.5").
_LINUX_BUILD = re.compile(r"^Linux\s*ver(?:sion)?\s*(?P<release>\d+\.\d+[0-9A-Za-z.+_~-]*?)?(?=\(|\s|$)", re.IGNORECASE)
_KERNEL_RELEASE = re.compile(r"^\d+\.\d+(?:\.\d+)?-[0-9A-Za-z][0-9A-Za-z._+~-]*$")


def amdgpu_driver_version(value: str | None) -> tuple[str | None, bool]:
    """(version, in_kernel) of the amdgpu driver as a tool printed it: the kernel release for an in-kernel driver
    (None when the tool cut it off), else the amdgpu-dkms version as printed. Never raises."""
    text = none_if_na(to_text(value).strip()) if value is not None else None
    if not text:
        return None, False
    m = _LINUX_BUILD.match(text)
    if m:
        return m.group("release"), True
    if _KERNEL_RELEASE.match(text):
        return text, True
    return text, False


def _set_driver(report: SmiReport, value: str | None) -> None:
    version, in_kernel = amdgpu_driver_version(value)
    if version is None and not in_kernel:
        return
    report.driver_version, report.driver_in_kernel = version, in_kernel


def _note_error(report: SmiReport, text: str) -> None:
    if report.error is None:
        report.error = smi_error(text)


def smi_driver_error(text: str) -> str | None:
    """rocm-smi's or amd-smi's "driver not loaded" line (stdout or stderr), without the logger prefix; else None."""
    for line in clean_lines(text):
        m = _SMI_ERRORS.search(line.strip())
        if m:
            return m.group(1).removeprefix("ERROR:root:").strip()
    return None


_DRIVER_LINE = re.compile(r"^\s*Driver version:\s*(\S+)", re.IGNORECASE)


def parse_rocm_smi(text: str) -> SmiReport:
    """rocm-smi's text outputs: the default concise table (ROCm 5.7 through 6.x layouts), and the "GPU[N] : key: value"
    lines of -a / --showallinfo, --showproductname, --showmeminfo, -i (product, model, gfx version, VRAM, compute and
    memory partition); "Driver version:" (-a, --showdriverversion; an in-kernel driver prints the kernel release)."""
    report = _parse_rocm_smi_concise(text)
    for line in clean_lines(text):
        m = _DRIVER_LINE.match(line)
        if m:
            _set_driver(report, m.group(1))
            break
    per_gpu = _gpu_key_values(text)
    if per_gpu:
        merged = merge_smi(report, _report_from_gpu_kv("rocm-smi", per_gpu))
        merged.tool = "rocm-smi"
        report = merged
    _note_error(report, text)
    return report


def _parse_rocm_smi_concise(text: str) -> SmiReport:
    report = SmiReport(tool="rocm-smi")
    columns: list[str] = []
    in_body = False
    last: SmiGpu | None = None
    for line in clean_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if report.error is None and _SMI_ERRORS.search(stripped):
            report.error = _SMI_ERRORS.search(stripped).group(1)
            continue
        if stripped.startswith("="):
            if report.gpus:
                in_body = False  # the "=====" after the rows closes the table
            continue
        if not columns and re.match(r"^(GPU|Device)\s{2,}", stripped):
            columns = stripped.split()
            in_body = True  # the legacy layout has no "=====" line between header and rows
            continue
        if not in_body:
            continue
        m = _ROW.match(line)
        if m and ("%" in line or "Mhz" in line or "W " in line) and to_int(m.group(1)) is not None:
            last = _concise_row(to_int(m.group(1)), line, columns)
            report.gpus.append(last)
        elif last is not None and not _ROW.match(line) and not last.product_name and line.startswith(" "):
            last.product_name = stripped  # 6.0-era layout: "Name (20 chars)" on the line under its row
    return report


def _concise_row(index: int, line: str, columns: list[str]) -> SmiGpu:
    gpu = SmiGpu(index=index)
    tokens = line.split()
    if "Node" in columns and len(tokens) > 1:
        gpu.node = leading_int(tokens[1])
    did = _DEVICE_ID.search(line)
    if did:
        gpu.device_id = did.group(0).lower()
    part = _PARTITION.search(line)
    if part:
        gpu.memory_partition = none_if_na(part.group(1))
        gpu.partition = none_if_na(part.group(2))
        gpu.partition_id = leading_int(part.group(3))
    if columns[-2:] == ["VRAM%", "GPU%"] and len(tokens) >= 3:
        # The table's last two cells, read in place: a cell that says "N/A" is not known, and the number of another
        # column (Fan's "0%") must not slide into its place.
        gpu.vram_used_percent, gpu.util_percent = _percent_cell(tokens[-2]), _percent_cell(tokens[-1])
    return gpu


def _percent_cell(cell: str) -> float | None:
    """"83%" -> 83.0; "N/A" (or anything else) -> None."""
    m = _PERCENT.fullmatch(cell)
    return _float(m.group(1)) if m else None


def parse_rocm_smi_productname(text: str) -> SmiReport:
    """`rocm-smi --showproductname` (also `-i`): "GPU[0]  : Card Series:  AMD Instinct MI300X OAM"."""
    return _report_from_gpu_kv("rocm-smi", _gpu_key_values(text))


def parse_rocm_smi_meminfo(text: str) -> SmiReport:
    """`rocm-smi --showmeminfo vram`: "GPU[0]  : VRAM Total Memory (B): 206141652992"."""
    return _report_from_gpu_kv("rocm-smi", _gpu_key_values(text))


def parse_rocm_smi_json(text: str) -> SmiReport:
    """`rocm-smi ... --json`: {"card0": {"Card Series": ..., "VRAM Total Memory (B)": "..."}, "system": {...}}."""
    report = SmiReport(tool="rocm-smi")
    data = _load_json(text)
    if not isinstance(data, dict):
        data = _cut_json_cards(text)  # a paste cut short is no JSON: read its "cardN" objects line by line
    if not data:
        _note_error(report, text)
        return report
    per_gpu: dict[int, dict[str, str]] = {}
    for key, value in data.items():
        if not isinstance(value, dict):
            continue
        m = re.fullmatch(r"card([0-9]+)", str(key).strip(), re.IGNORECASE)
        if m and to_int(m.group(1)) is not None:
            per_gpu[to_int(m.group(1))] = {str(k): str(v) for k, v in value.items()}
        elif str(key).lower() == "system":
            for k, v in value.items():
                if "driver version" in str(k).lower():
                    report.driver_version = none_if_na(str(v))
    report.gpus = _report_from_gpu_kv("rocm-smi", per_gpu).gpus
    return report


def _gpu_key_values(text: str) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for line in clean_lines(text):
        m = _GPU_KV.match(line)
        if m and to_int(m.group(1)) is not None:
            out.setdefault(to_int(m.group(1)), {})[m.group(2).strip()] = m.group(3).strip()
    return out


def _report_from_gpu_kv(tool: str, per_gpu: dict[int, dict[str, str]]) -> SmiReport:
    report = SmiReport(tool=tool)
    for index in sorted(per_gpu):
        gpu = SmiGpu(index=index)
        for key, value in per_gpu[index].items():
            _apply_rocm_smi_field(gpu, key.lower(), none_if_na(value))
        report.gpus.append(gpu)
    return report


def _apply_rocm_smi_field(gpu: SmiGpu, key: str, value: str | None) -> None:
    if value is None:
        return
    if key in ("card series", "device name", "card model name", "market name") and not gpu.product_name:
        gpu.product_name = value
    elif key in ("card model", "device id", "gpu id") and _DEVICE_ID.fullmatch(value):
        gpu.device_id = value.lower()
    elif key == "compute partition" and re.fullmatch(r"[SDTQC]PX", value, re.IGNORECASE):
        gpu.partition = value.upper()
    elif key == "memory partition" and re.fullmatch(r"NPS\d", value, re.IGNORECASE):
        gpu.memory_partition = value.upper()
    elif key == "gfx version" and _GFX.match(value):
        gpu.gfx = value.lower()
    elif key.startswith("vram total memory"):
        gpu.vram_total_bytes = leading_int(value)
    elif key.startswith("vram total used memory"):
        gpu.vram_used_bytes = leading_int(value)
    elif key == "node id":
        gpu.node = leading_int(value)
    elif key == "gpu use (%)":
        gpu.util_percent = _float(value)
    elif key in ("pci bus", "pcie bus"):
        gpu.pci_bus = value


# ---- amd-smi -------------------------------------------------------------------------------------

_AMD_VERSION_KEYS = {
    "tool_version": re.compile(r"(?:AMDSMI Tool:|\bAMD-SMI\b)\s*(\d[^\s|]*)", re.IGNORECASE),
    "rocm_version": re.compile(r"ROCm version:\s*([^\s|]+)", re.IGNORECASE),
    "driver_version": re.compile(r"amdgpu version:\s*([^\s|]+)", re.IGNORECASE),
}


def parse_amd_smi_version(text: str) -> SmiReport:
    """`amd-smi version`: "AMDSMI Tool: 24.7.1+8dc45db | AMDSMI Library version: 25.1.0.0 | ROCm version: 6.3.3"
    (newer ones add "| amdgpu version: 6.16.6"); also reads the same facts from amd-smi's table banner."""
    report = SmiReport(tool="amd-smi")
    joined = "\n".join(clean_lines(text))
    for attr, pattern in _AMD_VERSION_KEYS.items():
        m = pattern.search(joined)
        if m:
            if attr == "driver_version":
                _set_driver(report, m.group(1).strip())
            else:
                setattr(report, attr, none_if_na(m.group(1).strip()))
    _note_error(report, text)
    return report


def parse_amd_smi_list(text: str) -> SmiReport:
    """`amd-smi list`: "GPU: 0" blocks of "BDF:", "UUID:", "KFD_ID:", "NODE_ID:", "PARTITION_ID:" (the blocks of
    other devices, "AI_NIC: 0", "CPU: 0", are not GPUs)."""
    return parse_amd_smi_text(text)


def parse_amd_smi_text(text: str) -> SmiReport:
    """Any of amd-smi's text outputs made of "GPU: N" blocks (static, list, metric, firmware, partition): per GPU
    what its block names (market name, gfx target, BDF, UUID, KFD node, compute units, VRAM size or total, compute and
    memory partition), the driver version of the first GPU's DRIVER section, and the compute and memory partition of
    `amd-smi partition`'s tables (CURRENT_PARTITION, MEMORY_PARTITION, the --accelerator profile marked current).
    A GPU is the index amd-smi printed for it ("GPU: 3" is GPU 3)."""
    report = SmiReport(tool="amd-smi")
    for index, flat in _amd_smi_blocks(text):
        report.gpus.append(_amd_gpu(index, flat))
        if report.driver_version is None and report.driver_in_kernel is None:
            name, version = flat.get("driver.name"), flat.get("driver.version")
            if version and (name is None or str(name).lower() == "amdgpu"):
                _set_driver(report, str(version))
    by_index = {g.index: g for g in report.gpus}
    for index, facts in sorted(_partition_tables(text).items()):
        gpu = by_index.get(index)
        if gpu is None:
            gpu = by_index[index] = SmiGpu(index=index)
            report.gpus.append(gpu)
        for key, value in facts.items():
            if getattr(gpu, key) is None:
                setattr(gpu, key, value)
    report.gpus.sort(key=lambda g: g.index)
    _note_error(report, text)
    return report


# `amd-smi partition`: titled tables whose rows start with the GPU's index. Written against
# tests/fixtures/pastes/amd_smi/partition_current-table_NA-accelerator_plus-memory-blocks_4x-NPS1_ROCm-4477_excerpt.txt
# (CURRENT_PARTITION with ACCELERATOR_TYPE N/A, then "GPU: N / MEMORY_PARTITION: / CURRENT: NPS1" blocks) and
# partition_accelerator-profiles_DPX-current-star_MI300-class_amdsmi-132_excerpt.txt (the --accelerator profile table:
# one row per profile, a profile's GPU_ID left blank after its first, resource rows under it, "*" on the current one).
_PARTITION_TABLE = re.compile(r"^\s*(CURRENT_PARTITION|MEMORY_PARTITION|ACCELERATOR_PARTITION_PROFILES"
                              r"|ACCELERATOR_PARTITION_RESOURCES):\s*$")
_COMPUTE_MODE = re.compile(r"[SDTQC]PX", re.IGNORECASE)
_MEMORY_MODE = re.compile(r"NPS\d", re.IGNORECASE)


def _partition_tables(text: str) -> dict[int, dict[str, Any]]:
    """{gpu index: {"partition", "memory_partition", "partition_id"}} from `amd-smi partition`'s tables; only what a
    row shows: "N/A" and a profile not marked current say nothing."""
    out: dict[int, dict[str, Any]] = {}
    title: str | None = None
    header: list[str] = []
    gpu: int | None = None
    for line in clean_lines(text):
        m = _PARTITION_TABLE.match(line)
        if m:
            title, header, gpu = m.group(1), [], None
            continue
        tokens = line.split()
        if title is None or not tokens:
            continue
        if tokens[0] == "GPU:" or line.strip().endswith(":"):  # a "GPU: N" block, "Legend:": the table has ended
            title = None
            continue
        if tokens[0] in ("GPU_ID", "RESOURCE_INDEX"):
            header = tokens if tokens[0] == "GPU_ID" else []
            continue
        if not header:
            continue
        if not line[:1].isspace():
            gpu, tokens = to_int(tokens[0]), tokens[1:]
        if gpu is None or len(tokens) != len(header) - 1:  # a resource row under a profile, or a row cut short
            continue
        row = dict(zip(header[1:], tokens))
        facts = out.setdefault(gpu, {})
        if title == "CURRENT_PARTITION":
            _partition_fact(facts, "partition", row.get("ACCELERATOR_TYPE"), _COMPUTE_MODE)
            _partition_fact(facts, "memory_partition", row.get("MEMORY"), _MEMORY_MODE)
            if to_int(row.get("PARTITION_ID", "")) is not None:  # "0,1,2,...,7" (a host's array) is no one ID
                facts.setdefault("partition_id", to_int(row["PARTITION_ID"]))
        elif title == "MEMORY_PARTITION":
            _partition_fact(facts, "memory_partition", row.get("CURRENT_MEMORY_PARTITION"), _MEMORY_MODE)
        elif title == "ACCELERATOR_PARTITION_PROFILES" and row.get("ACCELERATOR_TYPE", "").endswith("*"):
            _partition_fact(facts, "partition", row["ACCELERATOR_TYPE"].rstrip("*"), _COMPUTE_MODE)
    return {gpu: facts for gpu, facts in out.items() if facts}


def _partition_fact(facts: dict[str, Any], key: str, value: str | None, shape: re.Pattern[str]) -> None:
    if value and shape.fullmatch(value.strip()):
        facts.setdefault(key, value.strip().upper())


def parse_amd_smi_static_json(text: str) -> SmiReport:
    """`amd-smi static --json` in any of its shapes: a list of GPU objects, {"gpu_data": [...]}, one GPU
    object, or (jq-filtered) just its "vram" object. Sizes are {"value": N, "unit": "MB"} where amd-smi's
    MB is MiB (196592 MB == rocm-smi's 206141652992 B on the same MI300X)."""
    report = SmiReport(tool="amd-smi")
    data = _load_json(text)
    _note_error(report, text)
    for position, obj in enumerate(_gpu_objects(data)):
        flat = _flatten(obj)
        index = leading_int(str(flat.get("gpu", ""))) if "gpu" in flat else position
        report.gpus.append(_amd_gpu(position if index is None else index, flat))
    return report


def parse_amd_smi_static(text: str) -> SmiReport:
    """`amd-smi static`, as JSON (--json) or as its text: "GPU: 0" blocks of "ASIC:", "BUS:", "VRAM:" sections."""
    if _load_json(text) is not None:
        return parse_amd_smi_static_json(text)
    return parse_amd_smi_static_text(text)


def parse_amd_smi_static_text(text: str) -> SmiReport:
    """`amd-smi static` without --json (its box table when run as plain `amd-smi`)."""
    raw = to_text(text)
    if _BOX_GPU_ROW.search(raw) and "GPU-Name" in raw:
        return parse_amd_smi_table(raw)
    return parse_amd_smi_text(raw)


# Plain `amd-smi`: a box table whose banner holds the versions and whose rows give, per GPU, "BDF GPU-Name" and then
# "GPU HIP-ID OAM-ID Partition-Mode | GFX-Uti Fan Mem-Usage" ("538/16304 MB": used/total, amd-smi's MB is MiB).
_BOX_GPU_ROW = re.compile(r"^\|\s*(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
                          r"(?P<name>[^|]{0,200}?)\s*\|", re.MULTILINE)
_BOX_ID_ROW = re.compile(r"^\|\s*(?P<gpu>\d{1,6})\s+(?P<hip>\d{1,6}|N/A)\s+(?P<oam>\d{1,6}|N/A)\s+"
                         r"(?P<mode>[^|]{0,200}?)\s*\|(?P<rest>[^|]{0,400})\|")
_BOX_MEMORY = re.compile(r"(?<![0-9])([0-9]{1,12})\s*/\s*([0-9]{1,12})\s*MB\b")


def parse_amd_smi_table(text: str) -> SmiReport:
    """Plain `amd-smi` (its default box table): the banner's tool, ROCm and amdgpu versions, and per GPU its BDF,
    name, index, partition mode and VRAM used / total. Stops at the Processes table. Never raises."""
    report = parse_amd_smi_version(text)
    gpu: SmiGpu | None = None
    for line in clean_lines(text):
        stripped = line.strip()
        if "Processes:" in stripped:
            break
        m = _BOX_GPU_ROW.match(stripped)
        if m:
            gpu = SmiGpu(index=len(report.gpus), product_name=none_if_na(m.group("name")), pci_bus=m.group("bdf"))
            report.gpus.append(gpu)
            continue
        m = _BOX_ID_ROW.match(stripped)
        if m and gpu is not None:
            index = to_int(m.group("gpu"))
            if index is not None:
                gpu.index = index
            mode = m.group("mode").upper()
            part = re.search(r"\b([SDTQC]PX)\b", mode)
            nps = re.search(r"\b(NPS\d)\b", mode)
            gpu.partition = part.group(1) if part else None
            gpu.memory_partition = nps.group(1) if nps else None
            mem = _BOX_MEMORY.search(m.group("rest"))
            if mem:
                used, total = to_int(mem.group(1)), to_int(mem.group(2))
                gpu.vram_used_bytes = size_bytes(used, "MB") if used is not None else None
                gpu.vram_total_bytes = size_bytes(total, "MB") if total is not None else None
            gpu = None
    return report


def _gpu_objects(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return [d for d in data if isinstance(d, dict)]
    if not isinstance(data, dict):
        return []
    for key in ("gpu_data", "gpus"):
        if isinstance(data.get(key), list):
            return [d for d in data[key] if isinstance(d, dict)]
    if any(k in data for k in ("asic", "vram", "bus", "gpu")):
        return [data]
    if "size" in data or "vram_size" in data:  # jq '.[0]["vram"]': the vram object alone
        return [{"vram": data}]
    return []


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """{"asic": {"market_name": x}} -> {"asic.market_name": x}; {value, unit} pairs stay whole."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict) and not ("value" in obj and "unit" in obj):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{str(k).strip().lower()}."))
    else:
        out[prefix.rstrip(".")] = obj
    return out


def _amd_smi_blocks(text: str) -> Iterable[tuple[int, dict[str, Any]]]:
    """Yield (gpu index, {"asic.market_name": value, "bdf": value, ...}) per "GPU: N" block."""
    index: int | None = None
    flat: dict[str, Any] = {}
    sections: list[tuple[int, str]] = []  # (indent, name) of open "SECTION:" lines
    for line in clean_lines(text):
        if not line.strip():
            continue
        m = re.match(r"^\s*GPU:\s*([0-9]+)\s*$", line)
        if m and to_int(m.group(1)) is not None:
            if index is not None:
                yield index, flat
            index, flat, sections = to_int(m.group(1)), {}, []
            continue
        if _OTHER_DEVICE.match(line):  # "AI_NIC: 0", "CPU: 0": a block of another device ends the GPU's
            if index is not None:
                yield index, flat
            index, flat, sections = None, {}, []
            continue
        if index is None:
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        while sections and sections[-1][0] >= indent:
            sections.pop()
        if not value.strip():
            sections.append((indent, key.strip().lower()))
            continue
        path = ".".join([s for _, s in sections] + [key.strip().lower()])
        flat[path] = value.strip()
    if index is not None:
        yield index, flat


# A top-level block header of a device that is not a GPU (amd-smi list / static: "AI_NIC: 0", "CPU: 0", "NIC: 1").
_OTHER_DEVICE = re.compile(r"^(?!GPU:)[A-Z][A-Z0-9_]{0,30}:\s*[0-9]{1,6}\s*$")


def _amd_gpu(index: int, flat: dict[str, Any]) -> SmiGpu:
    gpu = SmiGpu(index=index)

    def first(*names: str) -> Any:
        for name in names:
            for key, value in flat.items():
                if (key == name or key.endswith("." + name)) and none_if_na(str(value)) is not None:
                    return value
        return None

    name = first("market_name", "product_name", "card_series")
    gpu.product_name = none_if_na(str(name)) if name is not None else None
    gfx = first("target_graphics_version", "gfx_version")
    if gfx is not None and _GFX.match(str(gfx).strip()):
        gpu.gfx = str(gfx).strip().lower()
    did = first("device_id")
    if did is not None and _DEVICE_ID.fullmatch(str(did).strip()):
        gpu.device_id = str(did).strip().lower()
    bdf = first("bdf")
    gpu.pci_bus = none_if_na(str(bdf)) if bdf is not None else None
    uuid = first("uuid")
    gpu.uuid = none_if_na(str(uuid)) if uuid is not None else None
    node = first("node_id")
    gpu.node = leading_int(str(node)) if node is not None else None
    pid = first("partition_id")
    gpu.partition_id = leading_int(str(pid)) if pid is not None else None
    part = first("compute_partition", "accelerator_partition")
    if part is not None and re.fullmatch(r"[SDTQC]PX", str(part).strip(), re.IGNORECASE):
        gpu.partition = str(part).strip().upper()
    mem = first("memory_partition", "memory_partition.current")  # `amd-smi partition`: "MEMORY_PARTITION: / CURRENT:"
    if mem is not None and re.fullmatch(r"NPS\d", str(mem).strip(), re.IGNORECASE):
        gpu.memory_partition = str(mem).strip().upper()
    size = first("vram.size", "vram.vram_size", "vram_size", "total_vram")
    gpu.vram_total_bytes = size_bytes(size, default_unit="MB")
    used = first("used_vram")
    gpu.vram_used_bytes = size_bytes(used, default_unit="MB") if used is not None else None
    cus = first("num_compute_units")
    gpu.compute_units = leading_int(str(cus)) if cus is not None else None
    return gpu


# The largest size a tool's report can mean: 2**50 bytes (a PiB), thousands of times the largest GPU memory
# (MI355X: 288 GB). Above it, or negative, NaN or infinite (`1e999` in JSON), a size is damage: not known.
MAX_SIZE_BYTES = 1 << 50


def size_bytes(value: Any, default_unit: str = "MB") -> int | None:
    """{"value": 196592, "unit": "MB"}, "196592 MB", 196592 -> bytes (amd-smi's MB is MiB); None for "N/A", an
    unknown unit, or a size that is not a finite number from 0 to MAX_SIZE_BYTES. Shared by the doctor's smi
    parsers and the monitor's. Never raises."""
    if value is None:
        return None
    if isinstance(value, dict):
        number, unit = value.get("value"), str(value.get("unit") or default_unit)
    else:
        m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)", str(value))
        if not m:
            return None
        number, unit = m.group(1), m.group(2) or default_unit
    amount = _float(number)
    factor = UNIT_BYTES.get(unit.strip().upper())
    if amount is None or factor is None:
        return None
    size = amount * factor
    return int(size) if 0 <= size <= MAX_SIZE_BYTES else None


# ---- combining -----------------------------------------------------------------------------------

def merge_smi(*reports: SmiReport | None) -> SmiReport:
    """One report from several (concise table + product names + memory + amd-smi): per GPU index, the
    first report that knows a field wins, so pass the most trusted source first."""
    present = [r for r in reports if r is not None]
    tools = list(dict.fromkeys(r.tool for r in present if r.tool))
    merged = SmiReport(tool="+".join(tools) if tools else "rocm-smi")
    by_index: dict[int, SmiGpu] = {}
    gpu_fields = [f.name for f in fields(SmiGpu) if f.name != "index"]
    report_fields = [f.name for f in fields(SmiReport) if f.name not in ("tool", "gpus")]
    for report in present:
        for name in report_fields:
            if getattr(merged, name) is None and getattr(report, name) is not None:
                setattr(merged, name, getattr(report, name))
        for gpu in report.gpus:
            target = by_index.setdefault(gpu.index, SmiGpu(index=gpu.index))
            for name in gpu_fields:
                if getattr(target, name) is None and getattr(gpu, name) is not None:
                    setattr(target, name, getattr(gpu, name))
    merged.gpus = [by_index[i] for i in sorted(by_index)]
    return merged


# ---- shared --------------------------------------------------------------------------------------

def _load_json(text: str) -> Any:
    """The JSON in a tool's stdout, tolerating warning lines printed before it."""
    raw = to_text(text).strip()
    if not raw:
        return None
    starts = [0] + [m.start() for m in re.finditer(r"^[\[{]", raw, re.MULTILINE)][:20]
    for start in starts:
        try:
            return json.loads(raw[start:])
        except (ValueError, RecursionError):
            continue
    return None


_CARD_OPEN = re.compile(r'^\s*"(card[0-9]{1,6}|system)"\s*:\s*\{\s*$', re.IGNORECASE)
_JSON_PAIR = re.compile(r'^\s*"((?:[^"\\]|\\.){1,200})"\s*:\s*"((?:[^"\\]|\\.){0,2000})"\s*,?\s*$')


def _cut_json_cards(text: str) -> dict[str, dict[str, str]]:
    """{"card0": {key: value}} from rocm-smi --json text that is not whole JSON (a paste cut short): its one-pair-a-
    line objects, read as far as they go. {} when there are none."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in clean_lines(text):
        m = _CARD_OPEN.match(line)
        if m:
            current = out.setdefault(m.group(1).lower(), {})
            continue
        if current is None:
            continue
        pair = _JSON_PAIR.match(line)
        if pair:
            current[pair.group(1)] = pair.group(2)
        elif line.strip().startswith("}"):
            current = None
    return out


def _float(value: Any) -> float | None:
    """A finite number from a number or its text ("12.5", "12.5%"), or None: also for true/false, NaN and the
    infinities (`1e999` in JSON parses as infinity), and for an int too large for a float."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else float(str(value).strip().rstrip("%"))
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
