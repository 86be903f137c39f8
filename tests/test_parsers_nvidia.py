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


# ---- what people paste (tests/fixtures/pastes/nvidia_smi, each with its .source) -------------------------------------

NV_PASTES = "pastes/nvidia_smi/"


def test_nvidia_smi_q_gives_the_gpus_driver_and_cuda():
    from conftest import project_fixture

    from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_q

    report = parse_nvidia_smi_q(project_fixture(NV_PASTES + "q_H200_550.90.12_thamada-gls.txt"))
    (gpu,) = report.gpus
    assert (report.driver_version, report.cuda_version) == ("550.90.12", "12.4")
    assert (gpu.index, gpu.product_name, gpu.pci_bus) == (0, "NVIDIA H200", "00000000:03:00.0")
    assert gpu.uuid == "GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732" and gpu.vram_total_bytes == 143771 * 1024 * 1024
    old = parse_nvidia_smi_q(project_fixture(NV_PASTES + "q_GTX680_470.256.02_thamada-gls.txt"))
    assert old.gpus[0].product_name == "NVIDIA GeForce GTX 680" and old.cuda_version == "11.4"


@pytest.mark.parametrize("name, count, product, total_mib, driver, cuda", [
    ("default_2014-style_driver-331.62_no-CUDA-field_timestamp-line_GTX680x4_cBio-cluster-38_excerpt.txt", None,
     "GeForce GTX 680", 4095, "331.62", None),
    ("default_GTX680_470.256.02_cuda11.4_oldstyle_thamada-gls.txt", 1, "NVIDIA GeForce ...", 2000, "470.256.02",
     "11.4"),
    ("default_H100-SXM-x8_565.57.01_cuda12.7_thamada-gls.txt", 8, "NVIDIA H100 80GB HBM3", 81559, "565.57.01", "12.7"),
    ("default_H200_550.90.12_cuda12.4_thamada-gls.txt", 1, "NVIDIA H200", 143771, "550.90.12", "12.4"),
])
def test_the_plain_table_gives_the_gpus(name, count, product, total_mib, driver, cuda):
    from conftest import project_fixture

    report = parse_nvidia_smi_table(project_fixture(NV_PASTES + name))
    assert report.gpus and report.gpus[0].product_name == product
    assert report.gpus[0].vram_total_bytes == total_mib * 1024 * 1024
    assert (report.driver_version, report.cuda_version) == (driver, cuda)
    if count is not None:
        assert len(report.gpus) == count


def test_nvidia_smi_q_alone_gives_the_doctor_its_gpus():
    # A partial source that holds only `nvidia-smi -q` (the NVML binding and the other outputs not known).
    from conftest import project_fixture
    from machines import ran, verdicts
    from test_checks_nvidia import nvidia_machine

    from rocmcheck.result import Status

    facts = nvidia_machine()
    facts.commands = {"nvidia-smi-health": ran("nvidia-smi-health", stdout=project_fixture(
        NV_PASTES + "q_H200_550.90.12_thamada-gls.txt"))}
    facts.known["commands"] = ["nvidia-smi-health"]
    facts.known["probes"] = ["torch"]
    v = verdicts(facts, "gpu.present", "gpu.arch", "nvidia.driver_cuda")
    assert v["gpu.present"].status == Status.PASS and "1 NVIDIA GPU" in v["gpu.present"].summary
    assert v["gpu.arch"].data["archs"] == ["sm_90"]  # from the product name: -q names no compute capability
    assert v["nvidia.driver_cuda"].status == Status.PASS and "12.4" in v["nvidia.driver_cuda"].summary
