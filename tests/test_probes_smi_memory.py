"""The memory probe's fallback reader of the driver tool's totals, on a real recorded output."""

from pathlib import Path

import pytest

from rocmcheck.probes.smi_memory import parse_rocm_smi_vram_json

FIXTURES = Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures"


def fixture(rel: str) -> str:
    path = FIXTURES / rel
    if not path.exists():
        pytest.skip(f"shared fixtures not found at {FIXTURES} (they live outside the repo)")
    return path.read_text()


def test_rocm_smi_json_total_vram():
    text = fixture("rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt")
    assert parse_rocm_smi_vram_json(text) == [21458059264]


def test_not_json_gives_nothing():
    assert parse_rocm_smi_vram_json(fixture("rocm-smi/mi300x-spx-rocm6.3.3-showmeminfo-vram.txt")) == []
