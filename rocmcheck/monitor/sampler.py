"""Readers of GPU state: the vendor bindings (NVML through nvidia-ml-py's `pynvml`, ROCm's `amdsmi`) when they
import and see a GPU, the CLIs otherwise (nvidia-smi, amd-smi, rocm-smi, through the one runner). Each read gives
one GpuSample per GPU and {gpu: pids} of the processes holding memory there, where the tool can say.

A binding call costs microseconds inside this process; a CLI call starts a process (~50-200 ms of CPU), so CLI
readers are the fallback. No reader raises out of read(): a field that fails is None for that reading.
"""

from __future__ import annotations

from typing import Any, Callable

from rocmcheck.monitor.parse import (
    parse_amd_smi_monitor,
    parse_nvidia_compute_apps,
    parse_nvidia_query,
    parse_rocm_smi_monitor_json,
)
from rocmcheck.monitor.sample import GpuSample
from rocmcheck.runner import run_command
from rocmcheck.units import MIB

BACKENDS = ("auto", "nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi")
# The query the nvidia-smi reader sends. With a header row (no "noheader") the parser reads columns by name.
NVIDIA_QUERY = ["index", "uuid", "memory.used", "memory.total", "power.draw", "utilization.gpu",
                "temperature.gpu", "clocks.sm", "clocks.mem"]
# Fallback for drivers that refuse a field ("Field ... is not a valid field to query"): memory only.
NVIDIA_QUERY_MINIMAL = ["index", "uuid", "memory.used", "memory.total"]
AMD_SMI_MONITOR = ["amd-smi", "monitor", "-p", "-t", "-u", "-m", "-v", "-q"]
ROCM_SMI_MONITOR = ["rocm-smi", "--showuse", "--showmeminfo", "vram", "--showpower", "--showtemp", "--json"]


class ReaderError(Exception):
    """The reader cannot start here (binding missing, no driver, tool absent): the next one is tried."""


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # a binding call on a GPU partition or an old driver: that one field is unknown
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlReader:
    name = "nvml"
    vendor = "nvidia"

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:
            raise ReaderError("nvidia-ml-py (pynvml) not installed") from exc
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            raise ReaderError(f"NVML: {type(exc).__name__}: {exc}") from exc
        self.nv = pynvml
        try:
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self.close()
            raise ReaderError(f"NVML: {type(exc).__name__}: {exc}") from exc
        if not self.handles:
            self.close()
            raise ReaderError("NVML sees no GPU")
        self.uuids = {i: _text(_try(lambda h=h: pynvml.nvmlDeviceGetUUID(h)) or "") for i, h in enumerate(self.handles)}

    def read(self) -> tuple[list[GpuSample], dict[int, dict[int, int | None]]]:
        nv = self.nv
        samples, procs = [], {}
        for i, h in enumerate(self.handles):
            s = GpuSample(t=0.0, gpu=i)
            mem = _try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
            if mem is not None:
                s.used_bytes, s.total_bytes = int(mem.used), int(mem.total)
            power = _try(lambda: nv.nvmlDeviceGetPowerUsage(h))  # milliwatts
            s.power_w = power / 1000 if power is not None else None
            util = _try(lambda: nv.nvmlDeviceGetUtilizationRates(h))
            s.util_pct = float(util.gpu) if util is not None else None
            s.temp_c = _try(lambda: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)))
            s.sm_clock_mhz = _try(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)))
            s.mem_clock_mhz = _try(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)))
            running = _try(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []
            procs[i] = {int(p.pid): (int(p.usedGpuMemory) if getattr(p, "usedGpuMemory", None) is not None
                                     else None) for p in running}
            samples.append(s)
        return samples, procs

    def close(self) -> None:
        _try(self.nv.nvmlShutdown)


class AmdsmiReader:
    name = "amdsmi"
    vendor = "amd"

    def __init__(self) -> None:
        from rocmcheck.facts.python_probe import import_amdsmi

        amdsmi, problem = import_amdsmi()
        if problem is not None:
            raise ReaderError(problem.get("error") or problem.get("import_error")
                              or "amdsmi Python binding not installed")
        try:
            amdsmi.amdsmi_init()
            self.handles = list(amdsmi.amdsmi_get_processor_handles())
        except Exception as exc:
            _try(amdsmi.amdsmi_shut_down)
            raise ReaderError(f"amdsmi: {type(exc).__name__}: {exc}") from exc
        self.smi = amdsmi
        if not self.handles:
            self.close()
            raise ReaderError("amdsmi sees no GPU")
        self.uuids = {i: _text(_try(lambda h=h: amdsmi.amdsmi_get_gpu_device_uuid(h)) or "")
                      for i, h in enumerate(self.handles)}

    def read(self) -> tuple[list[GpuSample], dict[int, dict[int, int | None]]]:
        smi = self.smi
        samples, procs = [], {}
        for i, h in enumerate(self.handles):
            s = GpuSample(t=0.0, gpu=i)
            vram = _try(lambda: smi.amdsmi_get_gpu_vram_usage(h)) or {}  # {"vram_total": MB, "vram_used": MB}
            if isinstance(vram.get("vram_used"), (int, float)):
                s.used_bytes = int(vram["vram_used"]) * MIB
            if isinstance(vram.get("vram_total"), (int, float)):
                s.total_bytes = int(vram["vram_total"]) * MIB
            power = _try(lambda: smi.amdsmi_get_power_info(h)) or {}
            for key in ("current_socket_power", "average_socket_power", "socket_power"):
                if isinstance(power.get(key), (int, float)):
                    s.power_w = float(power[key])
                    break
            activity = _try(lambda: smi.amdsmi_get_gpu_activity(h)) or {}
            s.util_pct = float(activity["gfx_activity"]) if isinstance(activity.get("gfx_activity"), (int, float)) else None
            s.temp_c = _try(lambda: float(smi.amdsmi_get_temp_metric(h, smi.AmdSmiTemperatureType.HOTSPOT,
                                                                        smi.AmdSmiTemperatureMetric.CURRENT)))
            for attr, clk in (("sm_clock_mhz", "GFX"), ("mem_clock_mhz", "MEM")):
                info = _try(lambda clk=clk: smi.amdsmi_get_clock_info(h, getattr(smi.AmdSmiClkType, clk))) or {}
                value = info.get("clk", info.get("cur_clk"))  # "cur_clk" before ROCm 6.2
                setattr(s, attr, float(value) if isinstance(value, (int, float)) else None)
            procs[i] = self._processes(h)
            samples.append(s)
        return samples, procs

    def _processes(self, h: Any) -> dict[int, int | None]:
        """ROCm 6.2+: a list of dicts with "pid" and "memory_usage": {"vram_mem"}; before: process handles to
        pass to amdsmi_get_gpu_process_info."""
        out: dict[int, int | None] = {}
        for p in _try(lambda: self.smi.amdsmi_get_gpu_process_list(h)) or []:
            info = p if isinstance(p, dict) else (_try(lambda p=p: self.smi.amdsmi_get_gpu_process_info(h, p)) or {})
            pid = info.get("pid")
            if isinstance(pid, int):
                vram = (info.get("memory_usage") or {}).get("vram_mem")
                out[pid] = int(vram) if isinstance(vram, (int, float)) else None
        return out

    def close(self) -> None:
        _try(self.smi.amdsmi_shut_down)


class _CliReader:
    """A reader over one tool's command line: its first reading must show a GPU; there is nothing to close."""

    name = ""

    def __init__(self, timeout: float = 15.0) -> None:
        self.timeout = timeout
        self.uuids: dict[int, str] = {}
        samples, _ = self.read()
        if not samples:
            raise ReaderError(self.failure or f"{self.name} printed no GPU")

    def _stdout(self, argv: list[str]) -> str | None:
        """The tool's output, or None (and the reason in self.failure) when it failed."""
        result = run_command(argv, self.timeout)
        self.failure = None if result.ok else result.describe_failure()
        return result.stdout if result.ok else None

    def read(self) -> tuple[list[GpuSample], dict[int, dict[int, int | None]]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class NvidiaSmiReader(_CliReader):
    name = "nvidia-smi"
    vendor = "nvidia"

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.fields = NVIDIA_QUERY
        samples, _ = self._query()
        if not samples:
            self.fields = NVIDIA_QUERY_MINIMAL
            samples, _ = self._query()
        if not samples:
            raise ReaderError(self.failure or "nvidia-smi printed no GPU")
        self.uuids = self._uuids

    def _query(self) -> tuple[list[GpuSample], dict[int, str]]:
        out = self._stdout(["nvidia-smi", f"--query-gpu={','.join(self.fields)}", "--format=csv,nounits"])
        samples, self._uuids = parse_nvidia_query(out, self.fields) if out is not None else ([], {})
        return samples, self._uuids

    def read(self) -> tuple[list[GpuSample], dict[int, dict[int, int | None]]]:
        samples, uuids = self._query()
        self.uuids = uuids or self.uuids
        by_uuid = {u: i for i, u in self.uuids.items()}
        apps = run_command(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,nounits"],
                           self.timeout)
        procs: dict[int, dict[int, int | None]] = {s.gpu: {} for s in samples}
        for app in parse_nvidia_compute_apps(apps.stdout) if apps.ok else []:
            gpu = by_uuid.get(app["gpu_uuid"])
            if gpu is not None:
                procs.setdefault(gpu, {})[app["pid"]] = app["used_bytes"]
        return samples, procs


class AmdSmiReader(_CliReader):
    name = "amd-smi"
    vendor = "amd"

    def read(self) -> tuple[list[GpuSample], dict[int, dict[int, int | None]]]:
        out = self._stdout(AMD_SMI_MONITOR)
        samples, rows = parse_amd_smi_monitor(out) if out is not None else ([], [])
        procs: dict[int, dict[int, int | None]] = {s.gpu: {} for s in samples}
        for row in rows:
            procs.setdefault(row["gpu"], {})[row["pid"]] = row["used_bytes"]
        return samples, procs


class RocmSmiReader(_CliReader):
    name = "rocm-smi"
    vendor = "amd"

    def read(self) -> tuple[list[GpuSample], dict[int, dict[int, int | None]]]:
        out = self._stdout(ROCM_SMI_MONITOR)
        samples = parse_rocm_smi_monitor_json(out) if out is not None else []
        return samples, {}  # rocm-smi's --showpids has no per-GPU memory; processes stay unknown


READERS: dict[str, Callable[[], Any]] = {
    "nvml": NvmlReader, "amdsmi": AmdsmiReader, "nvidia-smi": NvidiaSmiReader,
    "amd-smi": AmdSmiReader, "rocm-smi": RocmSmiReader,
}


def open_reader(backend: str = "auto") -> tuple[Any | None, list[str]]:
    """The first reader that starts and sees a GPU, and why the others did not."""
    names = list(READERS) if backend == "auto" else [backend]
    tried = []
    for name in names:
        try:
            return READERS[name](), tried
        except ReaderError as exc:
            tried.append(f"{name}: {exc}")
    return None, tried
