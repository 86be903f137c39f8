"""DeepSpeed's config vocabulary (deepspeed_keys.json) and "did you mean" over it."""

from __future__ import annotations

import difflib
import functools
from importlib import metadata
from typing import Any, Iterable

from packaging.version import InvalidVersion, Version

from rocmcheck.package_data import read_json

# Sections whose DeepSpeed model forbids unknown keys (pydantic extra="forbid").
STRICT_SECTIONS = (
    "zero_optimization",
    "zero_optimization.offload_param",
    "zero_optimization.offload_optimizer",
    "bf16",
    "fp16",
)


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return read_json("rocmcheck.lint", "deepspeed_keys.json")


def top_level_keys(extra: Iterable[str] = ()) -> set[str]:
    return set(table()["top_level"]) | set(extra)


def section_keys(section: str) -> set[str]:
    return set(table()["strict_sections"].get(section, ()))


def closest(key: str, candidates: Iterable[str], cutoff: float = 0.8) -> str | None:
    """The one candidate a typo most likely meant (difflib ratio >= cutoff), or None."""
    found = difflib.get_close_matches(key, sorted(candidates), n=1, cutoff=cutoff)
    return found[0] if found else None


def phantom(key_path: str) -> str | None:
    """Why a key people write exists in no DeepSpeed release (None if it is not such a key)."""
    return table()["phantom"].get(key_path)


def history(key_path: str) -> dict[str, str] | None:
    """{"first_seen", "last_seen"} for keys some DeepSpeed release rejects, else None."""
    return table()["history"].get(key_path)


def removed(key: str, section: str) -> dict[str, str] | None:
    entry = table()["removed"].get(key)
    return entry if entry and entry["section"] == section else None


def installed_deepspeed_version() -> Version | None:
    """From package metadata: cheap, never imports deepspeed (which imports torch)."""
    try:
        return Version(metadata.version("deepspeed"))
    except (metadata.PackageNotFoundError, InvalidVersion):
        return None
