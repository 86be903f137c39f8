"""GPU code in the installed libraries, judged in the cheap stage: no torch import, no GPU.

torch, flash-attn, DeepSpeed's prebuilt and JIT-built ops, bitsandbytes and any other library of a recorded
package carry GPU code objects for the archs they were built for (facts/extensions.py reads them). A library
without the code object for this machine's GPU fails at its first kernel: "HIP error: invalid device function",
`hipErrorNoBinaryForGpu`, "no kernel image is available for execution on the device". These checks name each
such library before anything runs on the GPU.

How a code object matches a GPU (the loaders' rules):
- AMD: the code object's target id (`gfx942`, `gfx942:xnack+`, `gfx9-4-generic`) must match one of the ISAs the
  runtime lists for the agent (rocminfo's "ISA Info", e.g. `gfx942:sramecc+:xnack-`, plus the generic ISA the
  runtime accepts for it): the same processor, and every target feature the code object names (`xnack+`,
  `sramecc-`) equal to the agent's; a feature it does not name ("any") matches either setting (LLVM
  AMDGPUUsage, "Target ID" and "AMDGPU Generic Processors"). Without rocminfo's ISA list (torch's gcnArchName,
  or only `--arch`), generic code objects and named features are "maybe". `amdgcnspirv` is compiled by the
  runtime for any AMD GPU at load time.
- NVIDIA: a cubin for sm_XY runs on a GPU of the same major and minor >= Y; sm_XYa only on sm_XY; sm_XYf on the
  same major, minor >= Y. PTX for compute_XY is JIT-compiled by the driver for any GPU of compute capability
  >= XY: it runs, after a compile at first use (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX
  Compatibility"; the a/f variants: CUDA 12.9 release notes, family-specific architectures).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from rocmcheck import fixes, versions
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, NotKnown, known_or_none
from rocmcheck.checks.shell_words import words
from rocmcheck.facts.extensions import JIT_CACHE_OWNER
from rocmcheck.knowledge import arch_info, base_gfx
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

RUNS, JIT, MAYBE, NO = "runs", "jit", "maybe", "no"
_RANK = {NO: 0, MAYBE: 1, JIT: 2, RUNS: 3}

# LLVM AMDGPUUsage, "AMDGPU Generic Processors": the processors each generic target's code objects run on.
GENERIC_TARGETS = {
    "gfx9-generic": ("gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"),
    "gfx9-4-generic": ("gfx940", "gfx941", "gfx942", "gfx950"),
    "gfx10-1-generic": ("gfx1010", "gfx1011", "gfx1012", "gfx1013"),
    "gfx10-3-generic": ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"),
    "gfx11-generic": ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"),
    "gfx12-generic": ("gfx1200", "gfx1201"),
}
SPIRV_TARGET = "amdgcnspirv"
BNB_OWNER = "bitsandbytes"


# ---- the GPUs, as the loaders see them --------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuTarget:
    vendor: str  # "amd" | "nvidia"
    arch: str  # "gfx942", "sm_90"
    isas: tuple[str, ...] = ()  # AMD: the agent's ISAs as the runtime lists them ("gfx942:sramecc+:xnack-")
    isas_complete: bool = False  # isas is the runtime's whole list (rocminfo), generic ISAs included
    source: str = ""


def gpu_targets(ctx: CheckContext) -> list[GpuTarget]:
    """This machine's GPUs: rocminfo's agents (with their ISA lists), nvidia-smi's GPUs, else torch's devices,
    else the archs named with --arch. [] when none of these is known."""
    out: list[GpuTarget] = []
    report = known_or_none(lambda: ctx.rocminfo)
    for agent in (report.gpus if report else []):
        arch = base_gfx(agent.name)
        if not arch.startswith("gfx"):
            continue
        isas = tuple(i.split("--", 1)[1] for i in agent.isas if "--" in i)
        out.append(GpuTarget("amd", arch, isas, bool(isas), "rocminfo"))
    out += [GpuTarget("nvidia", g.arch, source="nvidia-smi") for g in known_or_none(lambda: ctx.nvidia_gpus) or []
            if g.arch]
    torch = known_or_none(lambda: ctx.torch) or {}
    if not out:
        for d in torch.get("devices") or []:
            gcn = d.get("gcn_arch")
            cap = d.get("capability")
            if gcn and torch.get("hip"):
                out.append(GpuTarget("amd", base_gfx(gcn), (gcn,), False, "torch"))
            elif cap and torch.get("cuda"):
                out.append(GpuTarget("nvidia", f"sm_{cap[0]}{cap[1]}", source="torch"))
    if not out:
        for arch in ctx.expected_archs:
            entry = arch_info(arch)
            if entry is not None:
                out.append(GpuTarget(entry.vendor, base_gfx(arch), source="--arch"))
    return list(dict.fromkeys(out))


# ---- one code object against one GPU -------------------------------------------------------------------------------

def _features(target: str) -> tuple[str, dict[str, bool]]:
    processor, *feats = target.split(":")
    return processor, {f[:-1]: f.endswith("+") for f in feats if f[-1:] in ("+", "-")}


def amd_match(code: str, gpu: GpuTarget) -> str:
    """RUNS, JIT, MAYBE or NO for an AMD code object's target id on the GPU (the module docstring's rule)."""
    if code == SPIRV_TARGET:
        return JIT
    processor, want = _features(code)
    if gpu.isas:
        for isa in gpu.isas:
            isa_processor, have = _features(isa)
            if isa_processor == processor and all(have.get(f) == v for f, v in want.items()):
                return RUNS
        if gpu.isas_complete:
            return NO
        known = gpu.isas[0]  # torch's gcnArchName: the features are known, the generic ISAs are not
        isa_processor, have = _features(known)
        if processor in GENERIC_TARGETS and gpu.arch in GENERIC_TARGETS[processor]:
            return MAYBE if all(have.get(f) == v for f, v in want.items()) else NO
        return NO
    if processor == gpu.arch:
        return MAYBE if want else RUNS
    if processor in GENERIC_TARGETS and gpu.arch in GENERIC_TARGETS[processor]:
        return MAYBE
    return NO


_CUDA = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$")


def _cc(number: str) -> tuple[int, int]:
    """"90" -> (9, 0), "100" -> (10, 0), "86" -> (8, 6): the last digit is the minor version."""
    return int(number[:-1]), int(number[-1])


def cuda_match(code: str, gpu: GpuTarget) -> str:
    """RUNS, JIT or NO for a CUDA target ("sm_80", "sm_90a", "compute_80") on the GPU (the module docstring's rule)."""
    c, g = _CUDA.match(code), _CUDA.match(gpu.arch)
    if not c or not g:
        return NO
    kind, number, variant = c.groups()
    (major, minor), (gmajor, gminor) = _cc(number), _cc(g.group(2))
    if variant == "a":
        ok = (major, minor) == (gmajor, gminor)
    elif variant == "f" or kind == "sm":
        ok = major == gmajor and gminor >= minor
    else:
        ok = (gmajor, gminor) >= (major, minor)
    if not ok:
        return NO
    return RUNS if kind == "sm" else JIT


def is_cuda_target(target: str) -> bool:
    return bool(_CUDA.match(target))


def container_match(targets: list[str], gpu: GpuTarget) -> str | None:
    """The best any of a bundle's (or fatbin's) targets does on the GPU; None for one with no GPU code."""
    if not targets:
        return None
    best = NO
    for t in targets:
        if is_cuda_target(t) != (gpu.vendor == "nvidia"):
            continue  # code for the other vendor's GPUs
        state = cuda_match(t, gpu) if gpu.vendor == "nvidia" else amd_match(t, gpu)
        if _RANK[state] > _RANK[best]:
            best = state
    return best


# ---- one library against the GPUs -----------------------------------------------------------------------------------

@dataclass
class LibraryJudgement:
    owner: str
    path: str
    state: str  # RUNS, JIT, MAYBE, NO ("lacks"), "partial" (some bundles lack), "unknown", "none" (no GPU code)
    carried: list[str] = field(default_factory=list)
    lacking: int = 0  # bundles / fatbins with nothing for the GPU
    read: int = 0  # bundles / fatbins whose targets were read
    unread: list[str] = field(default_factory=list)  # "3 zstd-compressed: ..." lines
    gpu: GpuTarget | None = None
    notes: list[str] = field(default_factory=list)  # why a state is MAYBE

    def line(self) -> str:
        carried = ", ".join(self.carried) or "no GPU code"
        text = f"{self.path}: carries {carried}"
        if self.state == "partial":
            text += f"; {self.lacking} of {self.read} bundles have nothing for {self.gpu.arch if self.gpu else '?'}"
        if self.unread:
            text += "; not read: " + "; ".join(self.unread)
        if self.notes:
            text += " (" + "; ".join(self.notes) + ")"
        return text


def judge_library(lib: dict[str, Any], gpus: list[GpuTarget]) -> LibraryJudgement:
    """The worst state of the library over the GPUs (a library must serve every GPU of the machine)."""
    groups = [g for g in lib.get("groups") or [] if g.get("targets")]
    carried = sorted({t for g in groups for t in g["targets"]})
    unread = [f"{u.get('count', 1)} {'bundle' if u.get('count', 1) == 1 else 'bundles'}: {u.get('why')}"
              for u in lib.get("unread") or []]
    if lib.get("truncated"):
        unread.append(str(lib["truncated"]))
    base = LibraryJudgement(str(lib.get("owner")), str(lib.get("path")), "none", carried, unread=unread)
    if not groups:
        base.state = "unknown" if (lib.get("unread") or lib.get("problem") or lib.get("truncated")) else "none"
        if lib.get("problem"):
            base.unread.append(str(lib["problem"]))
        return base
    # nvcc -rdc: the runtime loads the linked code (.nv_fatbin); the objects' own fatbins (__nv_relfatbin) are the
    # device linker's input. Their PTX may still be JIT-linked where the linked code lacks the GPU: "maybe".
    linked = [g for g in groups if not g.get("relocatable")] or groups
    relocatable = [g for g in groups if g.get("relocatable")] if linked is not groups else []
    worst: LibraryJudgement | None = None
    # On a machine with both vendors' GPUs a library serves its own vendor's; one with code for neither is judged
    # on all of them (it fails: code for the other vendor only).
    vendors = {"nvidia" if is_cuda_target(t) else "amd" for t in carried}
    for gpu in [g for g in gpus if g.vendor in vendors] or gpus:
        read = sum(int(g.get("count", 1)) for g in linked)
        states = [(container_match(g["targets"], gpu), int(g.get("count", 1))) for g in linked]
        lacking = sum(n for s, n in states if s == NO)
        present = [s for s, _ in states if s not in (None, NO)]
        if lacking == read:
            state = NO
        elif lacking:
            state = "partial"
        else:
            state = min(present, key=lambda s: _RANK[s]) if present else RUNS
        notes = []
        if state in (NO, "partial") and any(container_match(g["targets"], gpu) == JIT for g in relocatable):
            state = MAYBE
            notes.append(f"the linked code has nothing for {gpu.arch}; the relocatable objects' PTX may be "
                         "JIT-linked at load")
        elif state == MAYBE:
            notes.append("a named target feature or a generic target: runs only if the runtime lists it for this "
                         "GPU; rocminfo's ISA list decides")
        j = LibraryJudgement(base.owner, base.path, state, carried, lacking, read, list(unread), gpu, notes)
        if worst is None or _severity(j.state) > _severity(worst.state):
            worst = j
    return worst or base


def _severity(state: str) -> int:
    return {NO: 5, "partial": 4, MAYBE: 3, "unknown": 2, JIT: 1, RUNS: 0, "none": 0}[state]


# ---- the fixes -------------------------------------------------------------------------------------------------------

def _arch_words(archs: list[str]) -> tuple[str, dict[str, str]]:
    names, values = words("arch", archs, sep=" --arch ")
    return ("--arch " + names) if archs else "", values


def fix_for(owner: str, judged: list[LibraryJudgement], gpus: list[GpuTarget], ctx: CheckContext) -> fixes.Fix:
    """The fix for one package whose libraries lack the GPU's arch."""
    archs = sorted({g.arch for g in gpus})
    vendor = gpus[0].vendor if gpus else "amd"
    if owner == "torch":
        from rocmcheck.checks.rocm import detected_rocm_version

        rocm = known_or_none(lambda: detected_rocm_version(ctx)) if vendor == "amd" else None
        return fixes.torch_wheel_fix(vendor, archs[0] if archs else "", rocm)
    if owner == "flash-attn":
        return fixes.flash_attn_rebuild(archs)
    if owner == "deepspeed":
        arch_flags, values = _arch_words(archs)
        return fixes.shell('pip uninstall -y deepspeed && eval "$(rocmcheck build-env --target deepspeed '
                           + arch_flags + ')" && pip install --no-build-isolation --no-cache-dir deepspeed',
                           "prebuilds DeepSpeed's ops for this GPU (build-env sets the arch and DS_BUILD_* variables)",
                           **values)
    if owner == JIT_CACHE_OWNER:
        folders = sorted({j.path.rsplit("/", 1)[0] for j in judged})
        names, values = words("dir", folders)
        return fixes.shell("rm -rf " + names, "torch rebuilds these ops at their next load; set PYTORCH_ROCM_ARCH "
                           "(ROCm) or TORCH_CUDA_ARCH_LIST (CUDA) to this GPU's arch first", **values)
    return fixes.note(f"reinstall or rebuild {owner} for {', '.join(archs)}: a build for this GPU (for a source "
                      f"build: PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST set to it)")


# ---- extensions.arch ----------------------------------------------------------------------------------------------

def _not_known(what: str) -> CheckResult:
    raise NotKnown(what)  # run_checks makes it the skip, in ctx.unknown_phrase's words ("not in the paste" in triage)


def _gpu_words(gpus: list[GpuTarget]) -> str:
    return ", ".join(sorted({g.arch for g in gpus}))


@check("extensions.arch", "installed GPU libraries carry this GPU's arch")
def check_extensions_arch(ctx: CheckContext) -> list[CheckResult] | CheckResult:
    ext = ctx.extensions()
    if not ext:
        return _not_known("the GPU code in the installed libraries (not collected: a bundle from an older rocmcheck)")
    gpus = gpu_targets(ctx)
    if not gpus:
        return _not_known("this machine's GPU arch (no GPU found by rocminfo, nvidia-smi or torch; --arch names one)")
    judged = alternatives_judged([judge_library(lib, gpus) for lib in ext.get("libraries") or []
                                  if lib.get("owner") != BNB_OWNER])
    with_code = [j for j in judged if j.state != "none"]
    stopped = ext.get("stopped")
    tail = [f"reading stopped: {stopped}"] if stopped else []
    source = f"GPU: {_gpu_words(gpus)} (from {', '.join(sorted({g.source for g in gpus}))})"
    if not with_code:
        if stopped:
            return _not_known(f"the GPU code of the installed libraries ({stopped})")
        return skipped("no installed library carries GPU code (CPU builds, or none installed): nothing to match",
                       [source, f"libraries read: {_scanned(ext)}"])
    by_owner: dict[str, list[LibraryJudgement]] = {}
    for j in with_code:
        by_owner.setdefault(j.owner, []).append(j)
    results: list[CheckResult] = []
    for owner, libs in by_owner.items():
        bad = [j for j in libs if j.state in (NO, "partial")]
        if not bad:
            continue
        other_vendor = all(j.carried and all(is_cuda_target(t) != (gpus[0].vendor == "nvidia") for t in j.carried)
                           for j in bad)
        names = ", ".join(j.path.rsplit("/", 1)[-1] for j in bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4
                                                                         else "")
        what = ("carry only code for the other vendor's GPUs" if other_vendor
                else f"have no code object for {_gpu_words(gpus)}")
        error = ("'no kernel image is available for execution on the device'" if gpus[0].vendor == "nvidia"
                 else "'HIP error: invalid device function' / hipErrorNoBinaryForGpu")
        results.append(failed(f"{owner}: {len(bad)} of its libraries {what} ({names}): expect {error} at their "
                              "first kernel", fix_for(owner, bad, gpus, ctx),
                              [source] + [j.line() for j in bad] + tail,
                              package=owner, libraries=[j.path for j in bad]))
    if results:
        return results
    unknown = [j for j in with_code if j.state == "unknown"]
    maybe = [j for j in with_code if j.state == MAYBE]
    jit = [j for j in with_code if j.state == JIT]
    judged_ok = [j for j in with_code if j.state in (RUNS, JIT, MAYBE)]
    evidence = [source] + [f"maybe: {j.line()}" for j in maybe]
    evidence += [f"PTX JIT: {j.line()} (no cubin for this GPU: the driver compiles the PTX at first use)"
                 for j in jit]
    evidence += [f"not known: {j.line()}" for j in unknown] + tail
    if not judged_ok:
        reasons = "; ".join(sorted({u for j in unknown for u in j.unread}))
        what = f"the GPU archs of {len(unknown)} libraries ({reasons})"
        return skipped(f"not known: {what}", evidence, not_known=[what])
    owners = sorted({j.owner for j in judged_ok})
    summary = f"{len(judged_ok)} GPU libraries ({', '.join(owners)}) carry code for {_gpu_words(gpus)}"
    if jit:
        summary += f"; {len(jit)} only as PTX, compiled by the driver at first use"
    if maybe:
        summary += f"; {len(maybe)} only maybe (the evidence says why)"
    if unknown:
        summary += f"; {len(unknown)} not known"
    return passed(summary, evidence)


# Code-object files (*.co, *.hsaco) are loaded by name at run time, one per GPU arch (rocBLAS' Tensile library:
# TensileLibrary_gfx90a.co, TensileLibrary_gfx942.co, ... in one folder): a file for another arch is an
# alternative, not a gap, so a folder of them lacks the arch only when none of its files carries it.
_CODE_OBJECT_FILE = re.compile(r"\.(hsaco|co)$")


def alternatives_judged(judged: list[LibraryJudgement]) -> list[LibraryJudgement]:
    """The judgements with the code-object files of a folder that has one for this GPU left out of the gaps."""
    good_dirs = {(j.owner, j.path.rsplit("/", 1)[0]) for j in judged
                 if _CODE_OBJECT_FILE.search(j.path) and j.state in (RUNS, JIT, MAYBE)}
    return [j for j in judged if not (_CODE_OBJECT_FILE.search(j.path) and j.state in (NO, "partial")
                                      and (j.owner, j.path.rsplit("/", 1)[0]) in good_dirs)]


def _scanned(ext: dict[str, Any]) -> str:
    scanned = ext.get("scanned") or {}
    return ", ".join(f"{k} {v}" for k, v in sorted(scanned.items())) or "none"


# ---- bitsandbytes -------------------------------------------------------------------------------------------------

# bitsandbytes/cextension.py: the native library is libbitsandbytes_{rocm|cuda}{major}{minor}.so, named after
# torch.version.hip / torch.version.cuda ("6.3.42131-..." -> rocm63, "12.4" -> cuda124); BNB_ROCM_VERSION /
# BNB_CUDA_VERSION name another one. From 0.50.0 (bitsandbytes PR #1980) a missing exact match falls back to the
# nearest library of the same major version; before it, a missing library is "Could not find the bitsandbytes
# ROCm binary" / "Configured CUDA binary not found" (ROCm/bitsandbytes#82: a build named after the system ROCm
# while torch is built for another).
BNB_FALLBACK_SINCE = "0.50.0"
_BNB_NAME = re.compile(r"^libbitsandbytes_(rocm|cuda)(\d+)\.(?:so|dylib|dll)$")

# The ROCm libraries in bitsandbytes' PyPI wheels (bitsandbytes .github/workflows/python-package.yml, build-rocm,
# at each tag: the wheels carry them from 0.49.0), and the archs each was built for (.github/scripts/build-rocm.sh:
# gfx90a, gfx942, gfx1100, gfx1101 always; gfx1150/1151/1200/1201 from ROCm 6.4; gfx950 from ROCm 7.0).
BNB_ROCM_WHEELS = (
    ("0.49.0", ("6.2", "6.3", "6.4", "7.0", "7.1")),
    ("0.49.1", ("6.2", "6.3", "6.4", "7.0", "7.1")),
    ("0.49.2", ("6.2", "6.3", "6.4", "7.0", "7.1", "7.2")),
    ("0.50.0", ("6.4", "7.0", "7.1", "7.2", "7.14")),
)
_BNB_WHEEL_ARCHS = (((0, 0), ("gfx90a", "gfx942", "gfx1100", "gfx1101")),
                    ((6, 4), ("gfx1150", "gfx1151", "gfx1200", "gfx1201")),
                    ((7, 0), ("gfx950",)))

# 4-bit blocksize 64 on AMD: bitsandbytes' ROCm kernels refuse it (torch._check(blocksize in [4096, ..., 128]) in
# bitsandbytes/backends/cuda/ops.py) on every AMD GPU before 0.49.0, on wavefront-64 GPUs (CDNA: MI200, MI300,
# MI355) in 0.49.0 and 0.49.1 (PR #1748 enabled it for wavefront 32), and on none from 0.49.2. Checkpoints
# pre-quantized with the CUDA default (blocksize 64, e.g. the Hub's "-bnb-4bit" models) then fail in
# dequantize_4bit with "Expected cond to be True" ("4bit is broken on CDNA gpus as they do not support 64 block
# size": unslothai/unsloth PR #3279; unsloth PR #4161 enables it from bitsandbytes 0.49.2).
BNB_BLOCKSIZE64_ANY_AMD_BEFORE = "0.49.0"
BNB_BLOCKSIZE64_CDNA_BEFORE = "0.49.2"


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _series(version: str | None) -> tuple[int, int] | None:
    """"6.3.42131-fa1d09cbd" -> (6, 3); "12.4" -> (12, 4)."""
    return versions.release(version) if versions.series(version) else None


def _split_code(code: str, backend: str) -> tuple[int, int] | None:
    """bitsandbytes' rule (cextension._split_cuda_version): ROCm "63" -> (6, 3), "714" -> (7, 14); CUDA "124" ->
    (12, 4), "118" -> (11, 8)."""
    head = 1 if backend == "rocm" else 2
    if len(code) <= head or not code.isdigit():
        return None
    return int(code[:head]), int(code[head:])


@dataclass
class BnbChoice:
    backend: str  # "rocm" | "cuda"
    wanted: str  # the library name bitsandbytes looks for first
    series: tuple[int, int] | None  # torch's HIP / CUDA major.minor
    chosen: str | None  # the library it loads, None when none
    override: str | None = None  # BNB_ROCM_VERSION / BNB_CUDA_VERSION as set
    fallback: bool = False


def bnb_choice(torch_hip: str | None, torch_cuda: str | None, libraries: list[str], bnb_version: str | None,
               env: dict[str, str]) -> BnbChoice | None:
    """Which native library bitsandbytes loads with this torch (bitsandbytes/cextension.py); None for a CPU torch."""
    backend = "rocm" if torch_hip else "cuda" if torch_cuda else None
    if backend is None:
        return None
    series = _series(torch_hip or torch_cuda)
    override_var = "BNB_ROCM_VERSION" if backend == "rocm" else "BNB_CUDA_VERSION"
    override = env.get(override_var)
    code = override if override is not None else (f"{series[0]}{series[1]}" if series else "")
    wanted = f"libbitsandbytes_{backend}{code}.so"
    if wanted in libraries:
        return BnbChoice(backend, wanted, series, wanted, override)
    v = _version(bnb_version)
    if override is None and series and v is not None and v >= Version(BNB_FALLBACK_SINCE):
        available = {}
        for name in libraries:
            m = _BNB_NAME.match(name)
            split = _split_code(m.group(2), backend) if m and m.group(1) == backend else None
            if split:
                available[split] = name
        lower = [s for s in available if s[0] == series[0] and s < series]
        higher = [s for s in available if s[0] == series[0] and s > series]
        if lower or higher:
            return BnbChoice(backend, wanted, series, available[max(lower) if lower else min(higher)], fallback=True)
    return BnbChoice(backend, wanted, series, None, override)


def bnb_wheel_for(series: tuple[int, int] | None, archs: list[str]) -> str | None:
    """The newest bitsandbytes release whose wheel carries a ROCm library for torch's ROCm series built for every
    one of archs; None when none does (then only a source build does)."""
    if series is None:
        return None
    name = f"{series[0]}.{series[1]}"
    built = {a for since, group in _BNB_WHEEL_ARCHS if series >= since for a in group}
    if any(a not in built for a in archs):
        return None
    carrying = [release for release, rocm in BNB_ROCM_WHEELS if name in rocm]
    return carrying[-1] if carrying else None


def bnb_fix(choice: BnbChoice, archs: list[str], why: str) -> fixes.Fix:
    if choice.override is not None and choice.chosen is None:
        return fixes.unset("BNB_ROCM_VERSION" if choice.backend == "rocm" else "BNB_CUDA_VERSION",
                           why="it names a library this bitsandbytes does not have; without it the one for torch's "
                               "version is loaded")
    if choice.backend == "cuda":
        return fixes.shell("pip install -U --force-reinstall --no-deps bitsandbytes",
                           why + "; the wheels carry libraries for several CUDA versions")
    release = bnb_wheel_for(choice.series, archs)
    series = f"{choice.series[0]}.{choice.series[1]}" if choice.series else "torch's ROCm"
    if release:
        return fixes.shell("pip install --force-reinstall --no-deps {req}",
                           f"{why}; that wheel carries {choice.wanted} built for {', '.join(archs) or 'the CDNA GPUs'}",
                           req=f"bitsandbytes=={release}")
    return fixes.note(f"{why}: no bitsandbytes wheel carries a ROCm {series} library built for "
                      f"{', '.join(archs) or 'this GPU'}; build it from source for ROCm {series} "
                      f"(cmake -DCOMPUTE_BACKEND=hip -DBNB_ROCM_ARCH={';'.join(archs) or 'gfx942'}, "
                      "https://huggingface.co/docs/bitsandbytes/main/en/installation), or install a torch for a "
                      "ROCm series the wheels carry")


def _bnb_env(ctx: CheckContext) -> dict[str, str]:
    """BNB_ROCM_VERSION / BNB_CUDA_VERSION as set; NotKnown when the environment was not recorded (a variable
    that was not collected is not "unset")."""
    return ctx.env_vars(("BNB_ROCM_VERSION", "BNB_CUDA_VERSION"))


def _bnb_facts(ctx: CheckContext) -> tuple[dict[str, Any], dict[str, Any]] | CheckResult:
    """(bitsandbytes' facts, torch's build) or the skip that says why they are not there."""
    ext = ctx.extensions()
    if not ext:
        return _not_known("bitsandbytes' library files (not collected: a bundle from an older rocmcheck)")
    bnb = ext.get("bitsandbytes") or {}
    if not bnb and not known_or_none(lambda: ctx.package("bitsandbytes")):
        return skipped("bitsandbytes not installed (only QLoRA and 8-bit optimizers need it)")
    if not bnb:
        return _not_known("bitsandbytes' folder (installed, but find_spec does not locate its module)")
    build = ext.get("torch_build") or {}
    if not build or build.get("error"):
        return _not_known("torch's build (torch/version.py: its HIP or CUDA version)")
    return bnb, build


@check("bitsandbytes.library", "bitsandbytes has a native library for torch's ROCm/CUDA and this GPU")
def check_bnb_library(ctx: CheckContext) -> CheckResult:
    got = _bnb_facts(ctx)
    if isinstance(got, CheckResult):
        return got
    bnb, build = got
    version = bnb.get("version") or known_or_none(lambda: ctx.package("bitsandbytes"))
    libraries = list(bnb.get("libraries") or [])
    choice = bnb_choice(build.get("hip"), build.get("cuda"), libraries, version, _bnb_env(ctx))
    evidence = [f"bitsandbytes {version or '(version not known)'} in {bnb.get('dir')}",
                f"its libraries: {', '.join(libraries) or 'none'}",
                f"torch {build.get('version')}: HIP {build.get('hip')}, CUDA {build.get('cuda')}"]
    if choice is None:
        return skipped("torch is a CPU build: bitsandbytes loads no GPU library", evidence)
    gpus = [g for g in gpu_targets(ctx) if g.vendor == ("amd" if choice.backend == "rocm" else "nvidia")]
    archs = sorted({g.arch for g in gpus})
    kind = "ROCm" if choice.backend == "rocm" else "CUDA"
    if choice.override is not None:
        evidence.append(f"{'BNB_ROCM_VERSION' if choice.backend == 'rocm' else 'BNB_CUDA_VERSION'}={choice.override}")
    if choice.chosen is None:
        error = ("'Could not find the bitsandbytes ROCm binary' (ROCm/bitsandbytes#82)" if kind == "ROCm"
                 else "'Configured CUDA binary not found'")
        return failed(f"bitsandbytes looks for {choice.wanted} (torch's {kind} {_dotted(choice.series)}) and has "
                      f"no such library: expect {error}, then its CPU fallback",
                      bnb_fix(choice, archs, f"a bitsandbytes with the library for {kind} {_dotted(choice.series)}"),
                      evidence, library=choice.wanted)
    named = f"{choice.chosen}" + (f" (falls back from {choice.wanted}: bitsandbytes warns)" if choice.fallback else "")
    path = f"{bnb.get('dir')}/{choice.chosen}"
    record = next((lib for lib in ctx.extensions().get("libraries") or [] if lib.get("path") == path), None)
    if not gpus:
        return passed(f"{named} is the library torch's {kind} loads; this GPU's arch is not known, so its code "
                      "objects were not matched", evidence)
    judged = judge_library({"owner": BNB_OWNER, **record}, gpus) if record else None
    if judged is None or judged.state in ("unknown", "none"):
        why = "; ".join(judged.unread) if judged and judged.unread else "its code objects were not read"
        note = " (pip install zstandard reads them)" if "zstandard" in why else ""
        return passed(f"{named} matches torch's {kind}; its GPU archs are not known: {why}{note}", evidence)
    evidence.append(judged.line())
    if judged.state in (NO, "partial"):
        return failed(f"{choice.chosen} has no code object for {', '.join(archs)} (it carries "
                      f"{', '.join(judged.carried)}): 4-bit and 8-bit kernels fail with 'invalid device function'",
                      bnb_fix(choice, archs, f"a bitsandbytes library built for {', '.join(archs)}"), evidence)
    return passed(f"{named}, with code for {', '.join(archs)}", evidence)


def _dotted(series: tuple[int, int] | None) -> str:
    return f"{series[0]}.{series[1]}" if series else "(not known)"


@check("bitsandbytes.blocksize", "bitsandbytes takes 4-bit blocksize 64 on this AMD GPU")
def check_bnb_blocksize(ctx: CheckContext) -> CheckResult:
    got = _bnb_facts(ctx)
    if isinstance(got, CheckResult):
        return got
    bnb, build = got
    if not build.get("hip"):
        return skipped("torch is not a ROCm build: the blocksize limit is bitsandbytes' ROCm kernels'")
    gpus = [g for g in gpu_targets(ctx) if g.vendor == "amd"]
    if not gpus:
        return _not_known("this machine's AMD GPU arch (rocminfo; --arch names one)")
    raw = bnb.get("version") or known_or_none(lambda: ctx.package("bitsandbytes"))
    version = _version(raw)
    if version is None:
        return _not_known("bitsandbytes' version")
    wave64 = sorted({g.arch for g in gpus if (arch_info(g.arch) and arch_info(g.arch).wavefront == 64)})
    evidence = [f"bitsandbytes {raw}; GPUs {', '.join(sorted({g.arch for g in gpus}))}"
                + (f" (wavefront 64: {', '.join(wave64)})" if wave64 else ""),
                "bitsandbytes/backends/cuda/ops.py refuses blocksize 64 on ROCm before 0.49.0, on wavefront-64 "
                "GPUs before 0.49.2; unslothai/unsloth PR #3279 and #4161"]
    refuses = version < Version(BNB_BLOCKSIZE64_ANY_AMD_BEFORE) or (
        bool(wave64) and version < Version(BNB_BLOCKSIZE64_CDNA_BEFORE))
    if not refuses:
        return passed(f"bitsandbytes {raw} takes 4-bit blocksize 64 here", evidence)
    choice = bnb_choice(build.get("hip"), None, list(bnb.get("libraries") or []), raw, _bnb_env(ctx))
    which = ", ".join(wave64) if wave64 and version >= Version(BNB_BLOCKSIZE64_ANY_AMD_BEFORE) else "AMD GPUs"
    fix = bnb_fix(choice, sorted({g.arch for g in gpus}), "bitsandbytes 0.49.2 or newer takes blocksize 64 on CDNA") \
        if choice else fixes.shell("pip install -U {req}", "takes blocksize 64 on CDNA", req="bitsandbytes>=0.49.2")
    return warned(f"bitsandbytes {raw} refuses 4-bit blocksize 64 on {which}: a checkpoint pre-quantized with "
                  "blocksize 64 (the CUDA default, e.g. '-bnb-4bit' models) fails in dequantize_4bit with 'Expected "
                  "cond to be True'; quantizing here uses 128", fix, evidence)
