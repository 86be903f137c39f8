"""Child-process probes of the Python stack and the vendor bindings:
`python -m rocmcheck.facts.python_probe --request '{"probes": ["torch", "deepspeed"]}'` by hand (a parent passes --request-file).

Importing torch, flash_attn or deepspeed can segfault (a HIP init bug), hang (a driver), or print to stdout
(DeepSpeed's accelerator banner). So they run in a child with a timeout, speaking rocmcheck/child.py's
channel: one {"event": "probe", "probe": name, "data": {...}} per probe, as soon as it is known. No torch
import at module level.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import traceback
from typing import Any, Callable

from rocmcheck.child import open_channel, parse_events, read_request
from rocmcheck.units import MIB

# amdsmi's amdsmi_status_t value for "Driver not loaded" (amdsmi_wrapper.py: AMDSMI_STATUS_DRIVER_NOT_LOADED = 34).
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34


def bytecode_state(package: str) -> dict[str, Any] | None:
    """Whether importing `package` reads compiled bytecode or compiles its source: looked up before it is
    imported (an import writes the bytecode where it can). None when the package is not found as source."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    bytecode = importlib.util.cache_from_source(spec.origin)  # follows PYTHONPYCACHEPREFIX
    existing = os.path.dirname(bytecode)
    while existing and not os.path.isdir(existing):  # Python creates the missing folders when it writes
        existing = os.path.dirname(existing)
    return {"source": spec.origin, "bytecode": bytecode, "cached": os.path.isfile(bytecode),
            "dont_write_bytecode": bool(sys.flags.dont_write_bytecode), "pycache_prefix": sys.pycache_prefix,
            "writable": bool(existing) and os.access(existing, os.W_OK),
            "site_dir": os.path.dirname(os.path.dirname(spec.origin))}


def probe_torch() -> dict[str, Any]:
    bytecode = bytecode_state("torch")
    import torch

    out: dict[str, Any] = {
        "bytecode": bytecode,
        "version": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None),
        "git_version": getattr(torch.version, "git_version", None),
    }
    # Compiled arch list without needing a visible GPU: get_arch_list() returns [] when no device is usable,
    # but the flags the wheel was built with are what "hipErrorNoBinaryForGpu" is about.
    flags = ""
    try:
        flags = torch._C._cuda_getArchFlags() or ""
    except Exception:  # CPU build: no such function
        flags = ""
    out["arch_flags"] = flags.split() if flags else []
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
        out["arch_list"] = torch.cuda.get_arch_list() if out["cuda_available"] else []
        devices = []
        for i in range(out["device_count"]):
            props = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "index": i,
                    "name": props.name,
                    "gcn_arch": getattr(props, "gcnArchName", None),
                    "capability": [props.major, props.minor],
                    "total_memory": int(props.total_memory),
                    "multi_processor_count": props.multi_processor_count,
                }
            )
        out["devices"] = devices
    except Exception as exc:  # HIP/CUDA init errors arrive here, e.g. "hipErrorNoBinaryForGpu"
        out["cuda_error"] = f"{type(exc).__name__}: {exc}"
    return out


def probe_flash_attn() -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        import flash_attn
    except ModuleNotFoundError as exc:
        if exc.name == "flash_attn":
            return {"installed": False}
        out["import_error"] = f"{type(exc).__name__}: {exc}"
        return {"installed": True, **out}
    except Exception as exc:  # "undefined symbol" after a torch upgrade lands here
        return {"installed": True, "import_error": f"{type(exc).__name__}: {exc}"}
    out["installed"] = True
    out["version"] = getattr(flash_attn, "__version__", None)
    try:
        import flash_attn_2_cuda  # noqa: F401  the compiled CK (ROCm) or CUDA extension

        out["extension"] = True
    except Exception as exc:
        out["extension"] = False
        out["extension_error"] = f"{type(exc).__name__}: {exc}"
    triton_env = os.environ.get("FLASH_ATTENTION_TRITON_AMD_ENABLE", "").upper() == "TRUE"
    out["triton_amd_enable"] = triton_env
    try:
        from flash_attn import flash_attn_func  # noqa: F401

        out["func_import"] = True
    except Exception as exc:
        out["func_import"] = False
        out["func_error"] = f"{type(exc).__name__}: {exc}"
    return out


# The ops a LLaMA fine-tune with DeepSpeed actually uses (ZeRO with fused/CPU Adam, offload).
DS_FINETUNE_OPS = ("fused_adam", "cpu_adam", "cpu_adagrad", "fused_lamb", "fused_lion", "cpu_lion", "async_io")


def probe_deepspeed() -> dict[str, Any]:
    try:
        import deepspeed
    except ModuleNotFoundError as exc:
        if exc.name == "deepspeed":
            return {"installed": False}
        return {"installed": True, "import_error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:
        return {"installed": True, "import_error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"installed": True, "version": deepspeed.__version__}
    try:
        from deepspeed import git_version_info as gvi

        out["torch_info"] = dict(getattr(gvi, "torch_info", {}) or {})
        out["installed_ops"] = dict(getattr(gvi, "installed_ops", {}) or {})
        out["compatible_ops_at_install"] = dict(getattr(gvi, "compatible_ops", {}) or {})
    except Exception as exc:
        out["git_version_info_error"] = str(exc)
    try:
        from deepspeed.accelerator import get_accelerator

        out["accelerator"] = get_accelerator()._name
    except Exception as exc:
        out["accelerator_error"] = str(exc)
    ops: dict[str, Any] = {}
    try:
        from deepspeed.ops.op_builder.all_ops import ALL_OPS

        for name in DS_FINETUNE_OPS:
            builder = ALL_OPS.get(name)
            if builder is None:
                ops[name] = {"known": False}
                continue
            try:
                compatible = bool(builder.is_compatible(verbose=False))
            except TypeError:
                compatible = bool(builder.is_compatible())
            except Exception as exc:
                compatible, ops_err = False, str(exc)
                ops[name] = {"known": True, "compatible": False, "error": ops_err}
                continue
            ops[name] = {"known": True, "compatible": compatible, "installed": bool(out.get("installed_ops", {}).get(name))}
    except Exception as exc:
        out["ops_error"] = f"{type(exc).__name__}: {exc}"
    out["ops"] = ops
    # What a JIT build of an op needs on this machine.
    try:
        from torch.utils.cpp_extension import is_ninja_available

        ninja = bool(is_ninja_available())
    except Exception:
        ninja = shutil.which("ninja") is not None
    include = sysconfig.get_paths().get("include") or ""
    out["jit"] = {
        "ninja": ninja,
        "cxx": shutil.which(os.environ.get("CXX", "c++")) is not None,
        "hipcc": shutil.which("hipcc") is not None,
        "nvcc": shutil.which("nvcc") is not None,
        "python_headers": os.path.exists(os.path.join(include, "Python.h")),
    }
    return out


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    """One binding call; None when the GPU or driver does not support it (NotSupported, NoPermission, ...)."""
    try:
        value = fn(*args)
    except Exception:
        return None
    return _text(value) if isinstance(value, bytes) else value


def _call(module: Any, name: str, *args: Any) -> Any:
    """_try on module.name; None when this version of the binding lacks the function."""
    fn = getattr(module, name, None)
    return _try(fn, *args) if fn is not None else None


def _nvml_health(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Error counters and link/clock state of one GPU (names as in NVML)."""
    unc, cor, vol, agg = 1, 0, 0, 1  # NVML_MEMORY_ERROR_TYPE_{UNCORRECTED,CORRECTED}, NVML_{VOLATILE,AGGREGATE}_ECC
    reasons = ("nvmlDeviceGetCurrentClocksEventReasons" if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
               else "nvmlDeviceGetCurrentClocksThrottleReasons")
    pci = _call(pynvml, "nvmlDeviceGetPciInfo", handle)
    ecc_mode = _call(pynvml, "nvmlDeviceGetEccMode", handle)
    remapped = _call(pynvml, "nvmlDeviceGetRemappedRows", handle)
    retired = {}
    for cause, name in ((1, "double_bit"), (0, "single_bit")):  # NVML_PAGE_RETIREMENT_CAUSE_*
        pages = _call(pynvml, "nvmlDeviceGetRetiredPages", handle, cause)
        retired[name] = len(pages) if isinstance(pages, (list, tuple)) else None
    return {
        "bus_id": _text(pci.busId) if pci is not None else None,
        "ecc_mode_current": ecc_mode[0] if isinstance(ecc_mode, (list, tuple)) else None,
        "ecc_uncorrected_volatile": _call(pynvml, "nvmlDeviceGetTotalEccErrors", handle, unc, vol),
        "ecc_corrected_volatile": _call(pynvml, "nvmlDeviceGetTotalEccErrors", handle, cor, vol),
        "ecc_uncorrected_aggregate": _call(pynvml, "nvmlDeviceGetTotalEccErrors", handle, unc, agg),
        "ecc_corrected_aggregate": _call(pynvml, "nvmlDeviceGetTotalEccErrors", handle, cor, agg),
        "retired_pages": retired,
        "retired_pages_pending": _call(pynvml, "nvmlDeviceGetRetiredPagesPendingStatus", handle),
        "remapped_rows": list(remapped) if isinstance(remapped, (list, tuple)) else None,  # corr, unc, pending, failure
        "clock_event_reasons": _call(pynvml, reasons, handle),
        "pcie_gen_current": _call(pynvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "pcie_gen_max": _call(pynvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),  # GPU and system together
        "pcie_width_current": _call(pynvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        "pcie_width_max": _call(pynvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
        "power_limit_mw": _call(pynvml, "nvmlDeviceGetEnforcedPowerLimit", handle),
        "power_default_limit_mw": _call(pynvml, "nvmlDeviceGetPowerManagementDefaultLimit", handle),
        "sm_clock_mhz": _call(pynvml, "nvmlDeviceGetClockInfo", handle, 1),
        "sm_clock_max_mhz": _call(pynvml, "nvmlDeviceGetMaxClockInfo", handle, 1),
        "mem_clock_mhz": _call(pynvml, "nvmlDeviceGetClockInfo", handle, 2),
        "mem_clock_max_mhz": _call(pynvml, "nvmlDeviceGetMaxClockInfo", handle, 2)  # NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2,
    }


def probe_nvml() -> dict[str, Any]:
    """NVIDIA GPUs through the NVML binding (nvidia-ml-py), preferred over parsing nvidia-smi."""
    try:
        import pynvml
    except ModuleNotFoundError:
        return {"installed": False}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded on machines without the driver
        return {"installed": True, "error": f"{type(exc).__name__}: {exc}"}
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()  # e.g. 13000 -> "13.0"
        out: dict[str, Any] = {"installed": True, "driver_version": _text(pynvml.nvmlSystemGetDriverVersion()),
                               "cuda_version": f"{cuda // 1000}.{cuda % 1000 // 10}", "gpus": []}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            out["gpus"].append({"index": i, "name": _text(pynvml.nvmlDeviceGetName(handle)),
                                "memory_total": int(mem.total), "memory_used": int(mem.used),
                                "compute_cap": f"{major}.{minor}", "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                                "health": _try(_nvml_health, pynvml, handle)})
        return out
    finally:
        pynvml.nvmlShutdown()


def _amdsmi_health(amdsmi: Any, handle: Any) -> dict[str, Any]:
    """Error counters and link/clock state of one GPU (names as in amdsmi's Python binding)."""
    pcie = _call(amdsmi, "amdsmi_get_pcie_info", handle) or {}
    static, metric = pcie.get("pcie_static") or {}, pcie.get("pcie_metric") or {}
    ecc = _call(amdsmi, "amdsmi_get_gpu_total_ecc_count", handle) or {}
    bad = _call(amdsmi, "amdsmi_get_gpu_bad_page_info", handle)
    metrics = _call(amdsmi, "amdsmi_get_gpu_metrics_info", handle) or {}
    cap = _call(amdsmi, "amdsmi_get_power_cap_info", handle) or {}
    clk_type = getattr(getattr(amdsmi, "AmdSmiClkType", None), "GFX", None)
    gfx = (_call(amdsmi, "amdsmi_get_clock_info", handle, clk_type) or {}) if clk_type is not None else {}
    activity = _call(amdsmi, "amdsmi_get_gpu_activity", handle) or {}
    return {
        "bus_id": _call(amdsmi, "amdsmi_get_gpu_device_bdf", handle),
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
        "perf_level": _call(amdsmi, "amdsmi_get_gpu_perf_level", handle),
    }


def import_amdsmi() -> tuple[Any, dict[str, Any] | None]:
    """(the amdsmi module, None), or (None, why it is not usable). Never raises, never prints.

    The real module fails in two ways on a machine that cannot serve it:
    - no libamd_smi.so (the PyPI package without ROCm's library): the import itself fails, after the
      module prints "Unable to find libamd_smi.so library ..." to stdout -> library_missing;
    - the library is there but amdgpu is not loaded: amdsmi_init() raises AmdSmiLibraryException with
      error code 34, AMDSMI_STATUS_DRIVER_NOT_LOADED (probe_amdsmi records it as driver_not_loaded).
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
        return None, {"installed": True, "import_error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # KeyError('libamd_smi.so') from its wrapper when no library loaded
        said = " ".join(line.strip() for line in printed.getvalue().splitlines() if line.strip())
        return None, {"installed": True, "library_missing": True,
                      "error": f"amdsmi could not load libamd_smi.so ({type(exc).__name__}: {exc})"
                               + (f": {said}" if said else "")}
    return amdsmi, None


def probe_amdsmi() -> dict[str, Any]:
    """AMD GPUs through the amdsmi Python binding (ships with ROCm 6+), preferred over the amd-smi CLI."""
    amdsmi, problem = import_amdsmi()
    if problem is not None:
        return problem
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:  # AmdSmiLibraryException when the driver is not loaded
        code = getattr(exc, "err_code", None)
        info = " ".join(str(getattr(exc, "err_info", "") or exc).split())
        return {"installed": True, "error": f"{type(exc).__name__}: {info}" + (f" (code {code})" if code else ""),
                "driver_not_loaded": code == AMDSMI_STATUS_DRIVER_NOT_LOADED or "DRIVER_NOT_LOADED" in info}
    try:
        gpus = []
        for i, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            asic = amdsmi.amdsmi_get_gpu_asic_info(handle)
            vram = amdsmi.amdsmi_get_gpu_vram_info(handle)
            # "vram_size" (MB) in current releases; "vram_size_mb" in the ROCm 6.0-era binding.
            mb = vram.get("vram_size", vram.get("vram_size_mb"))
            gpus.append({"index": i, "name": _text(asic.get("market_name", "")),
                         "gfx": _text(asic.get("target_graphics_version", "")) or None,
                         "memory_total": int(mb) * MIB if isinstance(mb, (int, float)) else None,
                         "health": _try(_amdsmi_health, amdsmi, handle)})
        return {"installed": True, "gpus": gpus}
    finally:
        amdsmi.amdsmi_shut_down()


PROBES: dict[str, Callable[[], dict[str, Any]]] = {
    "nvml": probe_nvml,
    "amdsmi": probe_amdsmi,
    "torch": probe_torch,
    "flash_attn": probe_flash_attn,
    "deepspeed": probe_deepspeed,
}


def main(argv: list[str] | None = None) -> int:
    request = read_request(argv, prog="python -m rocmcheck.facts.python_probe")
    names = request.get("probes", list(PROBES))
    if not isinstance(names, list) or not names or any(n not in PROBES for n in names):
        print(f"python_probe: 'probes' must be a list of: {' '.join(PROBES)}", file=sys.stderr)
        return 2
    channel = open_channel()
    # One child for several probes: torch is imported once. Each result is sent as soon as it is known, so if
    # a later import segfaults the earlier results survive and the parent knows who crashed.
    for name in names:
        try:
            data = PROBES[name]()
        except ModuleNotFoundError as exc:
            data = ({"installed": False} if exc.name == name
                    else {"installed": True, "import_error": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:
            data = {"installed": True, "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=3)}
        channel.emit("probe", probe=name, data=data)
    return 0


def parse_probe_output(stdout: str) -> dict[str, dict[str, Any]]:
    """{probe name: its data} from the child's events; anything else printed is ignored. Never raises."""
    found: dict[str, dict[str, Any]] = {}
    for event in parse_events(stdout)[0]:
        if event["event"] == "probe" and isinstance(event.get("probe"), str) and isinstance(event.get("data"), dict):
            found[event["probe"]] = event["data"]
    return found


if __name__ == "__main__":
    sys.exit(main())
