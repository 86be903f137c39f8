"""The vendor Python bindings, bound once: NVML through nvidia-ml-py's `pynvml`, and ROCm's `amdsmi`.

Two parts of rocmcheck ask them: the doctor's probe child (facts/python_probe.py: which GPUs, their memory,
names, error counters) and `rocmcheck monitor` (monitor/sampler.py: memory, power, clocks and processes every
interval). Both open, ask and close the bindings through the two classes here, so how a binding is imported,
started, asked and how it fails is written once.

- `Nvml.open()` / `Amdsmi.open()` import and start the binding and list its GPUs, or raise BindingUnavailable,
  whose `.record` says why in the doctor's terms: {"installed": False} when the module is absent;
  {"installed": True, "error": ...} when it cannot start (amdsmi adds `library_missing` / `driver_not_loaded`).
- Device calls come in two kinds: the facts the doctor must have (a name, a memory size) raise when the binding
  fails; `reading`, `processes` and `health` give None for each field the GPU or driver does not support
  (NotSupported on a partition, NoPermission, an old driver), so one missing counter never hides the others.

The bindings are imported only inside open(): importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from rocmcheck.facts.parsers.smi_monitor import GpuReading
from rocmcheck.units import MIB

# amdsmi's amdsmi_status_t value for "Driver not loaded" (amdsmi_wrapper.py: AMDSMI_STATUS_DRIVER_NOT_LOADED = 34).
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34
# NVML's enums, as nvidia-ml-py defines them (nvml.h): clocks, memory error types and counters, retirement causes.
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_UNCORRECTED, NVML_MEMORY_ERROR_CORRECTED = 1, 0
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
NVML_RETIRED_DOUBLE_BIT, NVML_RETIRED_SINGLE_BIT = 1, 0

Processes = dict[int, "int | None"]  # pid -> device memory it holds (None: the binding does not say)


class BindingUnavailable(Exception):
    """The binding cannot serve here. str(): one line for a person; .record: the doctor's record of why."""

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record


def text(value: Any) -> str:
    """A binding's string (some versions return bytes)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def attempt(fn: Callable[..., Any], *args: Any) -> Any:
    """One binding call; None when the GPU or driver does not support it (NotSupported, NoPermission, ...)."""
    try:
        value = fn(*args)
    except Exception:
        return None
    return text(value) if isinstance(value, bytes) else value


def call(module: Any, name: str, *args: Any) -> Any:
    """attempt() on module.name; None when this version of the binding lacks the function."""
    fn = getattr(module, name, None)
    return attempt(fn, *args) if fn is not None else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    """A binding's dict answer; {} for anything else ("N/A", None)."""
    return value if isinstance(value, dict) else {}


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _failed(what: str, exc: BaseException) -> BindingUnavailable:
    """The binding imported but cannot start (no driver, no GPU it may see)."""
    return BindingUnavailable(f"{what}: {_described(exc)}", {"installed": True, "error": _described(exc)})


class _Binding:
    module: Any
    handles: list[Any]

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> "_Binding":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---- NVML -----------------------------------------------------------------------------------------------------

class Nvml(_Binding):
    """NVIDIA GPUs through nvidia-ml-py (`import pynvml`)."""

    name = "nvml"

    def __init__(self, module: Any, handles: list[Any]) -> None:
        self.module, self.handles = module, handles

    @classmethod
    def open(cls) -> "Nvml":
        try:
            import pynvml
        except ModuleNotFoundError as exc:
            if exc.name == "pynvml":
                raise BindingUnavailable("nvidia-ml-py (pynvml) not installed", {"installed": False}) from None
            raise BindingUnavailable(f"pynvml: {_described(exc)}",
                                     {"installed": True, "import_error": _described(exc)}) from None
        except Exception as exc:
            raise BindingUnavailable(f"pynvml: {_described(exc)}",
                                     {"installed": True, "import_error": _described(exc)}) from None
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded on machines without the driver
            raise _failed("NVML", exc) from None
        try:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            call(pynvml, "nvmlShutdown")
            raise _failed("NVML", exc) from None
        return cls(pynvml, handles)

    def close(self) -> None:
        call(self.module, "nvmlShutdown")

    # -- what the doctor must know (raise when the binding fails) --
    def driver_version(self) -> str:
        return text(self.module.nvmlSystemGetDriverVersion())

    def cuda_version(self) -> str:
        cuda = int(self.module.nvmlSystemGetCudaDriverVersion())  # e.g. 13000 -> "13.0"
        return f"{cuda // 1000}.{cuda % 1000 // 10}"

    def gpu_name(self, handle: Any) -> str:
        return text(self.module.nvmlDeviceGetName(handle))

    def uuid(self, handle: Any) -> str:
        return text(self.module.nvmlDeviceGetUUID(handle))

    def memory(self, handle: Any) -> tuple[int, int]:
        """(used, total) bytes."""
        mem = self.module.nvmlDeviceGetMemoryInfo(handle)
        return int(mem.used), int(mem.total)

    def compute_cap(self, handle: Any) -> str:
        major, minor = self.module.nvmlDeviceGetCudaComputeCapability(handle)
        return f"{major}.{minor}"

    # -- readings (None per field the GPU does not support) --
    def reading(self, index: int) -> GpuReading:
        nv, h = self.module, self.handles[index]
        r = GpuReading(gpu=index)
        mem = attempt(self.memory, h)
        if mem is not None:
            r.used_bytes, r.total_bytes = mem
        power = _number(call(nv, "nvmlDeviceGetPowerUsage", h))  # milliwatts
        r.power_w = power / 1000 if power is not None else None
        util = call(nv, "nvmlDeviceGetUtilizationRates", h)
        r.util_pct = _number(getattr(util, "gpu", None))
        r.temp_c = _number(call(nv, "nvmlDeviceGetTemperature", h, NVML_TEMPERATURE_GPU))
        r.sm_clock_mhz = _number(call(nv, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM))
        r.mem_clock_mhz = _number(call(nv, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM))
        return r

    def processes(self, index: int) -> Processes:
        """The compute processes holding memory on GPU `index`."""
        running = call(self.module, "nvmlDeviceGetComputeRunningProcesses", self.handles[index]) or []
        out: Processes = {}
        for p in running:
            pid, used = getattr(p, "pid", None), getattr(p, "usedGpuMemory", None)
            if isinstance(pid, int):
                out[pid] = int(used) if isinstance(used, int) else None
        return out

    def health(self, handle: Any) -> dict[str, Any]:
        """Error counters and link/clock state of one GPU (names as in NVML)."""
        nv = self.module
        reasons = ("nvmlDeviceGetCurrentClocksEventReasons" if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
                   else "nvmlDeviceGetCurrentClocksThrottleReasons")
        pci = call(nv, "nvmlDeviceGetPciInfo", handle)
        ecc_mode = call(nv, "nvmlDeviceGetEccMode", handle)
        remapped = call(nv, "nvmlDeviceGetRemappedRows", handle)
        retired = {}
        for cause, label in ((NVML_RETIRED_DOUBLE_BIT, "double_bit"), (NVML_RETIRED_SINGLE_BIT, "single_bit")):
            pages = call(nv, "nvmlDeviceGetRetiredPages", handle, cause)
            retired[label] = len(pages) if isinstance(pages, (list, tuple)) else None
        unc, cor = NVML_MEMORY_ERROR_UNCORRECTED, NVML_MEMORY_ERROR_CORRECTED
        vol, agg = NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC
        return {
            "bus_id": text(pci.busId) if pci is not None else None,
            "ecc_mode_current": ecc_mode[0] if isinstance(ecc_mode, (list, tuple)) else None,
            "ecc_uncorrected_volatile": call(nv, "nvmlDeviceGetTotalEccErrors", handle, unc, vol),
            "ecc_corrected_volatile": call(nv, "nvmlDeviceGetTotalEccErrors", handle, cor, vol),
            "ecc_uncorrected_aggregate": call(nv, "nvmlDeviceGetTotalEccErrors", handle, unc, agg),
            "ecc_corrected_aggregate": call(nv, "nvmlDeviceGetTotalEccErrors", handle, cor, agg),
            "retired_pages": retired,
            "retired_pages_pending": call(nv, "nvmlDeviceGetRetiredPagesPendingStatus", handle),
            # corrected, uncorrected, pending, failure
            "remapped_rows": list(remapped) if isinstance(remapped, (list, tuple)) else None,
            "clock_event_reasons": call(nv, reasons, handle),
            "pcie_gen_current": call(nv, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "pcie_gen_max": call(nv, "nvmlDeviceGetMaxPcieLinkGeneration", handle),  # GPU and system together
            "pcie_width_current": call(nv, "nvmlDeviceGetCurrPcieLinkWidth", handle),
            "pcie_width_max": call(nv, "nvmlDeviceGetMaxPcieLinkWidth", handle),
            "power_limit_mw": call(nv, "nvmlDeviceGetEnforcedPowerLimit", handle),
            "power_default_limit_mw": call(nv, "nvmlDeviceGetPowerManagementDefaultLimit", handle),
            "sm_clock_mhz": call(nv, "nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM),
            "sm_clock_max_mhz": call(nv, "nvmlDeviceGetMaxClockInfo", handle, NVML_CLOCK_SM),
            "mem_clock_mhz": call(nv, "nvmlDeviceGetClockInfo", handle, NVML_CLOCK_MEM),
            "mem_clock_max_mhz": call(nv, "nvmlDeviceGetMaxClockInfo", handle, NVML_CLOCK_MEM),
        }


# ---- amdsmi ---------------------------------------------------------------------------------------------------

def import_amdsmi() -> tuple[Any, dict[str, Any] | None]:
    """(the amdsmi module, None), or (None, why it is not usable). Never raises, never prints.

    The real module fails in two ways on a machine that cannot serve it:
    - no libamd_smi.so (the PyPI package without ROCm's library): the import itself fails, after the
      module prints "Unable to find libamd_smi.so library ..." to stdout -> library_missing;
    - the library is there but amdgpu is not loaded: amdsmi_init() raises AmdSmiLibraryException with
      error code 34, AMDSMI_STATUS_DRIVER_NOT_LOADED (Amdsmi.open records it as driver_not_loaded).
    """
    import contextlib
    import io

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):  # the module prints its library search to stdout
            import amdsmi
    except ModuleNotFoundError as exc:
        if exc.name == "amdsmi":
            return None, {"installed": False}
        return None, {"installed": True, "import_error": _described(exc)}
    except Exception as exc:  # KeyError('libamd_smi.so') from its wrapper when no library loaded
        said = " ".join(line.strip() for line in printed.getvalue().splitlines() if line.strip())
        return None, {"installed": True, "library_missing": True,
                      "error": f"amdsmi could not load libamd_smi.so ({_described(exc)})"
                               + (f": {said}" if said else "")}
    return amdsmi, None


class Amdsmi(_Binding):
    """AMD GPUs through ROCm's amdsmi binding (ROCm 6+)."""

    name = "amdsmi"

    def __init__(self, module: Any, handles: list[Any]) -> None:
        self.module, self.handles = module, handles

    @classmethod
    def open(cls) -> "Amdsmi":
        amdsmi, problem = import_amdsmi()
        if problem is not None:
            message = problem.get("error") or problem.get("import_error") or "amdsmi Python binding not installed"
            raise BindingUnavailable(message, problem)
        try:
            amdsmi.amdsmi_init()
        except Exception as exc:  # AmdSmiLibraryException when the driver is not loaded
            code = getattr(exc, "err_code", None)
            info = " ".join(str(getattr(exc, "err_info", "") or exc).split())
            error = f"{type(exc).__name__}: {info}" + (f" (code {code})" if code else "")
            raise BindingUnavailable(f"amdsmi: {error}", {
                "installed": True, "error": error,
                "driver_not_loaded": code == AMDSMI_STATUS_DRIVER_NOT_LOADED or "DRIVER_NOT_LOADED" in info}) from None
        try:
            handles = list(amdsmi.amdsmi_get_processor_handles())
        except Exception as exc:
            call(amdsmi, "amdsmi_shut_down")
            raise _failed("amdsmi", exc) from None
        return cls(amdsmi, handles)

    def close(self) -> None:
        call(self.module, "amdsmi_shut_down")

    # -- what the doctor must know (raise when the binding fails) --
    def asic(self, handle: Any) -> tuple[str, str | None]:
        """(market name, gfx target)."""
        asic = self.module.amdsmi_get_gpu_asic_info(handle)
        return text(asic.get("market_name", "")), text(asic.get("target_graphics_version", "")) or None

    def memory_total(self, handle: Any) -> int | None:
        vram = self.module.amdsmi_get_gpu_vram_info(handle)
        # "vram_size" (MB) in current releases; "vram_size_mb" in the ROCm 6.0-era binding.
        mb = _number(vram.get("vram_size", vram.get("vram_size_mb")))
        return int(mb) * MIB if mb is not None else None

    def uuid(self, handle: Any) -> str:
        return text(call(self.module, "amdsmi_get_gpu_device_uuid", handle) or "")

    # -- readings (None per field the GPU does not support) --
    def reading(self, index: int) -> GpuReading:
        smi, h = self.module, self.handles[index]
        r = GpuReading(gpu=index)
        vram = _dict(call(smi, "amdsmi_get_gpu_vram_usage", h))  # {"vram_total": MB, "vram_used": MB}
        used, total = _number(vram.get("vram_used")), _number(vram.get("vram_total"))
        r.used_bytes = int(used) * MIB if used is not None else None
        r.total_bytes = int(total) * MIB if total is not None else None
        power = _dict(call(smi, "amdsmi_get_power_info", h))
        r.power_w = next((_number(power[k]) for k in ("current_socket_power", "average_socket_power", "socket_power")
                          if _number(power.get(k)) is not None), None)
        activity = _dict(call(smi, "amdsmi_get_gpu_activity", h))
        r.util_pct = _number(activity.get("gfx_activity"))
        temp_type = getattr(smi, "AmdSmiTemperatureType", None)
        temp_metric = getattr(smi, "AmdSmiTemperatureMetric", None)
        if temp_type is not None and temp_metric is not None:
            r.temp_c = _number(call(smi, "amdsmi_get_temp_metric", h, temp_type.HOTSPOT, temp_metric.CURRENT))
        clk_type = getattr(smi, "AmdSmiClkType", None)
        for attr, clk in (("sm_clock_mhz", "GFX"), ("mem_clock_mhz", "MEM")):
            kind = getattr(clk_type, clk, None)
            info = _dict(call(smi, "amdsmi_get_clock_info", h, kind)) if kind is not None else {}
            setattr(r, attr, _number(info.get("clk", info.get("cur_clk"))))  # "cur_clk" before ROCm 6.2
        return r

    def processes(self, index: int) -> Processes:
        """ROCm 6.2+: a list of dicts with "pid" and "memory_usage": {"vram_mem"}; before: process handles to
        pass to amdsmi_get_gpu_process_info."""
        smi, h = self.module, self.handles[index]
        out: Processes = {}
        for p in call(smi, "amdsmi_get_gpu_process_list", h) or []:
            info = p if isinstance(p, dict) else (call(smi, "amdsmi_get_gpu_process_info", h, p) or {})
            pid = info.get("pid") if isinstance(info, dict) else None
            if isinstance(pid, int):
                vram = _dict(info.get("memory_usage")).get("vram_mem")
                out[pid] = int(vram) if _number(vram) is not None else None
        return out

    def health(self, handle: Any) -> dict[str, Any]:
        """Error counters and link/clock state of one GPU (names as in amdsmi's Python binding)."""
        smi = self.module
        pcie = call(smi, "amdsmi_get_pcie_info", handle) or {}
        static, metric = pcie.get("pcie_static") or {}, pcie.get("pcie_metric") or {}
        ecc = call(smi, "amdsmi_get_gpu_total_ecc_count", handle) or {}
        bad = call(smi, "amdsmi_get_gpu_bad_page_info", handle)
        metrics = call(smi, "amdsmi_get_gpu_metrics_info", handle) or {}
        cap = call(smi, "amdsmi_get_power_cap_info", handle) or {}
        clk_type = getattr(getattr(smi, "AmdSmiClkType", None), "GFX", None)
        gfx = (call(smi, "amdsmi_get_clock_info", handle, clk_type) or {}) if clk_type is not None else {}
        activity = call(smi, "amdsmi_get_gpu_activity", handle) or {}
        return {
            "bus_id": call(smi, "amdsmi_get_gpu_device_bdf", handle),
            "ecc_correctable": ecc.get("correctable_count"),
            "ecc_uncorrectable": ecc.get("uncorrectable_count"),
            "ecc_deferred": ecc.get("deferred_count"),
            "bad_pages": len(bad) if isinstance(bad, (list, tuple)) else None,
            "throttle_status": metrics.get("throttle_status"),
            "pcie_speed_current_mts": metric.get("pcie_speed"),  # MT/s (16000 = Gen4, 32000 = Gen5)
            "pcie_speed_max_mts": static.get("max_pcie_speed"),
            "pcie_width_current": metric.get("pcie_width"),
            "pcie_width_max": static.get("max_pcie_width"),
            "power_cap": cap.get("power_cap"),
            "power_default_cap": cap.get("default_power_cap"),
            "gfx_clock_mhz": gfx.get("clk"),
            "gfx_clock_max_mhz": gfx.get("max_clk"),
            "gfx_activity": activity.get("gfx_activity"),
            "perf_level": call(smi, "amdsmi_get_gpu_perf_level", handle),
        }
