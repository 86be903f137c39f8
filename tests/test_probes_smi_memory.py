"""The memory probe's fallback reader of the driver tool's totals, on a real recorded output."""

from conftest import read_fixture

from rocmcheck.probes.smi_memory import parse_rocm_smi_vram_json


def fixture(rel: str) -> str:
    return read_fixture(rel)


def test_rocm_smi_json_total_vram():
    text = fixture("rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt")
    assert parse_rocm_smi_vram_json(text) == [21458059264]


def test_not_json_gives_nothing():
    assert parse_rocm_smi_vram_json(fixture("rocm-smi/mi300x-spx-rocm6.3.3-showmeminfo-vram.txt")) == []
