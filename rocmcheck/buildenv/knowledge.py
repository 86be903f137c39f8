"""build_facts.json: what the PyTorch, flash-attn and DeepSpeed build scripts accept, with sources."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=None)
def build_facts() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("build_facts.json").read_text(encoding="utf-8"))
