"""The environment for building PyTorch, flash-attn and DeepSpeed from source: a pure function of
the chosen archs, the targets, the machine's cores/memory and the toolkit found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.buildenv.archs import ArchSelection
from rocmcheck.buildenv.jobs import JobsEstimate, estimate_jobs
from rocmcheck.buildenv.knowledge import build_facts
from rocmcheck.buildenv.toolkit import Toolkit
from rocmcheck.errors import BadInput
from rocmcheck.knowledge import arch_info, base_gfx

TARGETS = ("pytorch", "flash-attn", "deepspeed")
# flash-attn's nvcc runs this many threads per job; MAX_JOBS is sized for it (see jobs.py).
CUDA_NVCC_THREADS = 2


# Seen with Debian's ROCm packages (HIP 6.4, clang 21, CMake 4.3): with ROCM_PATH=/usr in the environment clang
# looks for the device libraries in /usr/amdgcn/bitcode (they are in clang's own resource directory there) and
# hipcc fails with "cannot find ROCm device library"; CMake's HIP language fails to configure. Without it both
# work, and torch.utils.cpp_extension reads ROCM_HOME first.
DISTRO_ROCM_PATH_NOTE = (
    "ROCm is in {root} (distribution packages): ROCM_PATH is left unset on purpose, and should stay unset "
    "(unset ROCM_PATH): with ROCM_PATH={root} clang looks for its device libraries in {root}/amdgcn/bitcode, where "
    "this layout has none (hipcc: 'cannot find ROCm device library'), and CMake's HIP language fails to configure. "
    "ROCM_HOME, which torch reads first, is set. PyTorch's own CMake defaults to /opt/rocm without ROCM_PATH: "
    "building PyTorch itself needs AMD's layout or the distribution's PyTorch package"
)




@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    why: str = ""


@dataclass(frozen=True)
class HostResources:
    cores: int
    available_bytes: int | None
    memory_source: str = "MemAvailable"


@dataclass
class BuildEnv:
    vendor: str
    archs: list[str]
    targets: list[str]
    triton_backend: bool
    jobs: JobsEstimate
    toolkit: Toolkit | None
    variables: list[EnvVar] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # about this configuration (warnings)
    commands: list[str] = field(default_factory=list)  # the build commands that go with it
    pitfalls: list[str] = field(default_factory=list)
    cmake_args: list[str] = field(default_factory=list)  # the same archs, for a CMake configure line

    def env(self) -> dict[str, str]:
        return {v.name: v.value for v in self.variables}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "vendor": self.vendor,
            "archs": list(self.archs),
            "targets": list(self.targets),
            "triton_backend": self.triton_backend,
            "env": self.env(),
            "why": {v.name: v.why for v in self.variables if v.why},
            "toolkit": None if self.toolkit is None else {
                "path": self.toolkit.path, "layout": self.toolkit.layout,
                "version": self.toolkit.version, "found_by": self.toolkit.found_by,
            },
            "max_jobs": {
                "value": self.jobs.max_jobs, "cores": self.jobs.cores,
                "available_bytes": self.jobs.available_bytes, "memory_source": self.jobs.memory_source,
                "gib_per_job": self.jobs.gib_per_job, "threads_per_job": self.jobs.threads_per_job,
                "rule": build_facts()["max_jobs"]["rule"], "sources": build_facts()["max_jobs"]["sources"],
            },
            "cmake_args": list(self.cmake_args),
            "notes": list(self.notes),
            "commands": list(self.commands),
            "pitfalls": list(self.pitfalls),
        }


def expand_targets(target: str) -> list[str]:
    if target == "all":
        return list(TARGETS)
    if target not in TARGETS:
        raise BadInput(f"unknown target {target!r}: choose one of {', '.join(TARGETS)}, all")
    return [target]


def compute_build_env(
    selection: ArchSelection,
    targets: list[str],
    host: HostResources,
    toolkit: Toolkit | None,
    triton_backend: bool = False,
) -> BuildEnv:
    if triton_backend and selection.vendor != "amd":
        raise BadInput("--triton-backend is flash-attn's ROCm switch (FLASH_ATTENTION_TRITON_AMD_ENABLE); "
                       "drop it for NVIDIA archs")
    threads = CUDA_NVCC_THREADS if selection.vendor == "nvidia" and "flash-attn" in targets else 1
    jobs = estimate_jobs(host.cores, host.available_bytes, threads_per_job=threads, memory_source=host.memory_source)
    out = BuildEnv(selection.vendor, list(selection.archs), list(targets), triton_backend, jobs, toolkit)
    out.notes.extend(selection.notes)
    if selection.vendor == "amd":
        _rocm(out, selection)
    else:
        _cuda(out, selection)
    return out


def _rocm(out: BuildEnv, sel: ArchSelection) -> None:
    facts = build_facts()
    v = out.variables
    if out.toolkit is not None:
        where = out.toolkit.describe()
        if out.toolkit.layout == "distro":
            out.notes.append(DISTRO_ROCM_PATH_NOTE.format(root=out.toolkit.path))
        else:
            v.append(EnvVar("ROCM_PATH", out.toolkit.path, f"ROCm: {where}"))
        v.append(EnvVar("ROCM_HOME", out.toolkit.path,
                        f"ROCm: {where}" if out.toolkit.layout == "distro" else
                        "read first by torch.utils.cpp_extension in older torch"))
        v.append(EnvVar("HIP_PATH", out.toolkit.path, "the ROCm root (HIP is no longer a separate tree)"))
    else:
        out.notes.append("ROCm not found (ROCM_PATH, ROCM_HOME, hipconfig, /opt/rocm, /opt/rocm/core*, "
                         "/opt/rocm-X.Y.Z, HIP in /usr): "
                         "set ROCM_PATH, ROCM_HOME and HIP_PATH to your ROCm root")
    v.append(EnvVar("USE_ROCM", "1", "build PyTorch for ROCm"))
    v.append(EnvVar("PYTORCH_ROCM_ARCH", ";".join(sel.archs),
                    "offload targets for PyTorch and every torch cpp_extension build"))
    v.append(EnvVar("MAX_JOBS", str(out.jobs.max_jobs), out.jobs.explain()))
    _cmake(out, rocm_cmake_args(sel.archs))

    if "flash-attn" in out.targets:
        v.append(EnvVar("BUILD_TARGET", "rocm", "flash-attn: build the ROCm extension even if detection is unsure"))
        if out.triton_backend:
            v.append(EnvVar("FLASH_ATTENTION_TRITON_AMD_ENABLE", "TRUE",
                            "flash-attn: Triton (aiter) backend instead of CK; set it when running too"))
        else:
            allowed = facts["flash_attn"]["ck_gpu_archs"]
            bases = list(dict.fromkeys(base_gfx(a) for a in sel.archs))  # flash-attn compares plain names
            ck = [a for a in bases if a in allowed]
            left_out = [a for a in bases if a not in allowed]
            if not ck:
                message = (
                    f"flash-attn's CK backend does not build for {', '.join(sel.archs)} "
                    f"(it accepts {', '.join(allowed)}); the Triton backend (--triton-backend) covers MI200/MI300 "
                    "and RDNA"
                )
                if out.targets == ["flash-attn"]:
                    raise BadInput(message)
                out.notes.append(message + "; GPU_ARCHS left unset")
            else:
                v.append(EnvVar("GPU_ARCHS", ";".join(ck),
                                "flash-attn CK kernels (an explicit list: 'native' needs a GPU at build time)"))
                if left_out:
                    out.notes.append(f"flash-attn CK has no kernels for {', '.join(left_out)}: left out of GPU_ARCHS")

    if "deepspeed" in out.targets:
        _deepspeed(out, rocm=True)

    out.commands.extend(_build_commands(out.targets, rocm=True))
    out.pitfalls.extend(_rocm_pitfalls(out, sel))
    out.pitfalls.extend(_deepspeed_optional(out))


def _cuda(out: BuildEnv, sel: ArchSelection) -> None:
    facts = build_facts()
    v = out.variables
    if out.toolkit is not None:
        v.append(EnvVar("CUDA_HOME", out.toolkit.path, f"CUDA: {out.toolkit.describe()}"))
    else:
        out.notes.append("CUDA toolkit not found (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda): set CUDA_HOME")
    capabilities = [arch_info(a).compute_capability or "" for a in sel.archs]  # type: ignore[union-attr]
    if "pytorch" in out.targets:
        v.append(EnvVar("USE_CUDA", "1", "build PyTorch for CUDA"))
    v.append(EnvVar("TORCH_CUDA_ARCH_LIST", ";".join(capabilities),
                    "compute capabilities for PyTorch and every torch cpp_extension build"))
    v.append(EnvVar("MAX_JOBS", str(out.jobs.max_jobs), out.jobs.explain()))
    _cmake(out, cuda_cmake_args(capabilities))

    if "flash-attn" in out.targets:
        v.append(EnvVar("BUILD_TARGET", "cuda", "flash-attn: build the CUDA extension"))
        flash = []
        for cap in capabilities:
            value = _flash_cuda_arch(cap, facts["flash_attn"]["cuda_archs"])
            if value and value not in flash:
                flash.append(value)
        if not flash:
            message = (f"flash-attn has no CUDA kernels for compute capability {', '.join(capabilities)} "
                       "(needs sm_80 or newer)")
            if out.targets == ["flash-attn"]:
                raise BadInput(message)
            out.notes.append(message)
        else:
            v.append(EnvVar("FLASH_ATTN_CUDA_ARCHS", ";".join(flash),
                            "flash-attn: -gencode only for these (sm_86/sm_89 run the sm_80 code)"))
        v.append(EnvVar("NVCC_THREADS", str(CUDA_NVCC_THREADS),
                        "flash-attn: nvcc threads per job; MAX_JOBS is sized for it"))

    if "deepspeed" in out.targets:
        _deepspeed(out, rocm=False)

    out.commands.extend(_build_commands(out.targets, rocm=False))
    out.pitfalls.extend(_common_pitfalls())
    out.pitfalls.extend(_deepspeed_optional(out))
    if "flash-attn" in out.targets:
        out.pitfalls.append(
            "flash-attn's setup.py first tries to download a prebuilt wheel; FLASH_ATTENTION_FORCE_BUILD=TRUE makes "
            "it build with these settings"
        )


def rocm_cmake_args(archs: list[str] | tuple[str, ...]) -> list[str]:
    """The -D arguments that give a CMake HIP project these offload targets.

    CMake reads no environment variable for HIP archs (it has CUDAARCHS for CUDA only), and a HIP project
    configured without them builds the compiler's default, gfx906. CMAKE_HIP_ARCHITECTURES is CMake's own
    (project(... LANGUAGES HIP)); GPU_TARGETS is what ROCm's CMake modules (find_package(hip), hip::device,
    rocBLAS, Composable Kernel, ...) read, and AMDGPU_TARGETS its older name.
    """
    value = ";".join(archs)
    return [f"-DCMAKE_HIP_ARCHITECTURES={value}", f"-DGPU_TARGETS={value}", f"-DAMDGPU_TARGETS={value}"]


def cuda_cmake_args(capabilities: list[str]) -> list[str]:
    """-DCMAKE_CUDA_ARCHITECTURES=90;80 from compute capabilities 9.0 and 8.0 (CMake's own CUDA list)."""
    return ["-DCMAKE_CUDA_ARCHITECTURES=" + ";".join(c.replace(".", "") for c in capabilities if c)]


def _cmake(out: BuildEnv, args: list[str]) -> None:
    out.cmake_args = list(args)
    out.variables.append(EnvVar(
        "CMAKE_ARGS", " ".join(args),
        "CMake projects: cmake -S . -B build $CMAKE_ARGS (unquoted: one argument per word); pip builds through "
        "scikit-build-core read CMAKE_ARGS themselves. CMake reads no environment variable for HIP archs"))


def _flash_cuda_arch(capability: str, allowed: list[str]) -> str | None:
    """'8.6' -> '80': the newest flash-attn target of the same major version not above it."""
    try:
        major, minor = (int(x) for x in capability.split("."))
    except ValueError:
        return None
    fits = [a for a in allowed if int(a) // 10 == major and int(a) <= major * 10 + minor]
    return max(fits, key=int) if fits else None


def _deepspeed(out: BuildEnv, rocm: bool) -> None:
    ds = build_facts()["deepspeed"]
    v = out.variables
    v.append(EnvVar("DS_ACCELERATOR", ds["accelerator"], "DeepSpeed: ROCm and CUDA both use the 'cuda' accelerator"
                    if rocm else "DeepSpeed: the CUDA accelerator"))
    v.append(EnvVar("DS_BUILD_OPS", "0", "DeepSpeed: prebuild only the ops below; the rest build on first use"))
    for op in ds["fine_tune_ops"]:
        v.append(EnvVar(op["var"], "1", "DeepSpeed: " + op["why"]))
    if rocm:
        for var in ds["rocm_incompatible_ops"]:
            v.append(EnvVar(var, "0", "DeepSpeed: incompatible with ROCm (its builder says so)"))


def _deepspeed_optional(out: BuildEnv) -> list[str]:
    if "deepspeed" not in out.targets:
        return []
    return [f"{op['var']}=1 is not set: {op['why']}" for op in build_facts()["deepspeed"]["optional_ops"]]


def _build_commands(targets: list[str], rocm: bool) -> list[str]:
    """The commands that build each target once the variables above are exported."""
    cmds: list[str] = []
    if "pytorch" in targets:
        cmds += ["PyTorch, in a checkout (git clone --recursive https://github.com/pytorch/pytorch):",
                 "  pip install -r requirements.txt"]
        if rocm:
            cmds.append("  python tools/amd_build/build_amd.py      # hipify the CUDA sources first")
        cmds.append("  pip install --no-build-isolation -v -e .")
    if "flash-attn" in targets and rocm:
        cmds += [
            "flash-attn, in a checkout (git clone --recursive https://github.com/Dao-AILab/flash-attention):",
            "  pip install --no-build-isolation --no-cache-dir -v .",
        ]
    elif "flash-attn" in targets:
        cmds += [
            "flash-attn:",
            "  FLASH_ATTENTION_FORCE_BUILD=TRUE pip install --no-build-isolation --no-cache-dir -v flash-attn",
        ]
    if "deepspeed" in targets:
        cmds += [
            "DeepSpeed with the ops above prebuilt:",
            "  pip install --no-build-isolation --no-cache-dir -v deepspeed",
            "  ds_report      # the prebuilt ops show as installed",
        ]
    return cmds


def _common_pitfalls() -> list[str]:
    return [
        "--no-build-isolation: without it pip builds against a fresh torch from PyPI, not the torch installed here",
        "--no-cache-dir: pip otherwise reuses a wheel it cached from a build with other settings",
        "'Killed signal terminated program cc1plus' (or a build that just dies) is the compiler running out of "
        "memory: lower MAX_JOBS",
    ]


def _rocm_pitfalls(out: BuildEnv, sel: ArchSelection) -> list[str]:
    pitfalls = _common_pitfalls()
    if "deepspeed" in out.targets:
        wave64 = [a for a in sel.archs if (arch_info(a) and arch_info(a).wavefront == 64)]  # type: ignore[union-attr]
        text = (
            "DeepSpeed's op builder overwrites PYTORCH_ROCM_ARCH with the first gfx name rocminfo prints "
            "(always for ops built on first use, and for prebuilt ops whenever rocminfo finds a GPU), and reads the "
            "wavefront size from rocminfo too (32 when rocminfo is missing"
        )
        text += f": wrong for wave64 {', '.join(wave64)})" if wave64 else ")"
        text += (
            ". Build DeepSpeed ops where rocminfo sees the target GPU (in a container: --device=/dev/kfd "
            "--device=/dev/dri); "
            "on a host with mixed GPUs only the first one's arch gets kernels"
        )
        if len(sel.archs) > 1:
            text += f" (here: only one of {', '.join(sel.archs)})"
        pitfalls.append(text)
    pitfalls.append(
        "gfx940 and gfx941 are gone (dropped by ROCm libraries in Nov 2024 and LLVM in Feb 2025): "
        "every MI300-series GPU (MI300X, MI300A, MI325X) builds as gfx942"
    )
    if "flash-attn" in out.targets and out.triton_backend:
        pitfalls.append("flash-attn Triton backend: set FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE when running too, "
                        "not only when building")
    return pitfalls
