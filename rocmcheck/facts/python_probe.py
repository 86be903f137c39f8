"""Child-process probes of the Python stack and the vendor bindings:
`python -m rocmcheck.facts.python_probe --request '{"probes": ["torch", "deepspeed"]}'` by hand (a parent passes
--request-file).

Importing torch, flash_attn or deepspeed can segfault (a HIP init bug), hang (a driver), or print to stdout
(DeepSpeed's accelerator banner). So they run in a child with a timeout, speaking rocmcheck/child.py's
channel: one {"event": "probe", "probe": name, "data": {...}} per probe, as soon as it is known (the parent,
facts/collect.py, reads them from run_child's events). No torch import at module level.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import traceback
from typing import Any, Callable

from rocmcheck.child import leave, open_channel, read_request
from rocmcheck.facts.torch_devices import describe_device


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
    # Where this Python looks for it: next to the source, or under PYTHONPYCACHEPREFIX when the person set one
    bytecode = importlib.util.cache_from_source(spec.origin)
    dont_write, prefix = bool(sys.flags.dont_write_bytecode or sys.dont_write_bytecode), sys.pycache_prefix
    existing = os.path.dirname(bytecode)
    while existing and not os.path.isdir(existing):  # Python creates the missing folders when it writes
        existing = os.path.dirname(existing)
    return {"source": spec.origin, "bytecode": bytecode, "cached": os.path.isfile(bytecode),
            "dont_write_bytecode": dont_write, "pycache_prefix": prefix,
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
        # index, name, arch, gcn_arch, capability, total_bytes: the one description (facts/torch_devices.py)
        out["devices"] = [describe_device(torch, i) for i in range(out["device_count"])]
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
            ops[name] = {"known": True, "compatible": compatible,
                         "installed": bool(out.get("installed_ops", {}).get(name))}
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


def probe_nvml() -> dict[str, Any]:
    """NVIDIA GPUs through the NVML binding (nvidia-ml-py, bound in facts/bindings.py), preferred over parsing
    nvidia-smi."""
    from rocmcheck.facts.bindings import BindingUnavailable, Nvml, attempt

    try:
        nvml = Nvml.open()
    except BindingUnavailable as exc:
        return exc.record
    with nvml:
        out: dict[str, Any] = {"installed": True, "driver_version": nvml.driver_version(),
                               "cuda_version": nvml.cuda_version(), "gpus": []}
        for i, handle in enumerate(nvml.handles):
            used, total = nvml.memory(handle)
            out["gpus"].append({"index": i, "name": nvml.gpu_name(handle), "memory_total": total,
                                "memory_used": used, "compute_cap": nvml.compute_cap(handle),
                                "uuid": nvml.uuid(handle), "health": attempt(nvml.health, handle)})
        return out


def probe_amdsmi() -> dict[str, Any]:
    """AMD GPUs through the amdsmi Python binding (ships with ROCm 6+; bound in facts/bindings.py), preferred
    over the amd-smi CLI."""
    from rocmcheck.facts.bindings import Amdsmi, BindingUnavailable, attempt

    try:
        amdsmi = Amdsmi.open()
    except BindingUnavailable as exc:
        return exc.record
    with amdsmi:
        gpus = []
        for i, handle in enumerate(amdsmi.handles):
            name, gfx = amdsmi.asic(handle)
            gpus.append({"index": i, "name": name, "gfx": gfx, "memory_total": amdsmi.memory_total(handle),
                         "health": attempt(amdsmi.health, handle)})
        return {"installed": True, "gpus": gpus}


def probe_environment() -> dict[str, Any]:
    """The interpreter itself and what is installed in it, read without importing the packages: asked first when
    the doctor judges another Python than its own (rocmcheck/facts/python_env.py), for the facts the parent would
    otherwise read in its own process (facts/collect.py)."""
    import platform

    from rocmcheck.facts.python_env import use_fallback_path

    use_fallback_path()
    from rocmcheck.facts.collect import PACKAGES, package_versions
    from rocmcheck.facts.extensions import collect_extensions

    versions, requires = package_versions()
    return {"python": platform.python_version(), "executable": sys.executable, "prefix": sys.prefix,
            "packages": versions, "torch_requires": requires, "extensions": collect_extensions(PACKAGES, os.environ)}


PROBES: dict[str, Callable[[], dict[str, Any]]] = {
    "environment": probe_environment,
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



if __name__ == "__main__":
    leave(main())
