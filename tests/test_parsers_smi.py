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


# ---- what people paste (tests/fixtures/pastes, each with its .source) ----------------------------------------------

def _blocks(relpath: str, kind: str) -> list:
    """The blocks of one tool in a real paste, as the paste splitter cuts them (commands and prompts removed)."""
    from conftest import project_fixture

    from rocmcheck.triage.readers.paste import split_paste

    return [b for b in split_paste(project_fixture(relpath)) if b.kind == kind]


AMD_PASTES = "pastes/amd_smi/"
ROCM_PASTES = "pastes/rocm_smi/"


def test_amd_smi_static_text_mi350x():
    # ROCm/rocm-systems#2987: `amd-smi static` text of an MI350X (gfx950), amdgpu-dkms 6.18.3.
    (block,) = _blocks(AMD_PASTES + "static_MI350X_driver-6.18.3_rocm-systems-pr2987_excerpt.txt", "amd_smi")
    report = smi.parse_amd_smi_static(block.text)
    (gpu,) = report.gpus
    assert (gpu.product_name, gpu.gfx, gpu.compute_units, gpu.pci_bus, gpu.device_id) == (
        "AMD Instinct MI350X", "gfx950", 128, "0000:05:00.0", "0x75a0")
    assert report.driver_version == "6.18.3" and report.driver_in_kernel is False
    # The same GPU without libdrm: the driver's name and version are N/A, so no driver version is known.
    (bare,) = _blocks(AMD_PASTES + "static_MI350X_no-libdrm_rocm-systems-pr2987_excerpt.txt", "amd_smi")
    report = smi.parse_amd_smi_static(bare.text)
    assert report.gpus[0].gfx == "gfx950" and report.driver_version is None and report.driver_in_kernel is None


def test_amd_smi_static_text_mi300a_skips_the_cpu_blocks():
    # amdsmi README: four CPU blocks, then four MI300A GPUs (no TARGET_GRAPHICS_VERSION), upstream kernel 6.9.0-rc5+.
    (block,) = _blocks(AMD_PASTES + "static_MI300A_x4_driver-6.9.0-rc5_amdsmi-readme.txt", "amd_smi")
    report = smi.parse_amd_smi_static(block.text)
    assert [g.index for g in report.gpus] == [0, 1, 2, 3]
    assert {(g.product_name, g.partition, g.memory_partition) for g in report.gpus} == {("MI300A", "SPX", "NPS1")}
    assert report.gpus[0].vram_total_bytes == 64289 * 1024 * 1024 and report.gpus[3].pci_bus == "0003:01:00.0"
    assert report.driver_version == "6.9.0-rc5+" and report.driver_in_kernel is True
    (partition,) = _blocks(AMD_PASTES + "static_partition_CPX_NPS4_amdsmi-changelog.txt", "amd_smi")
    gpu = smi.parse_amd_smi_static(partition.text).gpus[0]
    assert (gpu.partition, gpu.memory_partition, gpu.partition_id) == ("CPX", "NPS4", 0)


def test_amd_smi_list_with_an_ai_nic_keeps_gpu_0_its_own():
    # ROCm/rocm-systems#3654: `amd-smi list` prints an "AI_NIC: 0" block after GPU 0.
    listing = _blocks(AMD_PASTES + "list_with-AI_NIC-section_plus-static-MI210-start_prompted_rocm-systems-pr3654_"
                                   "excerpt.txt", "amd_smi")[0]
    (gpu,) = smi.parse_amd_smi_list(listing.text).gpus
    assert (gpu.pci_bus, gpu.uuid, gpu.node, gpu.product_name) == (
        "0000:23:00.0", "67ff740f-0000-1000-80e6-b5bb3c3ce0db", 2, None)


@pytest.mark.parametrize("name, release", [
    ("version_inkernel-amdgpu-Linuxversion6.8.0-79-generic_MI300X_rocm6.4.0_k8s-device-plugin-157_excerpt.txt",
     "6.8.0-79-generic"),
    ("version_inkernel-amdgpu-Linuxversion6.17.0-selfbuilt_RX9070XT_rocm7.0.2_ROCm-5536.txt", "6.17.0"),
    ("version_inkernel-amdgpu-Linuxversion6.19.8-fc43_StrixHalo_rocm7.2.0_ROCm-5444.txt", "6.19.8-200.fc43.x86_64"),
])
def test_amd_smi_version_with_the_in_kernel_driver_names_the_kernel(name, release):
    (block,) = _blocks(AMD_PASTES + name, "amd_smi")
    report = smi.parse_amd_smi_version(block.text)
    assert report.driver_version == release and report.driver_in_kernel is True
    assert report.tool_version[0].isdigit() and report.rocm_version[0].isdigit()


@pytest.mark.parametrize("name, product, total_mib, used_mib, rocm", [
    ("default-table_StrixHalo-8050S_inkernel-Linuxver_amdsmi-pr110_excerpt.txt", "Radeon 8050S Graphics", 8192, 3056,
     "6.4.1"),
    ("default-table_and_firmware_RX9070XT_rocm7.0.2_amdgpu-version-truncated-Linuxver_ROCm-5536.txt",
     "AMD Radeon RX 9070 XT", 16304, 538, "7.0.2"),
])
def test_amd_smi_box_table_gives_the_gpus(name, product, total_mib, used_mib, rocm):
    table = [b for b in _blocks(AMD_PASTES + name, "amd_smi") if "GPU-Name" in b.text][0]
    report = smi.parse_amd_smi_static(table.text)
    (gpu,) = report.gpus
    assert (gpu.index, gpu.product_name) == (0, product)
    assert (gpu.vram_total_bytes, gpu.vram_used_bytes) == (total_mib * 1024 * 1024, used_mib * 1024 * 1024)
    # "amdgpu version: Linuxver": the banner cut the kernel's build string: in-kernel, release not shown.
    assert report.rocm_version == rocm and report.driver_in_kernel is True and report.driver_version is None


def test_amd_smi_metric_and_firmware_text_name_the_gpu():
    (metric,) = _blocks(AMD_PASTES + "metric_text_unfenced_consumer-radeon_powerjoular-67_excerpt.txt", "amd_smi")
    assert [g.index for g in smi.parse_amd_smi_text(metric.text).gpus] == [0]
    firmware = _blocks(AMD_PASTES + "default-table_and_firmware_RX9070XT_rocm7.0.2_amdgpu-version-truncated-Linuxver_"
                                    "ROCm-5536.txt", "amd_smi")[0]
    assert "FW_LIST" in firmware.text and [g.index for g in smi.parse_amd_smi_text(firmware.text).gpus] == [0]


def test_no_gpu_texts_are_errors():
    # ROCm/ROCm#6176: /dev/kfd unusable; amd-smi and rocm-smi each say they see no GPU.
    paste = "pastes/rocminfo/kfd-open-failed_plus-amd-smi-no-gpu_plus-rocm-smi-no-gpu_MI50-eGPU_rocm6.2.4_ROCm-6176.txt"
    (amd,) = _blocks(paste, "amd_smi")
    (rocm,) = _blocks(paste, "rocm_smi")
    assert smi.parse_amd_smi_static(amd.text).error == ("ERROR: Unable to detect any GPU devices, check amdgpu version "
                                                         "and module status")
    report = smi.parse_rocm_smi(rocm.text)
    assert report.error == "WARNING: No AMD GPUs specified" and report.gpus == []


def test_rocm_smi_showallinfo_reads_the_partition_and_the_driver():
    # MI300X x4 (SR-IOV VM): rocm-smi -a, amdgpu-dkms 6.7.0, SPX / NPS1.
    (block,) = _blocks(ROCM_PASTES + "showallinfo-a_MI300X-x4_SRIOV-VM_driver-6.7.0_SPX_NPS1_thamada-gls.txt",
                       "rocm_smi")
    report = smi.parse_rocm_smi(block.text)
    assert report.driver_version == "6.7.0" and report.driver_in_kernel is False
    assert [(g.index, g.partition, g.memory_partition) for g in report.gpus] == [(i, "SPX", "NPS1") for i in range(4)]
    assert {g.product_name for g in report.gpus} == {"AMD Instinct MI300X OAM"} and report.gpus[0].device_id == "0x74a1"


def test_rocm_smi_a_of_2021_and_of_an_in_kernel_driver():
    # rocm_smi_lib#77 (2021 layout: "GPU ID"), amdgpu 5.6.19; ROCm/ROCm#2410: Debian's kernel 6.1.0-18-amd64 driver.
    (old,) = _blocks(ROCM_PASTES + "a_2021-style_RX5700XT-Navi10_driver-5.6.19_rocm_smi_lib-77_excerpt.txt", "rocm_smi")
    report = smi.parse_rocm_smi(old.text)
    assert report.driver_version == "5.6.19" and report.driver_in_kernel is False
    assert report.gpus[0].device_id == "0x731f"
    (debian,) = _blocks(ROCM_PASTES + "a_Raphael-iGPU_driver-version-is-kernel-6.1.0-18-amd64_ROCm-2410_excerpt.txt",
                        "rocm_smi")
    report = smi.parse_rocm_smi(debian.text)
    assert report.driver_version == "6.1.0-18-amd64" and report.driver_in_kernel is True


def test_rocm_smi_showdriverversion_with_the_in_kernel_driver():
    # ROCm/ROCm#5225: `rocm-smi --showdriverversion` prints the kernel's release (6.14.0-28-generic).
    blocks = _blocks(ROCM_PASTES + "concise_5.x-style_errors-interleaved_plus-showdriverversion-kernel-6.14.0-28-"
                                   "generic_Radeon680M_ROCm-5225.txt", "rocm_smi")
    (driver,) = [b for b in blocks if "Driver version" in b.text]
    report = smi.parse_rocm_smi(driver.text)
    assert report.driver_version == "6.14.0-28-generic" and report.driver_in_kernel is True


def test_rocm_smi_json_cut_short_still_gives_the_card():
    # systeminformation#960: `rocm-smi ... --json` of a Radeon 780M, the paste cut inside the object.
    (block,) = _blocks(ROCM_PASTES + "json_a_Radeon780M-Phoenix3_rocm-smi-lib-6.2.4_systeminformation-pr960_"
                                     "excerpt.txt", "rocm_smi")
    (gpu,) = smi.parse_rocm_smi_json(block.text).gpus
    assert (gpu.index, gpu.product_name, gpu.device_id, gpu.pci_bus, gpu.util_percent) == (
        0, "Phoenix3", "0x1900", "0000:C4:00.0", 19.0)


def test_the_new_readers_never_raise_on_noise_and_cuts():
    from conftest import project_fixture

    from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_q

    rng = random.Random(7)
    texts = [project_fixture(AMD_PASTES + "static_MI300A_x4_driver-6.9.0-rc5_amdsmi-readme.txt"),
             project_fixture(AMD_PASTES + "default-table_and_firmware_RX9070XT_rocm7.0.2_amdgpu-version-truncated-"
                                          "Linuxver_ROCm-5536.txt"),
             project_fixture(ROCM_PASTES + "showallinfo-a_MI300X-x4_SRIOV-VM_driver-6.7.0_SPX_NPS1_thamada-gls.txt"),
             project_fixture("pastes/nvidia_smi/q_H200_550.90.12_thamada-gls.txt")]
    readers = (smi.parse_amd_smi_static, smi.parse_amd_smi_text, smi.parse_amd_smi_table, smi.parse_rocm_smi,
               smi.parse_rocm_smi_json, smi.parse_amd_smi_version, parse_nvidia_smi_q, smi.amdgpu_driver_version)
    noise = "".join(chr(rng.randrange(0, 0x3000)) for _ in range(5000))
    for text in texts:
        for _ in range(15):
            start = rng.randrange(len(text))
            cut = text[start:start + rng.randrange(1, 3000)]
            for read in readers:
                read(cut)
    for read in readers:
        read(noise)
        read(None)
        read(b"\xff\xfe GPU: 0\n    ASIC:\n")
        read("| " + "0000:c2:00.0 " * 5000 + "|")  # a long row that is not one: bounded, never stuck


def _read(relpath: str, kind: str) -> list:
    """What the paste reader makes of each block of one tool in a real paste."""
    from rocmcheck.triage.readers.paste_read import read_block

    return [read_block(b) for b in _blocks(relpath, kind)]


def test_amd_smi_partition_tables_read_only_what_they_show():
    # CURRENT_PARTITION with ACCELERATOR_TYPE N/A, then "GPU: N / MEMORY_PARTITION: / CURRENT: NPS1" blocks: the memory
    # partition of each GPU, and no compute partition (N/A is not known, and not SPX).
    [report] = _read("pastes/amd_smi/partition_current-table_NA-accelerator_plus-memory-blocks_4x-NPS1_ROCm-4477_"
                       "excerpt.txt", "amd_smi")
    assert [(g.index, g.memory_partition, g.partition, g.partition_id) for g in report.gpus] == \
        [(i, "NPS1", None, None) for i in range(4)]
    # The --accelerator profile table: the profile marked "*" is the current one (DPX), not the first row's SPX.
    [report] = _read("pastes/amd_smi/partition_accelerator-profiles_DPX-current-star_MI300-class_amdsmi-132_"
                       "excerpt.txt", "amd_smi")
    assert [(g.index, g.partition, g.memory_partition) for g in report.gpus] == [(0, "DPX", None)]


def test_amd_smi_gpu_index_is_the_one_printed():
    # The last block of a real `amd-smi static` alone: one GPU, numbered 3 as amd-smi printed it.
    from conftest import project_fixture

    text = project_fixture("pastes/amd_smi/static_MI300A_x4_driver-6.9.0-rc5_amdsmi-readme.txt")
    fragment = text[text.index("GPU: 3"):]
    assert [(g.index, g.product_name) for g in smi.parse_amd_smi_static_text(fragment).gpus] == [(3, "MI300A")]


def test_rocm_smi_showbus_gives_each_gpus_pci_bus():
    [report] = _read("pastes/rocm_smi/showbus_8xMI60_PCI-Bus-ID-section_nccl-rccl-parser-deviceIdMapping.txt",
                       "rocm_smi")
    assert [g.index for g in report.gpus] == list(range(8))
    assert (report.gpus[0].pci_bus, report.gpus[7].pci_bus) == ("0000:43:00.0", "0000:83:00.0")
    assert all(g.product_name is None and g.partition is None for g in report.gpus)


def test_rocm_smi_concise_real_na_vram_is_not_known_and_the_printed_index_kept():
    # ROCm/ROC-smi#90: rocm-smi 3.3 printed VRAM% as N/A on a Vega 10 (its mem_busy_percent was not in sysfs); the one
    # GPU is numbered 1. N/A is not 0%, the GPU% cell beside it is still read, and the index is the one printed.
    from conftest import project_fixture

    text = project_fixture("pastes/rocm_smi/concise_2020-style_rocm3.3_VRAM-NA_Vega10_ROC-smi-90.txt")
    [gpu] = smi.parse_rocm_smi(text).gpus
    assert (gpu.index, gpu.vram_used_percent, gpu.util_percent) == (1, None, 0.0)


def test_rocm_smi_concise_na_cell_is_not_known(fixture_text):
    # The real Radeon 680M row reads VRAM% 83, GPU% 0; the same row with its GPU% cell printed as N/A (as rocm-smi does
    # for a value it cannot read) must not take the Fan column's "0%" or any other number in its place.
    from conftest import project_fixture

    text = project_fixture("pastes/rocm_smi/concise_5.x-style_errors-interleaved_plus-showdriverversion-kernel-6.14.0-"
                           "28-generic_Radeon680M_ROCm-5225.txt")
    [gpu] = smi.parse_rocm_smi(text).gpus
    assert (gpu.vram_used_percent, gpu.util_percent) == (83.0, 0.0)
    row = next(line for line in text.splitlines() if line.startswith("0    45.0c"))
    cells = row.rstrip().rsplit(None, 2)
    [gpu] = smi.parse_rocm_smi(text.replace(row, f"{cells[0]}  N/A   N/A")).gpus
    assert (gpu.vram_used_percent, gpu.util_percent) == (None, None)
