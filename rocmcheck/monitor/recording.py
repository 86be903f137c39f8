"""Reading recordings back (`rocmcheck monitor --replay`): the memory-<host>.jsonl / .csv files the monitor wrote,
from one node or several. They come from other machines and shared folders, so they are read as hostile input:
through the one capped reader (regular files only, never a FIFO or a device, at most MAX_RECORDING_BYTES, UTF-8),
each JSON line through the limited loader (no deep nesting, no NaN/Infinity), each value checked for its type and
range, and the host name checked before it can name a file or label a plot. Anything else is a BadInput with
one line naming the file and line: the CLI prints it and exits 2.

One allowance: a last line without its newline that does not parse is dropped. The monitor writes and flushes
one line per reading, so a monitor killed with its job can leave half a line at the end.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any, Iterable

from rocmcheck.errors import BadInput
from rocmcheck.monitor.sample import GpuSample
from rocmcheck.safe.files import read_text_capped
from rocmcheck.safe.structured import parse_json
from rocmcheck.units import MIB

# Eight GPUs read every second write 690,000 rows a day (a JSONL row is ~230 bytes: 160 MB a day); 512 MiB holds
# three days of that, and more at a longer --interval.
MAX_RECORDING_BYTES = 512 * MIB
# A host name as it may appear in a file name and a plot legend: letters, digits, '.', '_', '-' (RFC 1123 names
# and the underscores some clusters use), at most 253 characters. `a/b` would name a path, `$x$` is matplotlib's
# mathtext, an escape sequence would reach the terminal.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
# Ranges no real reading leaves: GPU indices (a node has at most a few dozen GPUs or partitions), seconds since
# the monitor started (ten years), sizes (a signed 64-bit counter), and every other figure (power, percent,
# degrees, MHz).
MAX_GPU_INDEX = 4096
MAX_T = 10 * 365 * 86400.0
MAX_BYTES = 2**63
MAX_FIGURE = 1e9
BYTE_FIELDS = ("used_bytes", "total_bytes", "proc_bytes")
FIGURE_FIELDS = ("power_w", "util_pct", "temp_c", "sm_clock_mhz", "mem_clock_mhz")


def valid_host(name: str) -> bool:
    return bool(HOST_NAME.fullmatch(name))


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{what} is {_shown(value)}, not a number")
    number = float(value) if not isinstance(value, int) or value.bit_length() < 1024 else math.inf
    if not math.isfinite(number):
        raise BadInput(f"{what} is {_shown(value)}, not a finite number")
    return number


def _shown(value: Any) -> str:
    text = repr(value)  # repr escapes control characters: nothing of the value reaches the terminal raw
    return text if len(text) <= 40 else text[:37] + "..."


def reading(row: Any) -> GpuSample:
    """One recorded row (a JSON object, or a CSV row already converted) as a GpuSample; BadInput when it is not a
    reading the monitor could have written."""
    if not isinstance(row, dict):
        raise BadInput(f"not a reading: {type(row).__name__} where a JSON object per line is expected")
    if "t" not in row or "gpu" not in row:
        raise BadInput("not a monitor reading (no \"t\" and \"gpu\"): a memory-<host>.jsonl/.csv file is expected")
    t = _number(row["t"], "t")
    if not 0 <= t <= MAX_T:
        raise BadInput(f"t is {_shown(row['t'])}: not seconds since the monitor started")
    gpu = row["gpu"]
    if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu < MAX_GPU_INDEX:
        raise BadInput(f"gpu is {_shown(gpu)}, not a GPU index (0-{MAX_GPU_INDEX - 1})")
    values: dict[str, Any] = {"t": t, "gpu": gpu}
    for name in BYTE_FIELDS:
        if row.get(name) is not None:
            size = _number(row[name], name)
            if not 0 <= size <= MAX_BYTES:
                raise BadInput(f"{name} is {_shown(row[name])}, not a size in bytes")
            values[name] = int(size)
    for name in FIGURE_FIELDS:
        if row.get(name) is not None:
            figure = _number(row[name], name)
            if abs(figure) > MAX_FIGURE:
                raise BadInput(f"{name} is {_shown(row[name])}: no GPU reads that")
            values[name] = figure
    host = row.get("host")
    if host is not None and host != "":
        if not isinstance(host, str) or not valid_host(host):
            raise BadInput(f"host is {_shown(host)}, not a host name (letters, digits, '.', '_', '-')")
        values["host"] = host
    return GpuSample(**values)


def _csv_cell(key: str, value: str | None) -> Any:
    if value is None or value == "":
        return None
    if key == "host":
        return value
    if key not in ("t", "gpu") and key not in BYTE_FIELDS and key not in FIGURE_FIELDS:
        return value  # a column of a newer rocmcheck: ignored by reading()
    try:
        number = float(value)
    except ValueError:
        raise BadInput(f"{key} is {_shown(value)}, not a number") from None
    if key == "gpu":
        if not math.isfinite(number) or number != int(number):
            raise BadInput(f"gpu is {_shown(value)}, not a GPU index")
        return int(number)
    return number


def _jsonl(path: Path, text: str) -> list[GpuSample]:
    out = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        unfinished = number == len(lines)  # the text does not end with a newline: a line cut off mid-write
        try:
            row = parse_json(line)
        except BadInput as exc:
            if unfinished:
                break
            raise BadInput(f"{path}:{number}: {exc}") from None
        try:
            out.append(reading(row))
        except BadInput as exc:
            raise BadInput(f"{path}:{number}: {exc}") from None
    return out


def _csv(path: Path, text: str) -> list[GpuSample]:
    out = []
    try:
        rows = csv.DictReader(io.StringIO(text, newline=""))
        if rows.fieldnames is None:
            return []
        if "t" not in rows.fieldnames or "gpu" not in rows.fieldnames:
            raise BadInput(f"{path}: not a monitor recording (its header has no t and gpu columns)")
        for row in rows:
            try:
                out.append(reading({k: _csv_cell(k, v) for k, v in row.items() if isinstance(k, str)}))
            except BadInput as exc:
                raise BadInput(f"{path}:{rows.line_num}: {exc}") from None
    except csv.Error as exc:
        raise BadInput(f"{path}: not a CSV recording ({exc})") from None
    return out


def recording_files(paths: Iterable[Path]) -> list[Path]:
    """The files to read: each file as given; a folder gives its memory-*.jsonl (or, without any, memory-*.csv)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            jsonl = sorted(p.glob("memory-*.jsonl"))
            files += jsonl or sorted(p.glob("memory-*.csv"))
        else:
            files.append(p)
    return files


def read_recordings(paths: Iterable[Path]) -> list[GpuSample]:
    """Every reading of every recording (several nodes' files merge here); BadInput for the first that is not one."""
    out: list[GpuSample] = []
    for f in recording_files(paths):
        text = read_text_capped(f, limit=MAX_RECORDING_BYTES, what="monitor recording")
        out += _csv(f, text) if f.suffix.lower() == ".csv" else _jsonl(f, text)
    return out
