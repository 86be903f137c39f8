"""A cause's fix and its "what to paste next", from the catalogue's data to rocmcheck.fixes Fix values: a shell
template filled with fields (each quoted for the shell by fixes.shell), an edit, a note, or a fix rocmcheck.fixes
already has, used by name. A field the pastes do not give turns the fix into the catalogue's `otherwise`."""

from __future__ import annotations

import re
from typing import Any, Callable

from rocmcheck import fixes
from rocmcheck.fixes import Fix
from rocmcheck.triage.pasted import Pasted
from rocmcheck.triage.platform import ASK_PLATFORM, Platform
from rocmcheck.versions import series

# Interfaces that do not connect nodes: NCCL's socket transport should not pick them.
NOT_BETWEEN_NODES = re.compile(r"^(?:lo|docker\d*|br-[0-9a-f]+|veth\w*|virbr\d*|cni\d*|flannel[\w.]*)$")


def vendor_of(pasted: Pasted, flags: set[str], platform: Platform | None = None) -> str | None:
    """The GPU vendor the fixes are for: torch's build, else the paste's platform, else the GPUs pasted, else what
    the pastes show; None when the pastes show no vendor at all (and "cpu" for a macOS or CPU-only paste)."""
    if platform is not None and platform.vendor:
        return platform.vendor
    if platform is not None and platform.name in ("macos", "cpu"):
        return "cpu"
    torch = pasted.facts.probes.get("torch") or {}
    if torch.get("hip"):
        return "amd"
    if torch.get("cuda"):
        return "nvidia"
    vendors = {g.vendor for g in pasted.gpus if g.vendor}
    if len(vendors) == 1:
        return vendors.pop()
    if "amd" in flags and "nvidia" not in flags:
        return "amd"
    if "nvidia" in flags and "amd" not in flags:
        return "nvidia"
    return None


def rocm_version_of(pasted: Pasted) -> str | None:
    """The ROCm release torch was built for, as the wheel index names it ("6.2")."""
    torch = pasted.facts.probes.get("torch") or {}
    return series(torch.get("hip")) if torch.get("hip") else None


def _gpu_arch(pasted: Pasted) -> str | None:
    archs = {g.arch for g in pasted.gpus if g.arch and g.arch.startswith("gfx")}
    return archs.pop() if len(archs) == 1 else None


def _nccl_interface(pasted: Pasted) -> str | None:
    from rocmcheck.triage.readers.nccl_log import NcclLog

    for result in pasted.read.values():
        if isinstance(result, NcclLog):
            for entry in result.interfaces:
                name = entry.split(":", 1)[0]
                if name and not NOT_BETWEEN_NODES.match(name):
                    return name
    return None


FIELDS: dict[str, Callable[[Pasted], str | None]] = {
    "$gpu_arch": _gpu_arch,
    "$nccl_interface": _nccl_interface,
}


def build(data: dict[str, Any], pasted: Pasted, flags: set[str], platform: Platform | None = None) -> Fix:
    """The Fix a catalogue entry describes, for these pastes and the platform they show."""
    if "use" in data:
        return _named(data["use"], data.get("why", ""), pasted, flags, platform)
    if "note" in data:
        return fixes.note(data["note"])
    if "edit" in data:
        return fixes.edit(data["edit"]["file"], data["edit"]["change"], data.get("why", ""))
    values: dict[str, str] = {}
    for name, source in (data.get("fields") or {}).items():
        value = FIELDS[source](pasted) if source in FIELDS else source
        if value is None:
            return (build(data["otherwise"], pasted, flags, platform) if data.get("otherwise")
                    else fixes.note(data.get("why", "")))
        values[name] = value
    return fixes.shell(data["shell"], data.get("why", ""), **values)


def _named(name: str, why: str, pasted: Pasted, flags: set[str], platform: Platform | None = None) -> Fix:
    if name == "arch_list":  # torch printed the GPU's arch and its own arch list: the fix follows from the two
        from rocmcheck.triage import shapes

        gap = shapes.arch_list_gap(shapes.lines_of(block.text for _, block in pasted.blocks()))
        if gap is not None:
            return fixes.note(shapes.arch_list_advice(gap))
        name = "torch_reinstall"
    vendor = vendor_of(pasted, flags, platform)
    rocm = rocm_version_of(pasted)
    if vendor is None and name in ("torch_reinstall", "torch_replace", "docker_run"):
        return fixes.note("the paste does not show its platform (ROCm or CUDA, Linux, WSL, Windows or macOS), and the "
                          f"right torch build depends on it: paste the output of {ASK_PLATFORM}"
                          + (f"; then: {why}" if why else ""))
    if name == "torch_reinstall":
        return fixes.torch_install(vendor, rocm, reinstall=True, why=why)
    if name == "torch_replace":
        install = fixes.torch_install(vendor, rocm)
        return fixes.with_why(fixes.then(fixes.shell("pip uninstall -y torch"), install), why or install.why)
    if name == "docker_run":
        from rocmcheck.checks.containers import container_restart

        return container_restart(vendor, why)
    if name == "cuda_driver":
        from rocmcheck.triage.versions import driver_and_cuda, driver_claim_of

        lines = [line for _, block in pasted.blocks() for line in block.text.splitlines()]
        torch = pasted.facts.probes.get("torch") or {}
        return fixes.note(driver_claim_of(driver_and_cuda(lines, torch.get("cuda"))))
    if name == "container_engine":
        return fixes.note(container_engine_advice(vendor))
    if name in SHAPE_FIXES:
        return _shape_fix(name, pasted, vendor, platform)
    if name == "flash_attn_rebuild":
        arch = _gpu_arch(pasted)
        return fixes.flash_attn_rebuild((arch,) if arch else ())
    named = {"GROUPS_FIX": fixes.GROUPS_FIX, "SHM_FIX": fixes.SHM_FIX, "IOMMU_FIX": fixes.IOMMU_FIX,
             "NUMA_FIX": fixes.NUMA_FIX, "DEEPSPEED_REINSTALL": fixes.DEEPSPEED_REINSTALL}
    fix = named[name]
    return fixes.with_why(fix, why) if why else fix


SHAPE_FIXES = ("missing_library", "undefined_symbol", "requires_conflict", "module_install", "api_skew", "build_tool",
               "built_for", "version_requirement", "model_support", "other_cuda",
               "toolkit_for_gpu", "missing_header",
               "unsupported_arch", "wsl_kernel", "device_index", "os_resource", "foreign_binary", "dkms_module",
               "no_build_for_os", "port_in_use", "os_refused")


def _shape_fix(name: str, pasted: Pasted, vendor: str | None, platform: Platform | None = None) -> Fix:
    """A fix made by the generic readers (rocmcheck/triage/shapes.py, system_shapes.py) from the pasted lines
    themselves."""
    from rocmcheck.triage import shapes, system_shapes

    lines = shapes.lines_of(block.text for _, block in pasted.blocks())
    torch = pasted.facts.probes.get("torch") or {}
    if name == "missing_library":
        libs = shapes.missing_libraries(lines)
        build = shapes.torch_build(lines, torch.get("cuda"), torch.get("hip"))
        where = platform.name if platform is not None else None
        if libs:
            return fixes.note(shapes.library_advice(libs[0], build, where))
        return fixes.note(shapes.DLL_ADVICE if any(shapes.dll_failure(line) for line in lines) else
                          "a library the program loads is not found: ldd on the failing module lists it")
    if name == "undefined_symbol":
        symbols = shapes.undefined_symbols(lines)
        torch_version = torch.get("version") or (pasted.facts.packages or {}).get("torch")
        return fixes.note(shapes.symbol_advice(symbols[0], shapes.symbol_module(lines), torch_version) if symbols else
                          "the module was built against another version of a library it links")
    if name == "requires_conflict":
        return fixes.note(shapes.conflict_advice(shapes.conflicts(lines)))
    if name == "module_install":
        modules = shapes.missing_modules(lines)
        return fixes.note(shapes.module_advice(modules[0], platform.name if platform is not None else None) if modules
                          else
                          "install the package the message names, in the environment that runs the command")
    if name == "api_skew":
        return fixes.note(shapes.import_name_advice(lines))
    if name == "built_for":
        return fixes.note(shapes.built_for_advice(lines))
    if name == "version_requirement":
        return fixes.note(shapes.requirement_advice(shapes.requirements(lines)))
    if name == "model_support":
        return fixes.note(shapes.model_advice(lines))
    if name == "other_cuda":
        return fixes.note(shapes.other_cuda_advice(lines))
    if name == "toolkit_for_gpu":
        return fixes.note(shapes.toolkit_for_gpu_advice(lines))
    if name == "missing_header":
        return fixes.note(shapes.header_advice(lines))
    if name == "unsupported_arch":
        return fixes.note(shapes.unsupported_arch_advice(lines))
    if name == "wsl_kernel":
        return fixes.note(shapes.wsl_kernel_advice(lines))
    if name == "device_index":
        return fixes.note(shapes.device_index_advice(lines, vendor))
    if name == "os_resource":
        return fixes.note(system_shapes.resource_advice(system_shapes.resource_limits(lines)))
    if name == "foreign_binary":
        return fixes.note(system_shapes.foreign_binary_advice(system_shapes.foreign_binaries(lines)))
    if name == "no_build_for_os":
        where = platform.name if platform is not None else None
        return fixes.note(system_shapes.no_build_advice(system_shapes.package_without_build(lines, where)))
    if name == "port_in_use":
        return fixes.note(system_shapes.port_advice(system_shapes.port_in_use(lines)))
    if name == "os_refused":
        where = platform.name if platform is not None else None
        return fixes.note(system_shapes.os_refusal_advice(system_shapes.os_refusal(lines), where))
    if name == "dkms_module":
        return fixes.note(system_shapes.dkms_advice(system_shapes.dkms_failure(lines)))
    # The build's own message names what is missing: that, nothing else (and never the other vendor's compiler).
    other = {"amd": "nvcc", "nvidia": "hipcc"}.get(vendor or "")
    named = [n for n in shapes.build_tools_named(lines) if n != other]
    if named and (vendor != "cpu" or set(named) <= {"msvc", "cc", "ninja"}):
        return fixes.note(shapes.build_tool_advice(named))
    if vendor == "cpu":
        return fixes.note("the build needs a GPU compiler (CUDA's or ROCm's) this machine does not have (no NVIDIA or "
                          "AMD GPU stack, e.g. macOS): skip the package or use its CPU / MPS path (for flash-attn: "
                          "attn_implementation='sdpa'); a C/C++ compiler alone builds only CPU extensions")
    if vendor == "amd":
        return fixes.note("install the ROCm compilers the build needs (hipcc, the ROCm device libraries) and set "
                          "ROCM_PATH to the ROCm install, or install a prebuilt wheel for this ROCm")
    if vendor == "nvidia":
        return fixes.note("install the CUDA toolkit of torch's CUDA version (its nvcc) and set CUDA_HOME to it; a "
                          "C/C++ compiler (gcc/g++) and ninja (pip install ninja); or install a prebuilt wheel")
    return fixes.note("install the compiler the build names (a C/C++ compiler; the GPU toolkit's compiler, nvcc or "
                      "hipcc, of torch's CUDA or ROCm version) and ninja, or install a prebuilt wheel of the package")


def container_engine_advice(vendor: str | None) -> str:
    """What keeps the GPUs out of a container started with the right flags, for the vendor the paste shows."""
    amd = ("on Linux run the container with the native Docker Engine, not Docker Desktop (its containers run in a VM "
           "that has no /dev/kfd or /dev/dri); upgrade an old Docker whose --device nodes a non-root user cannot open")
    nvidia = ("install the NVIDIA Container Toolkit (and configure the engine for it) and start the container with "
              "--gpus all; on Linux prefer the native Docker Engine to Docker Desktop")
    if vendor == "amd":
        return amd
    if vendor == "nvidia":
        return nvidia
    return ("on Linux run the container with the native Docker Engine, not Docker Desktop (its containers run in a VM "
            "without the host's GPU devices); upgrade an old Docker; install the container runtime your GPU vendor "
            "documents, where it has one (the paste does not show the vendor)")


NAMED_FIXES = SHAPE_FIXES + ("arch_list", "container_engine", "cuda_driver", "torch_reinstall", "torch_replace",
                             "docker_run",
                             "flash_attn_rebuild", "GROUPS_FIX", "SHM_FIX", "IOMMU_FIX", "NUMA_FIX",
                             "DEEPSPEED_REINSTALL")
