"""nvidia-smi parsers on the verbatim outputs in tests/fixtures/public/nvidia-smi."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR

from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_table
from rocmcheck.units import MIB

TABLE = "nvidia-smi/h100-sxm-8gpu-driver565.57.01-default.txt"
CSV_NAME_DEVICE_ID = "nvidia-smi/h100-nvl-query-name-pci-device-id-csv-noheader.txt"
# What rocmcheck asks nvidia-smi for (rocmcheck/facts/collect.py NVIDIA_QUERY_FIELDS).
LEAD_FIELDS = ["index", "name", "memory.total", "memory.used", "driver_version", "compute_cap", "uuid"]
# benchmarks/capture_smi_outputs.py records a real output of that exact query as
# nvidia-smi/<gpu>-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt.
LEAD_QUERY_GLOB = "*-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt"


def test_default_table_h100x8(fixture_text):
    report = parse_nvidia_smi_table(fixture_text(TABLE))
    assert report.tool == "nvidia-smi" and report.error is None
    assert (report.tool_version, report.driver_version, report.cuda_version) == ("565.57.01", "565.57.01", "12.7")
    assert [g.index for g in report.gpus] == list(range(8))
    assert {g.product_name for g in report.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g.pci_bus for g in report.gpus] == [
        "00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
        "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
    assert {(g.vram_used_bytes, g.vram_total_bytes) for g in report.gpus} == {(1 * MIB, 81559 * MIB)}


def test_table_crlf_and_cut_before_processes(fixture_text):
    text = fixture_text(TABLE)
    assert parse_nvidia_smi_table(text.replace("\n", "\r\n")) == parse_nvidia_smi_table(text)
    head = parse_nvidia_smi_table(text[: text.index("|   3  NVIDIA")])
    assert [g.index for g in head.gpus] == [0, 1, 2] and head.cuda_version == "12.7"
    banner_only = parse_nvidia_smi_table(text.splitlines()[1])
    assert banner_only.driver_version == "565.57.01" and banner_only.gpus == []


def test_csv_noheader_name_and_device_id(fixture_text):
    # This fixture proves the CSV path (csv,noheader, ", " separators). No published output has the
    # exact LEAD_FIELDS shape; see test_csv_in_the_shape_rocmcheck_asks_for.
    report = parse_nvidia_smi_csv(fixture_text(CSV_NAME_DEVICE_ID), ["name", "pci.device_id"])
    (gpu,) = report.gpus
    assert (gpu.index, gpu.product_name, gpu.device_id) == (0, "NVIDIA H100 NVL", "0x232110DE")
    assert gpu.vram_total_bytes is None and report.driver_version is None


def test_csv_rows_of_another_query_are_not_misread(fixture_text):
    # Two columns where seven are expected: nothing is guessed.
    report = parse_nvidia_smi_csv(fixture_text(CSV_NAME_DEVICE_ID), LEAD_FIELDS)
    assert report.gpus == []


def _lead_query_fixtures() -> list[Path]:
    return sorted((FIXTURES_DIR / "nvidia-smi").glob(LEAD_QUERY_GLOB))


def test_csv_in_the_shape_rocmcheck_asks_for():
    found = _lead_query_fixtures()
    if not found:
        pytest.skip(f"no real output of the LEAD_FIELDS query yet (nvidia-smi/{LEAD_QUERY_GLOB}); "
                    "run benchmarks/capture_smi_outputs.py on an NVIDIA GPU to record one")
    text = found[0].read_bytes().decode("utf-8")
    report = parse_nvidia_smi_csv(text, LEAD_FIELDS)
    rows = [l for l in text.splitlines() if l.strip()]
    assert len(report.gpus) == len(rows) > 0
    for gpu, row in zip(report.gpus, rows):
        cells = [c.strip() for c in row.split(",")]
        assert gpu.index == int(cells[0]) and gpu.product_name == cells[1]
        assert gpu.vram_total_bytes == int(cells[2]) * MIB and gpu.vram_used_bytes == int(cells[3]) * MIB
        assert gpu.compute_cap == cells[5] and gpu.uuid == cells[6]
    assert report.driver_version == rows[0].split(",")[4].strip()


@pytest.mark.parametrize("garbage", ["", None, b"\xff\xfe\x00", "||||\n|  |", "a, b, c\n,,,,,,\n", "+---+\n| 0 |"])
def test_garbage_gives_an_empty_report(garbage):
    assert parse_nvidia_smi_table(garbage).gpus == []
    assert parse_nvidia_smi_csv(garbage, LEAD_FIELDS).gpus == []


def test_random_cuts_never_raise(fixture_text):
    rng = random.Random(3)
    for name in (TABLE, CSV_NAME_DEVICE_ID):
        text = fixture_text(name)
        for _ in range(20):
            start = rng.randrange(len(text))
            piece = text[start : start + rng.randrange(1, len(text) + 1)]
            parse_nvidia_smi_table(piece)
            parse_nvidia_smi_csv(piece, ["name", "pci.device_id"])
            parse_nvidia_smi_csv(piece, LEAD_FIELDS)
