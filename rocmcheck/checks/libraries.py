"""The libraries a LLaMA fine-tune leans on: Triton, flash-attention, DeepSpeed, transformers."""

from __future__ import annotations

from typing import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from rocmcheck import fixes
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.shell_words import words
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.versions import series

# Every distribution that provides the `triton` module: PyPI's CUDA `triton`, the ROCm wheels' `pytorch-triton-rocm`
# (renamed `triton-rocm` from torch 2.10, https://github.com/invoke-ai/InvokeAI/pull/9297) and the nightlies'
# `pytorch-triton` (https://github.com/pytorch/pytorch/blob/main/RELEASE.md). Two installed = one overwrites the other.
TRITON_DISTS = ("triton", "pytorch-triton-rocm", "triton-rocm", "pytorch-triton")
MIN_TRANSFORMERS = "4.45"  # LlamaForCausalLM with sdpa/flash_attention_2 attn_implementation and bf16 fixes


def torch_triton_pin(requires: list[str]) -> Requirement | None:
    """The Triton requirement in torch's own metadata (markers evaluated here, extras ignored)."""
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() not in TRITON_DISTS:
            continue
        if req.marker is not None:
            try:
                if not req.marker.evaluate({"extra": ""}):
                    continue
            except Exception:
                continue
        return req
    return None


def _pip_install(ctx: CheckContext, requirement: Requirement | str, why: str = "",
                 uninstall: Sequence[str] = ()) -> fixes.Fix:
    """`pip install REQUIREMENT`, after `pip uninstall -y` of the given distributions; from PyTorch's ROCm index
    when torch is a ROCm build, where the ROCm Triton wheels live (pytorch RELEASE.md), not on PyPI."""
    from rocmcheck.checks.rocm import torch_rocm_version

    series = known_or_none(lambda: torch_rocm_version(ctx))
    index = fixes.torch_index_url("amd", series) if known_or_none(lambda: ctx.torch_is_rocm) and series else None
    if isinstance(requirement, Requirement):  # its marker was evaluated here: pip needs only name and version
        requirement = f"{requirement.name}{requirement.specifier}"
    install = fixes.shell("pip install {requirement}" + (" --index-url {index}" if index else ""), why,
                          requirement=requirement, index=index)
    if not uninstall:
        return install
    names, values = words("dist", uninstall)
    return fixes.then(fixes.shell("pip uninstall -y " + names, why, **values), install)


@check("triton.pin", "exactly one Triton, the version torch pins")
def check_triton(ctx: CheckContext) -> CheckResult:
    torch = ctx.package("torch")
    if not torch:
        return skipped("torch not installed")
    installed = {d: v for d in TRITON_DISTS if (v := ctx.package(d))}
    pin = torch_triton_pin(ctx.torch_requires())
    evidence = [f"installed: {', '.join(f'{d}=={v}' for d, v in installed.items()) or 'none'}",
                f"torch {torch} requires: {pin or 'no triton'}"]
    if len(installed) > 1:
        keep = pin.name if pin else next(iter(installed))
        drop = [d for d in installed if d != keep]
        return failed(f"{len(installed)} Triton distributions installed; they overwrite each other's "
                      "`triton` module", _pip_install(ctx, pin or keep, "one Triton, the one torch pins",
                                                      uninstall=[*drop, keep]),
                      evidence)
    if pin is None:
        if installed:
            d, v = next(iter(installed.items()))
            return passed(f"{d} {v} (torch pins none)", evidence)
        return passed("torch needs no Triton (this build pins none)", evidence)
    have = installed.get(pin.name.lower()) or installed.get(pin.name)
    if not installed:
        return failed(f"{pin.name} is not installed but torch requires {pin}",
                      _pip_install(ctx, pin, "the Triton torch pins"), evidence)
    if have is None:
        other, v = next(iter(installed.items()))
        return failed(f"{other} {v} installed, but torch requires {pin}",
                      _pip_install(ctx, pin, "the Triton torch pins, in place of the other", uninstall=[other]),
                      evidence)
    try:
        ok = pin.specifier.contains(Version(have), prereleases=True) if pin.specifier else True
    except ValueError:  # InvalidVersion, or more digits than int() takes
        ok = False
    if not ok:
        return failed(f"{pin.name} {have} installed, torch requires {pin}",
                      _pip_install(ctx, pin, "a mismatched Triton breaks torch.compile and flash-attn's Triton "
                                   "backend"),
                      evidence)
    return passed(f"{pin.name} {have} as torch pins", evidence)


def _archs(ctx: CheckContext) -> list[str]:
    """The GPUs' archs for a rebuild line ([] when they are not known: the line then builds for the default)."""
    return sorted({g.arch for g in known_or_none(lambda: ctx.gpus) or [] if g.arch})


@check("flash_attn.import", "flash-attn imports cleanly")
def check_flash_attn_import(ctx: CheckContext) -> CheckResult:
    fa = ctx.probe("flash_attn")
    if fa is None:
        if not ctx.probe_died("flash_attn") and not (ctx.package("flash-attn") or ctx.package("flash_attn")):
            return skipped("flash-attn not installed (optional: torch SDPA is used instead)")
        return failed(f"importing flash_attn {ctx.probe_failure('flash_attn')}", fixes.flash_attn_rebuild(_archs(ctx)))
    if not fa.get("installed"):
        return skipped("flash-attn not installed (optional: torch SDPA is used instead)")
    error = fa.get("import_error") or fa.get("error")
    if error:
        undefined = "undefined symbol" in error
        why = ("built against a different torch (undefined symbol)" if undefined else "import failed")
        return failed(f"flash-attn {why}: {error[:200]}", fixes.flash_attn_rebuild(_archs(ctx)))
    return passed(f"flash-attn {fa.get('version')} imports", version=fa.get("version"))


@check("flash_attn.backend", "flash-attn backend on this GPU")
def check_flash_attn_backend(ctx: CheckContext) -> CheckResult:
    fa = ctx.probe("flash_attn") or {}
    if not fa.get("installed") or fa.get("import_error") or fa.get("error"):
        return skipped("flash-attn not importable")
    ext = fa.get("extension")
    triton = fa.get("triton_amd_enable")
    if ctx.torch_is_rocm:
        if triton:
            return passed("Triton backend (FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE)")
        if ext:
            return passed("CK backend (flash_attn_2_cuda extension loaded)")
        return failed("neither the CK extension nor the Triton backend is available",
                      fixes.shell("export FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE",
                                  "the Triton backend (needs the aiter kernels); or rebuild CK: "
                                  + fixes.flash_attn_rebuild(_archs(ctx)).text),
                      [fa.get("extension_error") or ""])
    if ext:
        return passed("CUDA extension (flash_attn_2_cuda) loaded")
    return failed("flash_attn_2_cuda does not load",
                  fixes.flash_attn_rebuild(sorted({g.arch for g in ctx.gpus if g.arch})),
                  [fa.get("extension_error") or ""])


# Ops a fine-tune needs: FusedAdam (GPU optimizer) and DeepSpeedCPUAdam (ZeRO-Offload).
NEEDED_DS_OPS = ("fused_adam", "cpu_adam")


@check("deepspeed.install", "DeepSpeed installed against this torch")
def check_deepspeed_install(ctx: CheckContext) -> CheckResult:
    ds = ctx.probe("deepspeed")
    if ds is None:
        if not ctx.probe_died("deepspeed") and not ctx.package("deepspeed"):
            return skipped("DeepSpeed not installed (optional; needed for ZeRO / offload)")
        return failed(f"importing deepspeed {ctx.probe_failure('deepspeed')}",
                      fixes.DEEPSPEED_REINSTALL)
    if not ds.get("installed"):
        return skipped("DeepSpeed not installed (optional; needed for ZeRO / offload)")
    if ds.get("import_error") or ds.get("error"):
        return failed(f"importing deepspeed failed: {(ds.get('import_error') or ds.get('error'))[:200]}",
                      fixes.DEEPSPEED_REINSTALL)
    info = ds.get("torch_info") or {}
    evidence = [f"deepspeed {ds.get('version')}, accelerator {ds.get('accelerator')}, "
                f"built with torch {info.get('version')} "
                f"hip {info.get('hip_version')} cuda {info.get('cuda_version')}"]
    torch_v = ((ctx.torch or {}).get("version") or "").split("+")[0]
    torch_mm = series(torch_v)
    reinstall = fixes.DEEPSPEED_REINSTALL
    if info.get("version") == "0.0":
        return warned("DeepSpeed was installed with build isolation (records torch 0.0): no op was "
                      "prebuilt against your torch", fixes.with_why(reinstall, "after torch is installed"), evidence)
    if torch_mm and info.get("version") and info["version"] != torch_mm:
        return warned(f"DeepSpeed was built with torch {info['version']}, torch is now {torch_mm}",
                      reinstall, evidence)
    if ds.get("accelerator") not in (None, "cuda") and ctx.known_vendor() == "amd":
        return failed(f"DeepSpeed picked accelerator '{ds.get('accelerator')}' on an AMD GPU machine",
                      fixes.shell("export DS_ACCELERATOR=cuda", "ROCm uses DeepSpeed's cuda accelerator"), evidence)
    return passed(f"DeepSpeed {ds.get('version')}", evidence)


@check("deepspeed.ops", "DeepSpeed ops a fine-tune needs are prebuilt or can JIT-build")
def check_deepspeed_ops(ctx: CheckContext) -> CheckResult:
    ds = ctx.probe("deepspeed") or {}
    if not ds.get("installed") or ds.get("import_error") or ds.get("error"):
        return skipped("DeepSpeed not importable")
    ops = ds.get("ops") or {}
    jit = ds.get("jit") or {}
    gpu_compiler = "hipcc" if ctx.torch_is_rocm else "nvcc" if ctx.torch_is_cuda else None
    missing_tools = [name for name, ok in (("ninja", jit.get("ninja")), ("a C++ compiler", jit.get("cxx")),
                                           ("Python headers (Python.h)", jit.get("python_headers"))) if not ok]
    if gpu_compiler and not jit.get(gpu_compiler):
        missing_tools.append(gpu_compiler)
    evidence, problems = [], []
    for name in NEEDED_DS_OPS:
        op = ops.get(name) or {}
        if op.get("installed"):
            evidence.append(f"{name}: prebuilt")
        elif not op.get("known"):
            evidence.append(f"{name}: unknown to this DeepSpeed")
            problems.append(name)
        elif not op.get("compatible"):
            evidence.append(f"{name}: not compatible here")
            problems.append(name)
        elif missing_tools and not (name == "fused_adam" and not gpu_compiler):
            evidence.append(f"{name}: compatible, JIT build would lack {', '.join(missing_tools)}")
            problems.append(name)
        else:
            evidence.append(f"{name}: compatible, will JIT-build on first use")
    aio = ops.get("async_io") or {}
    if aio.get("known") and not aio.get("compatible"):
        evidence.append("async_io: not compatible (only NVMe offload needs it: sudo apt install libaio-dev)")
    if problems:
        why = "prebuild the ops" + (f"; the JIT build lacks {', '.join(missing_tools)}" if missing_tools else "")
        fix = fixes.shell(("sudo apt install ninja-build g++ python3-dev && " if missing_tools else "")
                          + "DS_BUILD_FUSED_ADAM=1 DS_BUILD_CPU_ADAM=1 pip install --force-reinstall --no-cache-dir "
                            "--no-build-isolation deepspeed", why)
        return failed(f"{', '.join(problems)} cannot be used", fix, evidence)
    return passed("fused_adam and cpu_adam usable", evidence)


@check("transformers.version", "transformers installed and recent")
def check_transformers(ctx: CheckContext) -> CheckResult:
    v = ctx.package("transformers")
    if not v:
        return warned("transformers is not installed",
                      fixes.shell("pip install {requirement}", "install torch first so pip keeps your torch build",
                                  requirement=f"transformers>={MIN_TRANSFORMERS}"))
    try:
        old = Version(v) < Version(MIN_TRANSFORMERS)
    except ValueError:  # InvalidVersion, or more digits than int() takes
        old = False
    if old:
        return warned(f"transformers {v} predates {MIN_TRANSFORMERS}",
                      fixes.shell("pip install -U {requirement}", "LlamaForCausalLM with sdpa attention and the bf16 "
                                  "fixes", requirement=f"transformers>={MIN_TRANSFORMERS}"))
    return passed(f"transformers {v}")
