"""Helpers for the lint tests: the seed's real DeepSpeed config, and DeepSpeed availability."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SEEDS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"
REPO = Path(__file__).resolve().parents[1]

needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                     reason="deepspeed is not installed (pip install deepspeed, see docs/lint.md)")


def seed_deepspeed_config() -> dict:
    """The ZeRO-3 offload JSON exactly as published in the second seed (a blog post in ../shared/seeds),
    cut out of the post's text by matching braces."""
    if not SEEDS_DIR.is_dir():
        pytest.skip(f"../shared/seeds not found: {SEEDS_DIR}")
    for path in sorted(SEEDS_DIR.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        anchor = text.find('"zero_optimization"')
        if anchor < 0:
            continue
        start = text.rfind("{", 0, anchor)
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                return json.loads(text[start:end + 1])
    pytest.fail(f"no seed in {SEEDS_DIR} holds a DeepSpeed config")


def write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2))
    return path


def by_code(messages, code):
    return [m for m in messages if m.code == code]
