"""Helpers for the lint tests: the seed's real DeepSpeed config, and DeepSpeed availability."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SEED_CONFIG = Path(__file__).resolve().parent / "fixtures" / "seeds" / "zero3-offload-seed.json"
REPO = Path(__file__).resolve().parents[1]

needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                     reason="deepspeed is not installed (pip install deepspeed, see docs/lint.md)")


def seed_deepspeed_config() -> dict:
    """The ZeRO-3 offload JSON exactly as published in the second seed report (tests/fixtures/seeds/README.md)."""
    return json.loads(SEED_CONFIG.read_text(encoding="utf-8"))


def write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2))
    return path


def by_code(messages, code):
    return [m for m in messages if m.code == code]


def llamafactory_data(folder: Path, *names: str) -> Path:
    """LLaMA-Factory's data/ layout in `folder`: a dataset_info.json defining each name as a local file, and those
    (empty) files; lint looks datasets up there, relative to the working directory, as llamafactory-cli does."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "dataset_info.json").write_text(json.dumps({n: {"file_name": f"{n}.json"} for n in names}))
    for name in names:
        (data / f"{name}.json").write_text("[]")
    return data
