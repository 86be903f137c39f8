"""Reading config files: JSON (duplicate keys rejected, as DeepSpeed does) and YAML, through the one capped reader
and the one limited loader (rocmcheck/safe)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocmcheck.safe.files import UnreadableFile
from rocmcheck.safe.structured import LimitedSafeLoader, load_file


class LintInputError(Exception):
    """The file itself cannot be linted: missing, unreadable, not JSON/YAML, not a mapping."""


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def load_mapping(path: Path) -> dict:
    try:
        data = load_file(path, what="config file", object_pairs_hook=_no_duplicates, loader=LimitedSafeLoader)
    except _DuplicateKey as exc:
        raise LintInputError(f"{path}: key \"{exc}\" appears twice (DeepSpeed rejects duplicate keys)") from None
    except UnreadableFile as exc:
        raise LintInputError(str(exc)) from None
    if not isinstance(data, dict):
        raise LintInputError(f"{path}: expected a mapping of keys at the top, found {type(data).__name__}")
    return data
