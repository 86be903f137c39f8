"""Turn what a person typed after --arch into validated arch names, or one clear error."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocmcheck.knowledge import arch_info, base_gfx, suggest_arch

# An arch name is letters, digits and "_" (gfx942, gfx90a, sm_90), optionally followed by LLVM
# target features as torch's gcnArchName prints them (gfx942:sramecc+:xnack-). Anything else --
# spaces, ";", "$", quotes, newlines -- is refused before it can reach a shell or a Dockerfile.
_ARCH_SHAPE = re.compile(r"[A-Za-z0-9_.\-]{1,24}(:[A-Za-z0-9_]{1,16}[+-])*")


class ArchError(ValueError):
    """A bad --arch value; the message is one line a person can act on."""


@dataclass(frozen=True)
class ArchSelection:
    vendor: str  # "amd" | "nvidia"
    archs: tuple[str, ...]  # validated, de-duplicated, in the order given
    notes: tuple[str, ...] = ()  # things worth a comment (deprecated arch, stripped features)


def validate_arch(raw: str) -> tuple[str, str | None]:
    """One arch name -> (canonical name, optional note). Raises ArchError."""
    text = raw.strip()
    if not _ARCH_SHAPE.fullmatch(text):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise ArchError(f"{shown!r} is not a GPU architecture name (expected e.g. gfx942, gfx90a, sm_90)")
    name = base_gfx(text)
    note = f"{text}: target features dropped, building generic {name} code" if name != text else None
    info = arch_info(name)
    if info is None:
        hint = suggest_arch(text)
        if hint:
            raise ArchError(f"unknown GPU architecture {text!r}: did you mean {hint}?")
        raise ArchError(
            f"unknown GPU architecture {text!r}; known: {', '.join(_known_names())} (or 'auto' for the GPUs here)"
        )
    if info.status == "removed":
        target = info.replaced_by or "a current target"
        if info.note and target in info.note:
            raise ArchError(f"{name} is no longer a build target: {info.note}")
        raise ArchError(f"{name} is no longer a build target; use {target}")
    if info.status == "deprecated":
        note = f"{name} is deprecated: {info.note}" if info.note else f"{name} is deprecated"
    return name, note


def select_archs(raw_archs: list[str]) -> ArchSelection:
    """Validate every name, refuse AMD and NVIDIA in one call, drop duplicates."""
    if not raw_archs:
        raise ArchError("no GPU architecture given: pass --arch gfx942 (repeatable), --arch sm_90, or --arch auto")
    names: list[str] = []
    notes: list[str] = []
    for raw in raw_archs:
        name, note = validate_arch(raw)
        if name not in names:
            names.append(name)
        if note and note not in notes:
            notes.append(note)
    vendors = {arch_info(n).vendor for n in names}  # type: ignore[union-attr]
    if len(vendors) > 1:
        amd = [n for n in names if arch_info(n).vendor == "amd"]  # type: ignore[union-attr]
        nvidia = [n for n in names if arch_info(n).vendor == "nvidia"]  # type: ignore[union-attr]
        raise ArchError(
            f"AMD ({', '.join(amd)}) and NVIDIA ({', '.join(nvidia)}) archs cannot share one build environment: "
            "run build-env once per vendor"
        )
    return ArchSelection(vendor=vendors.pop(), archs=tuple(names), notes=tuple(notes))


def _known_names() -> list[str]:
    from rocmcheck.knowledge import all_archs

    return [n for n, a in all_archs().items() if a.status != "removed"]
