"""Turn what a person typed after --arch into validated arch names, or one clear error."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocmcheck.errors import BadInput
from rocmcheck.knowledge import arch_info, base_gfx, suggest_arch

# An arch name is letters, digits and "_" (gfx942, gfx90a, sm_90), optionally followed by LLVM
# target features as torch's gcnArchName prints them (gfx942:sramecc+:xnack-). Anything else --
# spaces, ";", "$", quotes, newlines -- is refused before it can reach a shell or a Dockerfile.
_ARCH_SHAPE = re.compile(r"[A-Za-z0-9_.\-]{1,24}(:[A-Za-z0-9_]{1,16}[+-])*")
# The features an AMDGPU target ID may carry (LLVM AMDGPUUsage, "Target ID"): each at most once, with
# + (on) or - (off); without it the code runs in either mode. clang wants them in this order.
TARGET_FEATURES = ("sramecc", "xnack")




@dataclass(frozen=True)
class ArchSelection:
    vendor: str  # "amd" | "nvidia"
    archs: tuple[str, ...]  # validated, de-duplicated, in the order given
    notes: tuple[str, ...] = ()  # things worth a comment (deprecated arch, stripped features)


def validate_arch(raw: str) -> tuple[str, str | None]:
    """One arch name -> (canonical name, optional note). Raises BadInput."""
    text = raw.strip()
    if not _ARCH_SHAPE.fullmatch(text):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise BadInput(f"{shown!r} is not a GPU architecture name (expected e.g. gfx942, gfx90a, sm_90)")
    name = base_gfx(text)
    info = arch_info(name)
    if info is None:
        hint = suggest_arch(text)
        if hint:
            raise BadInput(f"unknown GPU architecture {text!r}: did you mean {hint}?")
        raise BadInput(
            f"unknown GPU architecture {text!r}; known: {', '.join(_known_names())} (or 'auto' for the GPUs here)"
        )
    if info.status == "removed":
        target = info.replaced_by or "a current target"
        if info.note and target in info.note:
            raise BadInput(f"{name} is no longer a build target: {info.note}")
        raise BadInput(f"{name} is no longer a build target; use {target}")
    note = None
    if info.status == "deprecated":
        note = f"{name} is deprecated: {info.note}" if info.note else f"{name} is deprecated"
    return name + _features(text, name, info.vendor), note


def _features(text: str, name: str, vendor: str) -> str:
    """":sramecc+:xnack-" from "gfx942:xnack-:sramecc+" (validated, in clang's order); "" when none."""
    given = text.split(":")[1:]
    if not given:
        return ""
    if vendor != "amd":
        raise BadInput(f"{text!r}: target features (':xnack+') exist only for AMD GPUs")
    seen: dict[str, str] = {}
    for feature in given:
        key, sign = feature[:-1], feature[-1]
        if key not in TARGET_FEATURES:
            raise BadInput(f"unknown target feature {feature!r} in {text!r}: an AMD target ID takes "
                            f"{' and '.join(f + '+/-' for f in TARGET_FEATURES)} (e.g. {name}:xnack+)")
        if key in seen:
            raise BadInput(f"{text!r} names {key} twice")
        seen[key] = sign
    return "".join(f":{key}{seen[key]}" for key in TARGET_FEATURES if key in seen)


def select_archs(raw_archs: list[str]) -> ArchSelection:
    """Validate every name, refuse AMD and NVIDIA in one call, drop duplicates."""
    if not raw_archs:
        raise BadInput("no GPU architecture given: pass --arch gfx942 (repeatable), --arch sm_90, or --arch auto")
    names: list[str] = []
    notes: list[str] = []
    for raw in raw_archs:
        name, note = validate_arch(raw)
        if name not in names:
            names.append(name)
        if note and note not in notes:
            notes.append(note)
    # clang refuses one processor twice with different features ("invalid offload arch combinations:
    # 'gfx942' and 'gfx942:xnack+'"): such a processor is built once, as generic code that runs in any mode.
    for base in dict.fromkeys(base_gfx(n) for n in names):
        variants = [n for n in names if base_gfx(n) == base]
        if len(variants) > 1:
            names = [base if n == variants[0] else n for n in names if n == variants[0] or base_gfx(n) != base]
            notes.append(f"{', '.join(variants)}: target features dropped, building generic {base} code "
                         "(clang builds one processor once)")
    vendors = {arch_info(n).vendor for n in names}  # type: ignore[union-attr]
    if len(vendors) > 1:
        amd = [n for n in names if arch_info(n).vendor == "amd"]  # type: ignore[union-attr]
        nvidia = [n for n in names if arch_info(n).vendor == "nvidia"]  # type: ignore[union-attr]
        raise BadInput(
            f"AMD ({', '.join(amd)}) and NVIDIA ({', '.join(nvidia)}) archs cannot share one build environment: "
            "run build-env once per vendor"
        )
    return ArchSelection(vendor=vendors.pop(), archs=tuple(names), notes=tuple(notes))


def _known_names() -> list[str]:
    from rocmcheck.knowledge import all_archs

    return [n for n, a in all_archs().items() if a.status != "removed"]
