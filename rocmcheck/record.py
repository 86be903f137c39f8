"""Plain records that travel as JSON (bundles, child events, monitor files): a dataclass with flat fields."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, TypeVar

R = TypeVar("R", bound="Record")


class Record:
    """to_dict / from_dict for a dataclass: from_dict keeps the fields it knows and ignores the others, so a file
    written by a newer rocmcheck still loads."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[R], d: dict[str, Any]) -> R:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in known})
