"""rocm-smi / amd-smi parsers and merge_smi on the verbatim outputs in tests/fixtures/public."""

from __future__ import annotations

import json
import random

import pytest

from rocmcheck.facts.parsers import smi

LEGACY = "rocm-smi/mi210-4gpu-rocm5.7.1-concise-legacy.txt"
MODEL_REVISION = "rocm-smi/mi300x-8gpu-rocm6.0-era-concise-model-revision.txt"
ANSI_LITERAL = "rocm-smi/mi300x-8gpu-rocm6.2.3-concise-ansi-literal.txt"
QPX = "rocm-smi/mi300x-qpx-4partitions-rocm6.3.3-concise.txt"
PRODUCTNAME = "rocm-smi/mi300x-showproductname-indented-blog.txt"
MEMINFO = "rocm-smi/mi300x-spx-rocm6.3.3-showmeminfo-vram.txt"
RSMI_JSON = "rocm-smi/rx7900xt-showproductname-showuse-showmeminfo-vram-json.txt"
AMD_VERSION = "amd-smi/amd-smi-version-rocm6.3.3.txt"
AMD_LIST = "amd-smi/mi210x2-list-duplicate-uuid-rocm6.3.3.txt"
AMD_STATIC_JSON = "amd-smi/mi300x-static-json-vram-jq.txt"
MI300X_VRAM_BYTES = 206141652992


def test_legacy_rocm57_concise_table(fixture_text):
    report = smi.parse_rocm_smi(fixture_text(LEGACY))
    assert report.tool == "rocm-smi" and report.error is None
    assert [g.index for g in report.gpus] == [0, 1, 2, 3]
    for gpu in report.gpus:
        assert gpu.partition is None and gpu.node is None and gpu.device_id is None
        assert (gpu.vram_used_percent, gpu.util_percent) == (0.0, 0.0)


def test_rocm60_layout_with_name_on_second_line(fixture_text):
    report = smi.parse_rocm_smi(fixture_text(MODEL_REVISION))
    assert [g.index for g in report.gpus] == list(range(8))
    for gpu in report.gpus:
        assert gpu.product_name == "AMD Instinct MI300X"
        assert gpu.device_id == "0x74a1"
        assert (gpu.memory_partition, gpu.partition, gpu.partition_id) == ("NPS1", "SPX", None)
    assert [g.vram_used_percent for g in report.gpus] == [0, 0, 0, 17, 0, 0, 0, 0]


def test_rocm62_layout_with_literal_ansi_escapes(fixture_text):
    text = fixture_text(ANSI_LITERAL)
    assert "^[3m" in text  # the caret form of ESC[3m, as pasted
    report = smi.parse_rocm_smi(text)
    assert [g.index for g in report.gpus] == list(range(8))
    assert [g.node for g in report.gpus] == list(range(2, 10))
    assert {(g.device_id, g.memory_partition, g.partition, g.partition_id) for g in report.gpus} == {
        ("0x74a1", "NPS1", "SPX", 0)}
    # Five GPUs already hold ~75% of their memory (the poster's hung job): a check can warn on this.
    assert [g.vram_used_percent for g in report.gpus] == [1, 75, 74, 74, 75, 1, 75, 74]
    assert all(g.product_name is None for g in report.gpus)


def test_qpx_partitions(fixture_text):
    report = smi.parse_rocm_smi(fixture_text(QPX))
    assert [(g.index, g.node, g.partition, g.memory_partition, g.partition_id) for g in report.gpus] == [
        (0, 2, "QPX", "NPS1", 0), (1, 3, "QPX", "NPS1", 1), (2, 4, "QPX", "NPS1", 2), (3, 5, "QPX", "NPS1", 3)]


def test_showproductname_indented(fixture_text):
    (gpu,) = smi.parse_rocm_smi_productname(fixture_text(PRODUCTNAME)).gpus
    assert gpu.index == 0
    assert gpu.product_name == "AMD Instinct MI300X OAM"
    assert gpu.gfx == "gfx942"
    assert gpu.device_id == "0x74a1"
    assert gpu.node == 2


def test_showmeminfo_vram(fixture_text):
    (gpu,) = smi.parse_rocm_smi_meminfo(fixture_text(MEMINFO)).gpus
    assert (gpu.index, gpu.vram_total_bytes, gpu.vram_used_bytes) == (0, MI300X_VRAM_BYTES, 297771008)


def test_rocm_smi_json(fixture_text):
    report = smi.parse_rocm_smi_json(fixture_text(RSMI_JSON))
    (gpu,) = report.gpus
    assert gpu.product_name == "Radeon RX 7900 XT"
    assert gpu.gfx == "gfx1100" and gpu.device_id == "0x744c" and gpu.node == 1
    assert (gpu.vram_total_bytes, gpu.vram_used_bytes) == (21458059264, 27856896)
    assert gpu.util_percent == 0.0
    # rocm-smi itself prints the JSON on one line; the poster pretty-printed it. Both parse the same.
    one_line = json.dumps(json.loads(fixture_text(RSMI_JSON)))
    assert smi.parse_rocm_smi_json(one_line) == report


def test_amd_smi_version(fixture_text):
    report = smi.parse_amd_smi_version(fixture_text(AMD_VERSION))
    assert report.tool == "amd-smi"
    assert report.tool_version == "24.7.1+8dc45db"
    assert report.rocm_version == "6.3.3"
    assert report.driver_version is None  # this amd-smi does not print "amdgpu version"
    assert report.gpus == []


def test_amd_smi_list_with_duplicate_uuids(fixture_text):
    report = smi.parse_amd_smi_list(fixture_text(AMD_LIST))
    assert [g.index for g in report.gpus] == [0, 1]
    assert [g.pci_bus for g in report.gpus] == ["0000:03:00.0", "0000:83:00.0"]
    assert [g.node for g in report.gpus] == [2, 3]
    assert [g.partition_id for g in report.gpus] == [0, 0]
    # Both report the same placeholder UUID (the bug in the issue): GPUs stay apart by index.
    assert {g.uuid for g in report.gpus} == {"00ff740f-0000-1000-8000-000000000000"}


def test_amd_smi_static_json_vram_matches_rocm_smi(fixture_text):
    (gpu,) = smi.parse_amd_smi_static_json(fixture_text(AMD_STATIC_JSON)).gpus
    # 196592 "MB" from amd-smi is MiB: the same bytes rocm-smi --showmeminfo reports for an MI300X.
    assert gpu.vram_total_bytes == 196592 * 1024**2 == MI300X_VRAM_BYTES
    assert gpu.index == 0 and gpu.product_name is None


def test_amd_smi_static_json_accepts_the_full_shapes(fixture_text):
    # The fixture is jq '.[0]["vram"]' of a list-shaped output; rebuild the list and the newer
    # {"gpu_data": [...]} wrapper around that same real object.
    vram = json.loads(fixture_text(AMD_STATIC_JSON))
    for shaped in ([{"gpu": 0, "vram": vram}], {"gpu_data": [{"gpu": 0, "vram": vram}]}, {"gpu": 0, "vram": vram}):
        (gpu,) = smi.parse_amd_smi_static_json(json.dumps(shaped)).gpus
        assert gpu.vram_total_bytes == MI300X_VRAM_BYTES


def test_merge_combines_per_index_and_first_report_wins(fixture_text):
    concise = smi.parse_rocm_smi(fixture_text(QPX))
    names = smi.parse_rocm_smi_productname(fixture_text(PRODUCTNAME))
    memory = smi.parse_rocm_smi_meminfo(fixture_text(MEMINFO))
    merged = smi.merge_smi(concise, names, memory)
    assert merged.tool == "rocm-smi"
    assert [g.index for g in merged.gpus] == [0, 1, 2, 3]
    first = merged.gpus[0]
    assert (first.partition, first.product_name, first.gfx, first.vram_total_bytes) == (
        "QPX", "AMD Instinct MI300X OAM", "gfx942", MI300X_VRAM_BYTES)
    assert merged.gpus[1].product_name is None and merged.gpus[1].partition == "QPX"
    # Same field known by two reports: the first one passed wins.
    # The 6.0-era concise table names GPU 0 "AMD Instinct MI300X", --showproductname "... MI300X OAM".
    table = smi.parse_rocm_smi(fixture_text(MODEL_REVISION))
    assert smi.merge_smi(table, names).gpus[0].product_name == "AMD Instinct MI300X"
    assert smi.merge_smi(names, table).gpus[0].product_name == "AMD Instinct MI300X OAM"
    amd = smi.parse_amd_smi_static_json(fixture_text(AMD_STATIC_JSON))
    assert smi.merge_smi(amd, memory).tool == "amd-smi+rocm-smi"
    assert smi.merge_smi(amd, memory).gpus[0].vram_total_bytes == MI300X_VRAM_BYTES
    both = smi.merge_smi(smi.parse_amd_smi_version(fixture_text(AMD_VERSION)), concise)
    assert both.tool == "amd-smi+rocm-smi" and both.rocm_version == "6.3.3" and len(both.gpus) == 4
    assert smi.merge_smi().gpus == [] and smi.merge_smi(None, concise).gpus == concise.gpus


PARSERS = [smi.parse_rocm_smi, smi.parse_rocm_smi_json, smi.parse_rocm_smi_productname, smi.parse_rocm_smi_meminfo,
           smi.parse_amd_smi_version, smi.parse_amd_smi_list, smi.parse_amd_smi_static_json]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("garbage", ["", None, b"\x00\x01\xff\xfe", "{not json", "[1, 2, {\"gpu\": \"x\"}]",
                                     '{"card0": "flat", "system": []}', "GPU: x\n  BDF", "0 0 0%"])
def test_garbage_gives_an_empty_report(parser, garbage):
    report = parser(garbage)
    assert report.tool in ("rocm-smi", "amd-smi")
    assert all(g.product_name is None and g.vram_total_bytes is None for g in report.gpus)


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
def test_random_cuts_of_every_smi_fixture_never_raise(fixture_text, parser):
    rng = random.Random(7)
    for name in (LEGACY, MODEL_REVISION, ANSI_LITERAL, QPX, PRODUCTNAME, MEMINFO, RSMI_JSON, AMD_VERSION,
                 AMD_LIST, AMD_STATIC_JSON):
        text = fixture_text(name)
        for _ in range(5):
            start = rng.randrange(len(text))
            parser(text[start : start + rng.randrange(1, len(text) + 1)])


def test_truncated_concise_table_keeps_complete_rows(fixture_text):
    text = fixture_text(ANSI_LITERAL)
    cut = text[: text.index("4       6     0x74a1")]
    report = smi.parse_rocm_smi(cut)
    assert [g.index for g in report.gpus] == [0, 1, 2, 3]
