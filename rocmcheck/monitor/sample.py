"""One reading of one GPU: what the monitor writes per line of its CSV/JSONL files."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from rocmcheck.facts.parsers.smi_monitor import GpuReading
from rocmcheck.record import Record


@dataclass
class GpuSample(Record):
    t: float  # seconds since the monitor started
    gpu: int  # index as the reading tool numbers it (NVML / amd-smi / nvidia-smi index)
    used_bytes: int | None = None  # device memory in use (all processes, as the driver counts it)
    total_bytes: int | None = None
    power_w: float | None = None
    util_pct: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None  # NVIDIA SM clock / AMD GFX clock
    mem_clock_mhz: float | None = None
    proc_bytes: int | None = None  # memory held by the watched processes on this GPU, where the tool says
    host: str = ""  # node name: files from several nodes merge

    @classmethod
    def of(cls, reading: GpuReading, t: float = 0.0) -> "GpuSample":
        """A tool's or binding's reading (facts/parsers/smi_monitor.py), stamped with its time."""
        return cls(t=t, **asdict(reading))


COLUMNS = [f.name for f in fields(GpuSample)]
