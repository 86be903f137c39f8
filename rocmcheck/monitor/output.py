"""The monitor's files and what it prints while the command runs.

Files are per node (`<host>` in every name), so one monitor per node writing into a shared folder gives files
that sit side by side and read back together (`read_samples` takes a folder). Each reading is written and
flushed as it is taken: a monitor killed with the job still leaves its curve.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import IO, Iterable

from rocmcheck.monitor.sample import COLUMNS, GpuSample
from rocmcheck.units import GIB, MIB, fmt_bytes


class SampleWriter:
    def __init__(self, out_dir: Path, host: str) -> None:
        self.out_dir = out_dir
        self.csv_path = out_dir / f"memory-{host}.csv"
        self.jsonl_path = out_dir / f"memory-{host}.jsonl"
        for path in (self.csv_path, self.jsonl_path):
            if path.exists():
                raise FileExistsError(str(path))
        out_dir.mkdir(parents=True, exist_ok=True)
        self._csv_file = open(self.csv_path, "w", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._csv_file, fieldnames=COLUMNS)
        self._csv.writeheader()
        self._jsonl = open(self.jsonl_path, "w", encoding="utf-8")

    def write(self, samples: Iterable[GpuSample]) -> None:
        for s in samples:
            row = s.to_dict()
            self._csv.writerow(row)
            self._jsonl.write(json.dumps(row) + "\n")
        self._csv_file.flush()
        self._jsonl.flush()

    def close(self) -> None:
        self._csv_file.close()
        self._jsonl.close()


def read_samples(paths: Iterable[Path]) -> list[GpuSample]:
    """Readings from JSONL/CSV files or folders of them (several nodes' files merge here). Bad lines are skipped."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            jsonl = sorted(p.glob("memory-*.jsonl"))
            files += jsonl or sorted(p.glob("memory-*.csv"))
        else:
            files.append(p)
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            if f.suffix == ".csv":
                for row in csv.DictReader(fh):
                    out.append(GpuSample.from_dict({k: _csv_value(k, v) for k, v in row.items()}))
            else:
                for line in fh:
                    try:
                        out.append(GpuSample.from_dict(json.loads(line)))
                    except (ValueError, TypeError):
                        continue
    return out


def _csv_value(key: str, value: str | None):
    if value in (None, ""):
        return None if key != "host" else ""
    if key == "host":
        return value
    if key == "gpu" or key.endswith("bytes"):
        return int(float(value))
    return float(value)


def trend_arrow(values: list[float]) -> str:
    """Direction over the last readings: floor of the newest third against the oldest third."""
    if len(values) < 6:
        return " "
    third = len(values) // 3
    delta = min(values[-third:]) - min(values[:third])
    if delta > 256 * MIB:
        return "↑"
    if delta < -256 * MIB:
        return "↓"
    return "→"


class StatusLine:
    """One line on a terminal (redrawn in place on stderr); a plain line every `every` seconds otherwise."""

    def __init__(self, stream: IO[str] | None = None, every: float = 30.0) -> None:
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = every
        self._last_plain = -1e9
        self._drawn = False

    def show(self, t: float, text: str) -> None:
        if self.tty:
            width = _width()
            self.stream.write("\r\x1b[K" + text[: width - 1])
            self._drawn = True
        elif t - self._last_plain >= self.every:
            self.stream.write(text + "\n")
            self._last_plain = t
        self.stream.flush()

    def clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return 120


def status_text(t: float, latest: dict[int, GpuSample], history: dict[int, list[float]]) -> str:
    parts = []
    for gpu, s in sorted(latest.items()):
        used = fmt_bytes(s.used_bytes, 1)
        cap = f"/{s.total_bytes / GIB:.0f}G" if s.total_bytes else ""
        extra = f" {s.power_w:.0f}W" if s.power_w is not None else ""
        extra += f" {s.util_pct:.0f}%" if s.util_pct is not None else ""
        parts.append(f"GPU{gpu} {used}{cap} {trend_arrow(history.get(gpu, []))}{extra}")
    return f"[rocmcheck monitor {t:.0f}s] " + ("  ".join(parts) if parts else "no GPU reading yet")


def plot(samples: list[GpuSample], path: Path, capacity: dict[str, int | None]) -> Path | None:
    """memory-<host>.png: used memory per GPU over time, capacity dashed. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    series: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        if s.used_bytes is not None:
            series.setdefault(_label(s), []).append((s.t, s.used_bytes / GIB))
    for label, pts in sorted(series.items()):
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, linewidth=1.2)
        cap = capacity.get(label)
        if cap:
            ax.axhline(cap / GIB, color=line.get_color(), linestyle="--", linewidth=0.8)
    ax.set_xlabel("seconds")
    ax.set_ylabel("GPU memory used (GiB)")
    ax.set_title("rocmcheck monitor: memory per GPU (dashed: capacity)")
    if series:
        ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(s: GpuSample) -> str:
    return f"{s.host}:{s.gpu}" if s.host else str(s.gpu)
