"""Environment variables that change which GPU and which code the stack uses."""

from __future__ import annotations

from rocmcheck import fixes
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext
from rocmcheck.facts.parsers.nccl_env import TRANSPORT_VARS, transport_settings
from rocmcheck.knowledge import arch_info
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

VISIBLE_VARS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@check("env.hsa_override", "HSA_OVERRIDE_GFX_VERSION not faking the arch")
def check_hsa_override(ctx: CheckContext) -> CheckResult:
    value = ctx.env_var("HSA_OVERRIDE_GFX_VERSION")
    if value is None:
        return passed("HSA_OVERRIDE_GFX_VERSION is not set")
    parts = [_index(p) for p in value.split(".")]
    faked = None
    if len(parts) == 3 and None not in parts:
        faked = f"gfx{parts[0]}{parts[1]}{parts[2]:x}"
    evidence = [f"HSA_OVERRIDE_GFX_VERSION={value}" + (f" makes every GPU report {faked}" if faked else "")]
    # A marketing name that does not belong to the reported arch shows the override at work.
    for g in ctx.amd_gpus:
        entry = arch_info(g.arch or "")
        if entry and g.name and entry.match_product(g.name) is None:
            evidence.append(f"GPU {g.index} '{g.name}' reports {g.arch}, which is not its own arch")
    instinct = [g for g in ctx.amd_gpus if g.name and "instinct" in g.name.lower()]
    if instinct:
        return failed("HSA_OVERRIDE_GFX_VERSION is set on an Instinct GPU, which never needs it",
                      fixes.unset("HSA_OVERRIDE_GFX_VERSION", why="and remove it from ~/.bashrc / the container's ENV"),
                      evidence)
    return warned(f"HSA_OVERRIDE_GFX_VERSION={value} runs kernels built for another arch",
                  fixes.unset("HSA_OVERRIDE_GFX_VERSION", why="only GPUs ROCm ships no code for need it; also remove "
                              "it from ~/.bashrc / the container's ENV"), evidence)


@check("env.visible_devices", "GPU visibility variables consistent")
def check_visible_devices(ctx: CheckContext) -> CheckResult:
    setvars = ctx.env_vars(VISIBLE_VARS)
    if not setvars:
        return passed("no visibility variable set: every GPU is visible")
    evidence = [f"{k}={v!r}" for k, v in setvars.items()]
    empty = [k for k, v in setvars.items() if v.strip() == ""]
    if empty:
        return failed(f"{', '.join(empty)} is empty, which hides every GPU",
                      fixes.unset(*empty), evidence)
    # rocminfo and nvidia-smi already apply ROCR_/CUDA_VISIBLE_DEVICES, so indices are judged against what is left
    # only for HIP_VISIBLE_DEVICES (relative to ROCR's selection, per ROCm's GPU isolation docs).
    count = len(ctx.vendor_gpus()) if "HIP_VISIBLE_DEVICES" in setvars else 0
    if count and "HIP_VISIBLE_DEVICES" in setvars:
        bad = [t.strip() for t in setvars["HIP_VISIBLE_DEVICES"].split(",") if _index(t) is not None
               and _index(t) >= count]
        if bad:
            return failed(f"HIP_VISIBLE_DEVICES names GPU {', '.join(bad)} but only {count} visible",
                          fixes.shell("export HIP_VISIBLE_DEVICES={indices}",
                                      f"indices 0..{count - 1}: HIP counts within what ROCR_VISIBLE_DEVICES leaves",
                                      indices=",".join(str(i) for i in range(count))),
                          evidence)
    twice = _renumbered_twice(ctx, setvars)
    if twice is not None:
        return twice
    distinct = {v.replace(" ", "") for v in setvars.values()}
    if len(setvars) > 1 and len(distinct) > 1:
        keep = "CUDA_VISIBLE_DEVICES" if ctx.known_vendor() == "nvidia" else "ROCR_VISIBLE_DEVICES"
        return warned("several visibility variables set to different values",
                      fixes.unset(*[v for v in setvars if v != keep],
                                  why=f"keep one: {keep} ({'ROCm' if keep.startswith('ROCR') else 'NVIDIA'}); "
                                       "HIP_VISIBLE_DEVICES indexes within ROCR's selection"), evidence)
    return passed("GPU visibility restricted consistently", evidence)


@check("env.pytorch_rocm_arch", "PYTORCH_ROCM_ARCH covers the GPUs")
def check_pytorch_rocm_arch(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    archs = sorted({g.arch for g in ctx.amd_gpus if g.arch}) or list(ctx.expected_archs)
    suggestion = ";".join(archs) or "gfx942"
    value = ctx.env_var("PYTORCH_ROCM_ARCH")
    if value is None:
        return passed(f"unset (read only by source builds); for builds: export PYTORCH_ROCM_ARCH={suggestion}")
    listed = [a for a in value.replace(";", " ").split() if a]
    removed = [a for a in listed if a in ("gfx940", "gfx941")]
    if removed:
        return failed(f"PYTORCH_ROCM_ARCH lists {', '.join(removed)}, which ROCm no longer builds",
                      fixes.shell("export PYTORCH_ROCM_ARCH={archs}", "gfx940/gfx941 were folded into gfx942",
                                  archs=suggestion))
    missing = [a for a in archs if a not in listed]
    if missing:
        return failed(f"PYTORCH_ROCM_ARCH={value} misses {', '.join(missing)}",
                      fixes.shell("export PYTORCH_ROCM_ARCH={archs}",
                                  "else extensions fail with 'invalid device function'", archs=suggestion))
    return passed(f"PYTORCH_ROCM_ARCH={value} covers {', '.join(archs) or 'the target'}")


@check("env.nccl_transport", "NCCL/RCCL peer-to-peer and shared-memory transports not switched off")
def check_nccl_transport(ctx: CheckContext) -> CheckResult:
    settings = transport_settings(ctx.env_vars(TRANSPORT_VARS))
    if not settings:
        return passed("NCCL_P2P_DISABLE, NCCL_SHM_DISABLE and NCCL_P2P_LEVEL are not set")
    evidence = [f"{s.name}={s.value!r}: {s.meaning}" for s in settings]
    off = [s for s in settings if s.turns_off]
    if off:
        said = ", ".join(f"{s.name}={s.value}" for s in off)
        return warned(f"{said} switches a NCCL/RCCL transport off: collectives between this node's GPUs go through "
                      "host memory and run far slower", fixes.nccl_transport_unset(*[s.name for s in off]), evidence)
    return passed("NCCL/RCCL transports on (" + "; ".join(s.meaning for s in settings) + ")", evidence)


# More digits than any GPU index has: such a value is not an index (and int() of thousands of digits raises).
MAX_INDEX_DIGITS = 6


def _index(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= MAX_INDEX_DIGITS else None


def _indices(value: str) -> list[int] | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    found = [_index(p) for p in parts]
    return [i for i in found if i is not None] if parts and None not in found else None


def _renumbered_twice(ctx: CheckContext, setvars: dict[str, str]) -> CheckResult | None:
    """On ROCm, HIP_/CUDA_VISIBLE_DEVICES index within what ROCR_VISIBLE_DEVICES left (ROCm GPU isolation docs):
    the same list in both does not mean the same GPUs."""
    if "ROCR_VISIBLE_DEVICES" not in setvars or ctx.known_vendor() == "nvidia":
        return None
    second = next((v for v in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") if v in setvars), None)
    if second is None:
        return None
    evidence = [f"{k}={v!r}" for k, v in setvars.items()]
    rocr, inner = _indices(setvars["ROCR_VISIBLE_DEVICES"]), _indices(setvars[second])
    fix = fixes.unset(second, why="set only ROCR_VISIBLE_DEVICES (physical indices or UUIDs)")
    if rocr is None or inner is None:
        return warned(f"ROCR_VISIBLE_DEVICES and {second} are both set: {second} renumbers within ROCR's selection",
                      fix, evidence)
    missing = [i for i in inner if i >= len(rocr)]
    if missing:
        return failed(f"{second}={setvars[second]} names GPU {', '.join(map(str, missing))}, but ROCR_VISIBLE_DEVICES "
                      f"leaves only {len(rocr)} (numbered 0..{len(rocr) - 1}): the GPUs are renumbered twice", fix,
                      evidence)
    physical = ",".join(str(rocr[i]) for i in inner)
    return warned(f"ROCR_VISIBLE_DEVICES then {second} renumber twice: the process gets physical GPU(s) {physical}",
                  fixes.shell("export ROCR_VISIBLE_DEVICES={physical}; unset {second}", "the same GPUs, numbered once",
                              physical=physical, second=second), evidence, physical=physical)


@check("env.site_forbidden", "no variable the site's rules forbid is set")
def check_site_forbidden(ctx: CheckContext) -> CheckResult:
    """The variables a site forbids (--knowledge, `forbidden_env`), each with the site's reason."""
    from rocmcheck.facts.collect import in_env_domain

    rules = ctx.site_rules.forbidden_env if ctx.site_rules is not None else {}
    if not rules:
        return skipped("no forbidden variables: no site rules given (--knowledge)")
    recorded = [n for n in rules if in_env_domain(n)]
    unread = [n for n in rules if n not in recorded]
    evidence = [f"not judged (rocmcheck does not record it): {', '.join(unread)}"] if unread else []
    found = ctx.env_vars(recorded)
    if not found:
        return passed(f"none of {', '.join(recorded)} is set", evidence) if recorded else \
            skipped("no forbidden variable rocmcheck records", evidence)
    evidence = [f"{n}={v}: {rules[n].values[0]} ({rules[n].cite()})" for n, v in found.items()] + evidence
    return warned(f"set, and forbidden by the site: {', '.join(found)}",
                  fixes.unset(*found, why="the site's rules forbid it (" + "; ".join(
                      sorted({rules[n].file for n in found})) + "); remove it from the job script or image too"),
                  evidence)
