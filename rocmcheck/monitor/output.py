"""The monitor's files and what it prints while the command runs.

Files are per node (`<host>` in every name), so one monitor per node writing into a shared folder gives files
that sit side by side and read back together (monitor/recording.py reads a folder). Each reading is written and
flushed as it is taken: a monitor killed with the job still leaves its curve. An existing file is never replaced
unless asked (--force), and never written through a symbolic link: the files are created new (O_EXCL,
O_NOFOLLOW); the plot and the verdict go through the one atomic writer (rocmcheck/safe/files.py). A disk that
fills up during the run stops the recording, never the sampling or the command: the readings stay in memory and
are judged at the end.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import IO, Iterable

from rocmcheck.errors import BadInput
from rocmcheck.monitor.sample import COLUMNS, GpuSample
from rocmcheck.report.progress import StatusLine  # noqa: F401 - the status line is the one progress display's
from rocmcheck.safe.files import describe_write_error, write_atomic
from rocmcheck.units import GIB, MIB, fmt_bytes

_NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9._-]")


def file_host(name: str) -> str:
    """This machine's name as it goes into file names: characters other than letters, digits, '.', '_' and '-'
    (a `/` in a name set with sethostname, a space) become '_'."""
    cleaned = _NOT_IN_FILE_NAMES.sub("_", name)[:253].lstrip(".")
    return cleaned or "host"


def _create(path: Path, force: bool) -> IO[str]:
    """A new file at path, opened for writing: never through a symbolic link, never over an existing file
    unless force (then the old one, or the link, is removed first)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    if force and os.path.lexists(path) and not os.path.isdir(path):
        os.unlink(path)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise BadInput(f"not overwriting {path}: it exists (add --force to replace it, or choose another --out)") \
            from None
    return open(fd, "w", newline="", encoding="utf-8")


class SampleWriter:
    def __init__(self, out_dir: Path, host: str, force: bool = False, stream: IO[str] | None = None) -> None:
        self.out_dir = out_dir
        self.csv_path = out_dir / f"memory-{host}.csv"
        self.jsonl_path = out_dir / f"memory-{host}.jsonl"
        self.failed: str | None = None  # why the recording stopped (a full disk), once it did
        self.written = 0
        self._stream = stream
        files: list[IO[str]] = []
        try:  # before the command starts: a read-only or full file system is bad input, said in one line
            out_dir.mkdir(parents=True, exist_ok=True)
            for path in (self.csv_path, self.jsonl_path):
                files.append(_create(path, force))
            self._csv_file, self._jsonl = files
            self._csv = csv.DictWriter(self._csv_file, fieldnames=COLUMNS)
            self._csv.writeheader()
            self._csv_file.flush()
        except OSError as exc:
            for f in files:
                try:
                    f.close()
                except OSError:
                    pass
            raise BadInput(describe_write_error(out_dir, exc)) from None

    def write(self, samples: Iterable[GpuSample]) -> None:
        """Write and flush the readings; on a write error (ENOSPC, EFBIG, EIO) stop recording, say so once on
        stderr, and keep going: the caller keeps the readings."""
        if self.failed is not None:
            return
        try:
            for s in samples:
                row = s.to_dict()
                self._csv.writerow(row)
                self._jsonl.write(json.dumps(row) + "\n")
                self.written += 1
            self._csv_file.flush()
            self._jsonl.flush()
        except (OSError, ValueError) as exc:
            self.failed = f"cannot write {self.jsonl_path.parent}: {getattr(exc, 'strerror', None) or exc}"
            stream = self._stream or sys.stderr
            print(f"rocmcheck monitor: {self.failed}; the recording stops after {self.written} readings (the "
                  "command and the sampling go on; the verdict judges every reading)", file=stream, flush=True)
            self.close()

    def close(self) -> None:
        for f in (self._csv_file, self._jsonl):
            try:
                f.close()
            except OSError:  # the last flush on a full disk
                pass


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


def status_text(t: float, latest: dict[int, GpuSample], history: dict[int, list[float]]) -> str:
    parts = []
    for gpu, s in sorted(latest.items()):
        used = fmt_bytes(s.used_bytes, 1)
        cap = f"/{s.total_bytes / GIB:.0f}G" if s.total_bytes else ""
        extra = f" {s.power_w:.0f}W" if s.power_w is not None else ""
        extra += f" {s.util_pct:.0f}%" if s.util_pct is not None else ""
        parts.append(f"GPU{gpu} {used}{cap} {trend_arrow(history.get(gpu, []))}{extra}")
    return f"[rocmcheck monitor {t:.0f}s] " + ("  ".join(parts) if parts else "no GPU reading yet")


def plot(samples: list[GpuSample], path: Path, capacity: dict[str, int | None], force: bool = False) -> Path | None:
    """memory-<host>.png: used memory per GPU over time, capacity dashed, written through the atomic writer.
    None without matplotlib. OSError/BadInput from the writer pass to the caller."""
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
        # `$` starts matplotlib's mathtext: a label is shown as the text it is
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label.replace("$", r"\$"), linewidth=1.2)
        cap = capacity.get(label)
        if cap:
            ax.axhline(cap / GIB, color=line.get_color(), linestyle="--", linewidth=0.8)
    ax.set_xlabel("seconds")
    ax.set_ylabel("GPU memory used (GiB)")
    ax.set_title("rocmcheck monitor: memory per GPU (dashed: capacity)")
    if series:
        ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return write_atomic(path, image.getvalue(), force=force)


def _label(s: GpuSample) -> str:
    return f"{s.host}:{s.gpu}" if s.host else str(s.gpu)
