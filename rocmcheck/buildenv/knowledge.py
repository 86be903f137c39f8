"""build_facts.json: what the PyTorch, flash-attn and DeepSpeed build scripts accept, with sources."""

from __future__ import annotations

from typing import Any

from rocmcheck.package_data import read_json


def build_facts() -> dict[str, Any]:
    return read_json(__package__, "build_facts.json")
