"""Readers of GPU state: the vendor bindings (NVML through nvidia-ml-py's `pynvml`, ROCm's `amdsmi`, both bound in
rocmcheck/facts/bindings.py) when they import and see a GPU, the CLIs otherwise (nvidia-smi, amd-smi, rocm-smi,
found where the doctor finds them -- rocmcheck.facts.tools.find_tool: PATH, then the ROCm roots -- and run through
the one runner, their outputs read by rocmcheck/facts/parsers/smi_monitor.py). Each read gives one GpuSample per
GPU and {gpu: pids} of the processes holding memory there, where the tool can say.

A binding call costs microseconds inside this process; a CLI call starts a process (~50-200 ms of CPU), so CLI
readers are the fallback. No reader raises out of read(): a field that fails is None for that reading.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from rocmcheck.facts.bindings import Amdsmi, BindingUnavailable, Nvml, attempt
from rocmcheck.facts.parsers.smi_monitor import (
    parse_amd_smi_monitor,
    parse_nvidia_compute_apps,
    parse_nvidia_query,
    parse_rocm_smi_monitor_json,
)
from rocmcheck.facts.tools import find_tool
from rocmcheck.monitor.sample import GpuSample
from rocmcheck.runner import run_command

BACKENDS = ("auto", "nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi")
# The query the nvidia-smi reader sends. With a header row (no "noheader") the parser reads columns by name.
NVIDIA_QUERY = ["index", "uuid", "memory.used", "memory.total", "power.draw", "utilization.gpu",
                "temperature.gpu", "clocks.sm", "clocks.mem"]
# Fallback for drivers that refuse a field ("Field ... is not a valid field to query"): memory only.
NVIDIA_QUERY_MINIMAL = ["index", "uuid", "memory.used", "memory.total"]
NVIDIA_APPS = ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,nounits"]
AMD_SMI_MONITOR = ["monitor", "-p", "-t", "-u", "-m", "-v", "-q"]  # after the amd-smi found
ROCM_SMI_MONITOR = ["--showuse", "--showmeminfo", "vram", "--showpower", "--showtemp", "--json"]

Holders = dict[int, dict[int, "int | None"]]  # gpu -> {pid: bytes it holds there (None: not said)}


class ReaderError(Exception):
    """The reader cannot start here (binding missing, no driver, tool absent): the next one is tried."""


class _BindingReader:
    """A reader over one binding (facts/bindings.py): its GPUs listed once, each read is one call per field."""

    name = ""
    vendor = ""
    binding: Any = None

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        try:
            self.smi = self.binding.open()
        except BindingUnavailable as exc:
            raise ReaderError(str(exc)) from None
        if not self.smi.handles:
            self.close()
            raise ReaderError(f"{self.name} sees no GPU")
        # "" where the binding cannot say: the GPU is still read, only CUDA_VISIBLE_DEVICES by UUID cannot match it
        self.uuids = {i: str(attempt(self.smi.uuid, h) or "") for i, h in enumerate(self.smi.handles)}

    def read(self) -> tuple[list[GpuSample], Holders]:
        samples, procs = [], {}
        for i in range(len(self.smi.handles)):
            samples.append(GpuSample.of(self.smi.reading(i)))
            procs[i] = self.smi.processes(i)
        return samples, procs

    def close(self) -> None:
        self.smi.close()


class NvmlReader(_BindingReader):
    name = "nvml"
    vendor = "nvidia"
    binding = Nvml


class AmdsmiReader(_BindingReader):
    name = "amdsmi"
    vendor = "amd"
    binding = Amdsmi


class _CliReader:
    """A reader over one tool's command line, found as the doctor finds it (find_tool: PATH, then the ROCm roots):
    its first reading must show a GPU; there is nothing to close."""

    name = ""
    vendor = ""

    def __init__(self, env: Mapping[str, str] | None = None, timeout: float = 15.0) -> None:
        self.timeout = timeout
        self.uuids: dict[int, str] = {}
        self.failure: str | None = None
        found = find_tool(self.name, os.environ if env is None else env)
        if found is None:
            raise ReaderError(f"{self.name} not found on PATH or under the ROCm roots")
        self.tool = found
        self._start()

    def _start(self) -> None:
        samples, _ = self.read()
        if not samples:
            raise ReaderError(self.failure or f"{self.name} printed no GPU")

    def _stdout(self, args: list[str]) -> str | None:
        """The tool's output, or None (and the reason in self.failure) when it failed."""
        result = run_command([self.tool, *args], self.timeout)
        self.failure = None if result.ok else result.describe_failure()
        return result.stdout if result.ok else None

    def read(self) -> tuple[list[GpuSample], Holders]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class NvidiaSmiReader(_CliReader):
    name = "nvidia-smi"
    vendor = "nvidia"

    def _start(self) -> None:
        self.fields = NVIDIA_QUERY
        samples, _ = self._query()
        if not samples:
            self.fields = NVIDIA_QUERY_MINIMAL
            samples, _ = self._query()
        if not samples:
            raise ReaderError(self.failure or "nvidia-smi printed no GPU")
        self.uuids = self._uuids

    def _query(self) -> tuple[list[GpuSample], dict[int, str]]:
        out = self._stdout([f"--query-gpu={','.join(self.fields)}", "--format=csv,nounits"])
        readings, self._uuids = parse_nvidia_query(out, self.fields) if out is not None else ([], {})
        return [GpuSample.of(r) for r in readings], self._uuids

    def read(self) -> tuple[list[GpuSample], Holders]:
        samples, uuids = self._query()
        self.uuids = uuids or self.uuids
        by_uuid = {u: i for i, u in self.uuids.items()}
        apps = run_command([self.tool, *NVIDIA_APPS], self.timeout)
        procs: Holders = {s.gpu: {} for s in samples}
        for app in parse_nvidia_compute_apps(apps.stdout) if apps.ok else []:
            gpu = by_uuid.get(app["gpu_uuid"])
            if gpu is not None:
                procs.setdefault(gpu, {})[app["pid"]] = app["used_bytes"]
        return samples, procs


class AmdSmiReader(_CliReader):
    name = "amd-smi"
    vendor = "amd"

    def read(self) -> tuple[list[GpuSample], Holders]:
        out = self._stdout(AMD_SMI_MONITOR)
        readings, rows = parse_amd_smi_monitor(out) if out is not None else ([], [])
        procs: Holders = {r.gpu: {} for r in readings}
        for row in rows:
            procs.setdefault(row["gpu"], {})[row["pid"]] = row["used_bytes"]
        return [GpuSample.of(r) for r in readings], procs


class RocmSmiReader(_CliReader):
    name = "rocm-smi"
    vendor = "amd"

    def read(self) -> tuple[list[GpuSample], Holders]:
        out = self._stdout(ROCM_SMI_MONITOR)
        readings = parse_rocm_smi_monitor_json(out) if out is not None else []
        return [GpuSample.of(r) for r in readings], {}  # rocm-smi's --showpids has no per-GPU memory


READERS: dict[str, Callable[..., Any]] = {
    "nvml": NvmlReader, "amdsmi": AmdsmiReader, "nvidia-smi": NvidiaSmiReader,
    "amd-smi": AmdSmiReader, "rocm-smi": RocmSmiReader,
}


def open_reader(backend: str = "auto", env: Mapping[str, str] | None = None) -> tuple[Any | None, list[str]]:
    """The first reader that starts and sees a GPU, and why the others did not."""
    names = list(READERS) if backend == "auto" else [backend]
    tried = []
    for name in names:
        try:
            return READERS[name](env), tried
        except ReaderError as exc:
            tried.append(f"{name}: {exc}")
    return None, tried
