"""PyTorch: build kind, HIP/CUDA version, compiled arch list, and whether it sees the GPUs."""

from __future__ import annotations

import re

from rocmcheck import fixes
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.host_config import amdsmi_fix, amdsmi_mismatch
from rocmcheck.checks.rocm import detected_rocm_version
from rocmcheck.knowledge import base_gfx
from rocmcheck.result import CheckResult, failed, passed, skipped, warned


def torch_install_command(ctx: CheckContext, *, reinstall: bool = False, why: str = "") -> fixes.Fix:
    """The wheel index follows the installed ROCm (fixes.torch_install); when the GPUs are not known, a note
    naming both indexes (a CPU wheel would be the wrong advice)."""
    if ctx.vendor == "unknown":
        return fixes.note("install the torch build for your GPU from PyTorch's index "
                          f"(https://pytorch.org/get-started/locally/): ROCm {fixes.torch_index_url('amd')}, "
                          f"CUDA {fixes.torch_index_url('nvidia')}" + (f"; {why}" if why else ""))
    rocm = known_or_none(lambda: detected_rocm_version(ctx)) if ctx.vendor == "amd" else None
    return fixes.torch_install(ctx.vendor, rocm, reinstall=reinstall, why=why)


def _replace_torch(ctx: CheckContext) -> fixes.Fix:
    """Uninstall the torch of the wrong kind first: pip would keep it ("already satisfied")."""
    install = torch_install_command(ctx)
    return fixes.with_why(fixes.then(fixes.shell("pip uninstall -y torch"), install),
                          install.why or f"the {ctx.vendor.upper()} build of torch")


def _build_kind(t: dict) -> str:
    if t.get("hip"):
        return f"ROCm {t['hip']}"
    if t.get("cuda"):
        return f"CUDA {t['cuda']}"
    return "CPU-only"


@check("torch.installed", "PyTorch installed and importable")
def check_torch_installed(ctx: CheckContext) -> CheckResult:
    t = ctx.torch
    if t is None:
        if not ctx.probe_died("torch") and ctx.package("torch") is None:
            return failed("PyTorch is not installed", torch_install_command(ctx))
        return failed(f"importing torch {ctx.probe_failure('torch')}", torch_install_command(ctx, reinstall=True))
    if t.get("installed") is False:
        return failed("PyTorch is not installed", torch_install_command(ctx))
    if t.get("error") or t.get("import_error"):
        return failed(f"importing torch failed: {t.get('error') or t.get('import_error')}",
                      torch_install_command(ctx, reinstall=True))
    return passed(f"torch {t.get('version')} ({_build_kind(t)} build)", version=t.get("version"))


# Without its bytecode every process compiles torch, torch._dynamo and transformers again: a default smoke-train took
# about twice as long (benchmarks/RESULTS.md, section 17).
BYTECODE_COST = "about twice the start-up of every process that imports torch"


@check("torch.bytecode", "PyTorch imports from compiled bytecode")
def check_torch_bytecode(ctx: CheckContext) -> CheckResult:
    t = ctx.torch
    if not t or not t.get("version"):
        return skipped("torch not importable")
    state = t.get("bytecode")
    if not isinstance(state, dict):
        return skipped("not recorded (torch is not a source package here, or a bundle from an older rocmcheck)")
    evidence = [f"bytecode of {state.get('source')}: {state.get('bytecode')} "
                f"({'present' if state.get('cached') else 'missing'})",
                f"PYTHONDONTWRITEBYTECODE {'set' if state.get('dont_write_bytecode') else 'not set'}; "
                f"PYTHONPYCACHEPREFIX {state.get('pycache_prefix') or 'not set'}; "
                f"bytecode folder {'writable' if state.get('writable') else 'not writable'}"]
    if state.get("cached"):
        return passed("torch's compiled bytecode is there", evidence)
    if state.get("writable") and not state.get("dont_write_bytecode"):
        return passed("torch had no compiled bytecode; the first import writes it, once", evidence)
    why = "PYTHONDONTWRITEBYTECODE is set" if state.get("dont_write_bytecode") else "its folder is not writable"
    return warned(f"torch has no compiled bytecode and Python does not write it ({why}): every process compiles "
                  f"torch from source, {BYTECODE_COST}",
                  fixes.compile_bytecode(str(state.get("site_dir") or ""), bool(state.get("writable"))), evidence)


@check("torch.build", "PyTorch build matches the GPU vendor")
def check_torch_build(ctx: CheckContext) -> CheckResult:
    t = ctx.torch
    if not t or not t.get("version"):
        return skipped("torch not importable")
    kind = _build_kind(t)
    vendor = ctx.known_vendor()
    if vendor == "amd" and not t.get("hip"):
        return failed(f"torch {t['version']} is a {kind} build on an AMD GPU machine",
                      _replace_torch(ctx))
    if vendor == "nvidia" and not t.get("cuda"):
        return failed(f"torch {t['version']} is a {kind} build on an NVIDIA GPU machine", _replace_torch(ctx))
    if vendor == "none":
        return passed(f"{kind} build (no GPU here to match)")
    return passed(f"{kind} build, matching the {vendor.upper()} GPUs")


def compiled_archs(t: dict) -> list[str]:
    """torch.cuda.get_arch_list(), or the build's arch flags when no GPU is usable (get_arch_list is [] then)."""
    archs = list(t.get("arch_list") or [])
    if not archs:
        for flag in t.get("arch_flags") or []:
            # ROCm: "--offload-arch=gfx942" or bare "gfx942"; CUDA: "-gencode compute=compute_90,code=sm_90"
            for token in flag.replace(",", " ").replace("=", " ").split():
                if token.startswith(("gfx", "sm_", "compute_")):
                    archs.append(token)
    return list(dict.fromkeys(base_gfx(a) for a in archs))


def _cuda_arch_runs(arch: str, compiled: list[str]) -> bool:
    """sm_XY runs if compiled for it, or if PTX (compute_AB, AB <= XY) can be JIT-compiled for it."""
    if arch in compiled:
        return True
    cc = _cc_number(arch)
    return cc is not None and any(c.startswith("compute_") and (_cc_number(c) or 10**6) <= cc for c in compiled)


def _cc_number(arch: str) -> int | None:
    """"sm_90" -> 90, "compute_90a" -> 90 (arch-specific suffixes a/f ride on the same number)."""
    match = re.match(r"\d+", arch.split("_", 1)[-1])
    return int(match.group()) if match else None


@check("torch.arch_list", "torch compiled for the GPU's arch")
def check_torch_arch_list(ctx: CheckContext) -> CheckResult:
    t = ctx.torch
    if not t or not t.get("version"):
        return skipped("torch not importable")
    gpus = ctx.amd_gpus if t.get("hip") else ctx.nvidia_gpus if t.get("cuda") else []
    if not gpus:
        return skipped("no GPU of torch's kind to compare with")
    compiled = compiled_archs(t)
    evidence = [f"torch arch list: {', '.join(compiled) or '(empty)'}"]
    if not compiled:
        return warned("could not read torch's compiled arch list",
                      fixes.shell("python -c 'import torch; print(torch.cuda.get_arch_list())'",
                                  "the arch list the installed torch was built for"), evidence)
    needed = sorted({g.arch for g in gpus if g.arch})
    if t.get("hip"):
        missing = [a for a in needed if a not in compiled]
        if missing:
            return failed(f"torch has no kernels for {', '.join(missing)}: expect 'hipErrorNoBinaryForGpu' / "
                          "'HIP error: invalid device function'",
                          torch_install_command(ctx, reinstall=True, why=(
                              f"a torch built for {', '.join(missing)} (official ROCm wheels include gfx942 since "
                              f"ROCm 6.0); or build with PYTORCH_ROCM_ARCH={';'.join(missing)}")),
                          evidence)
    else:
        missing = [a for a in needed if not _cuda_arch_runs(a, compiled)]
        if missing:
            return failed(f"torch has no kernels for {', '.join(missing)}: expect 'no kernel image is available for "
                          "execution on the device'",
                          torch_install_command(ctx, reinstall=True, why=(
                              "a CUDA wheel that covers this GPU (CUDA 12.8+ for sm_100/sm_120)")),
                          evidence)
    return passed(f"torch includes {', '.join(needed)}", evidence)


@check("torch.sees_gpus", "torch sees the GPUs")
def check_torch_sees_gpus(ctx: CheckContext) -> CheckResult:
    t = ctx.torch
    if not t or not t.get("version"):
        return skipped("torch not importable")
    system = ctx.vendor_gpus()
    if not system:
        return skipped("no GPU found by the system tools")
    seen = int(t.get("device_count") or 0)
    evidence = [f"{d.get('name')} ({d.get('gcn_arch') or 'sm_%d%d' % tuple(d.get('capability') or (0, 0))})"
                for d in t.get("devices") or []]
    if t.get("cuda_error"):
        evidence.append(f"torch.cuda error: {t['cuda_error']}")
    visible = list(ctx.env_vars(("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")))
    if seen == 0:
        clash = amdsmi_mismatch(ctx) if ctx.vendor == "amd" else None
        if clash is not None:  # the known cause: a PyPI amdsmi of another ROCm release beside torch's own
            return failed(f"torch sees no GPU ({len(system)} on the system): the amdsmi package {clash[0]} is "
                          f"for another ROCm than the installed {clash[1]}", amdsmi_fix(clash[1]), evidence)
        return failed(f"torch sees no GPU ({len(system)} on the system)",
                      fixes.shell("python -c 'import torch; print(torch.cuda.is_available())'",
                                  "shows the error; the devices.* and torch.build verdicts say more"), evidence)
    if seen < len(system):
        hint = f" ({', '.join(visible)} set)" if visible else ""
        return warned(f"torch sees {seen} of {len(system)} GPUs{hint}",
                      fixes.unset(*visible, why="if you meant to use all GPUs") if visible else
                      fixes.note("another process or a container limit hides the rest"), evidence)
    return passed(f"torch sees {seen} GPU(s)", evidence)
