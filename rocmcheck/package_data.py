"""The one way rocmcheck reads the data files it ships (knowledge tables, lint vocabularies, presets, the JSON
schema, recipes): through importlib.resources, so an installed copy, a wheel and a source checkout all work.
Each JSON file is parsed once per process."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable  # importlib.abc.Traversable is gone in Python 3.14
from typing import Any


def folder(package: str) -> Traversable:
    """The data folder of a package ("rocmcheck.knowledge")."""
    return resources.files(package)


def read_text(package: str, name: str) -> str:
    return folder(package).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def read_json(package: str, name: str) -> Any:
    """A shipped JSON file, parsed (cached: callers must not change what they get)."""
    return json.loads(read_text(package, name))
