"""parse_rocminfo on the verbatim rocminfo outputs in tests/fixtures/public/rocminfo."""

from __future__ import annotations

import random
import re

import pytest
from conftest import FIXTURES_DIR

from rocmcheck.facts.parsers.rocminfo import ERROR_KINDS, parse_rocminfo

MI300X = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"
RX7900XTX = "rocminfo/rx7900xtx-gfx1100-rocm6.2.2-ubuntu24.04.txt"
MI250X = "rocminfo/mi250x-1gcd-cray-slurm-rocm5.7-container.txt"
STRIX_HALO = "rocminfo/strix-halo-gfx1151-apu-rocm7.11-nightly.txt"
HSA_OVERRIDE = "rocminfo/hsa-override-12.0.1-r9700-plus-strix-halo-npu-fedora-rocm7.1.0.txt"
KFD_INVALID = "rocminfo/error-kfd-invalid-argument-mi300x-docker-rocm6.2.1.txt"
KFD_PERMISSION = "rocminfo/error-kfd-permission-denied-rocm-terminal-container.txt"
KIB = 1024


def test_mi300x_eight_gpus_unpadded(fixture_text):
    report = parse_rocminfo(fixture_text(MI300X))
    assert report.error is None and report.error_kind is None
    assert report.kfd_module_loaded is True and report.kfd_module_version == "6.8.5"
    assert (report.runtime_version, report.runtime_ext_version) == ("1.14", "1.6")
    assert report.system_attributes["Machine Model"] == "LARGE"
    assert report.complete is True
    assert [a.index for a in report.agents] == list(range(1, 11))
    assert [a.device_type for a in report.agents[:2]] == ["CPU", "CPU"]
    assert report.agents[0].name == "Intel(R) Xeon(R) Platinum 8470"
    gpus = report.gpus
    assert len(gpus) == 8
    for gpu in gpus:
        assert gpu.name == "gfx942"
        assert gpu.marketing_name == "AMD Instinct MI300X"
        assert gpu.vendor == "AMD"
        assert gpu.chip_id == 0x74A1 == 29857
        assert gpu.compute_units == 304
        assert gpu.wavefront_size == 64
        assert gpu.memory_bytes == 201310208 * KIB  # the COARSE GRAINED pool: 192 GiB minus a carve-out
        assert gpu.is_apu is False
        assert gpu.isas == ["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"]
    assert [g.node for g in gpus] == list(range(2, 10))
    assert gpus[0].uuid == "GPU-07386a321fa45d1e" and gpus[0].bdfid == 6912
    assert len({g.uuid for g in gpus}) == 8


def test_crlf_and_trailing_spaces_parse_the_same(fixture_text):
    text = fixture_text(MI300X)
    plain = parse_rocminfo(text)
    assert parse_rocminfo(text.replace("\n", "\r\n")) == plain
    # The padded layout is the unpadded one with spaces to fixed columns; both must read the same.
    padded = parse_rocminfo(fixture_text(RX7900XTX))
    assert parse_rocminfo("\n".join(l.rstrip() for l in fixture_text(RX7900XTX).splitlines())) == padded


def test_rx7900xtx_padded_wave32(fixture_text):
    report = parse_rocminfo(fixture_text(RX7900XTX))
    assert [a.device_type for a in report.agents] == ["CPU", "GPU"]
    (gpu,) = report.gpus
    assert (gpu.name, gpu.marketing_name) == ("gfx1100", "Radeon RX 7900 XTX")
    assert gpu.chip_id == 0x744C
    assert gpu.wavefront_size == 32
    assert gpu.compute_units == 96
    assert gpu.memory_bytes == 25149440 * KIB
    assert gpu.isas == ["amdgcn-amd-amdhsa--gfx1100"]
    assert report.agents[0].name == "AMD Ryzen 7 7800X3D 8-Core Processor"
    assert report.kfd_module_version == "6.8.5" and report.complete


def test_mi250x_one_gcd_in_container(fixture_text):
    report = parse_rocminfo(fixture_text(MI250X))
    assert len(report.agents) == 5
    assert [a.device_type for a in report.agents] == ["CPU"] * 4 + ["GPU"]
    (gpu,) = report.gpus
    assert (gpu.name, gpu.marketing_name, gpu.index) == ("gfx90a", "AMD Instinct MI250X", 5)
    assert gpu.chip_id == 0x7408 and gpu.compute_units == 110 and gpu.node == 4
    # Pool 2 is "GLOBAL; FLAGS:" with no flag at all; the COARSE GRAINED pool is pool 1.
    assert gpu.memory_bytes == 67092480 * KIB
    assert report.runtime_version == "1.1" and report.runtime_ext_version is None
    assert report.kfd_module_loaded is True and report.kfd_module_version is None
    assert report.system_attributes["DMAbuf Support"] == "NO"


def test_strix_halo_apu(fixture_text):
    report = parse_rocminfo(fixture_text(STRIX_HALO))
    (gpu,) = report.gpus
    assert (gpu.name, gpu.marketing_name) == ("gfx1151", "Radeon 8060S Graphics")
    assert gpu.is_apu is True
    assert gpu.uuid == "GPU-XX"  # APUs have no unique id
    assert gpu.memory_bytes == 65507932 * KIB
    assert gpu.isas == ["amdgcn-amd-amdhsa--gfx1151", "amdgcn-amd-amdhsa--gfx11-generic"]
    assert report.agents[0].is_apu is False
    assert report.runtime_version == "1.18" and report.kfd_module_version == "6.16.6"


def test_hsa_override_npu_is_not_a_gpu(fixture_text):
    report = parse_rocminfo(fixture_text(HSA_OVERRIDE))
    assert [a.device_type for a in report.agents] == ["CPU", "GPU", "GPU", "DSP"]
    npu = report.agents[3]
    assert (npu.name, npu.marketing_name, npu.is_gpu) == ("aie2", "AIE-ML", False)
    gpus = report.gpus
    assert len(gpus) == 2
    assert [g.marketing_name for g in gpus] == ["AMD Radeon AI PRO R9700", "Radeon 8060S Graphics"]
    # HSA_OVERRIDE_GFX_VERSION=12.0.1 renames the iGPU to gfx1201; its chip id still says what it is.
    assert [g.name for g in gpus] == ["gfx1201", "gfx1201"]
    assert [g.chip_id for g in gpus] == [0x7551, 0x1586]
    assert [g.is_apu for g in gpus] == [False, True]
    assert gpus[0].memory_bytes == 33406976 * KIB
    assert report.complete is True  # "*** Done *** " with a trailing space


def test_kfd_invalid_argument(fixture_text):
    text = fixture_text(KFD_INVALID)
    report = parse_rocminfo(text)
    assert report.agents == [] and report.gpus == []
    assert report.error_kind == "kfd_invalid_argument"
    assert report.error == "Unable to open /dev/kfd read-write: Invalid argument"
    assert report.error in text
    assert report.group_note == "root is member of nogroup group"
    assert report.kfd_module_loaded is True and report.kfd_module_version == "6.7.0"
    assert report.complete is False


def test_kfd_permission_denied(fixture_text):
    report = parse_rocminfo(fixture_text(KFD_PERMISSION))
    assert report.error_kind == "kfd_permission"
    assert report.error == "Unable to open /dev/kfd read-write: Permission denied"
    assert report.error_lines == [report.error]
    assert report.group_note == "Failed to get user name to check for video group membership"
    assert report.kfd_module_loaded is True
    assert report.agents == []


def test_red_ansi_colour_on_error_lines_is_ignored(fixture_text):
    # rocminfo writes its failure lines between "\33[31m" and "\33[0m" (strace in
    # https://github.com/ROCm/legacy-rocm-build/issues/1088); a terminal capture keeps them.
    text = fixture_text(KFD_PERMISSION)
    coloured = "\n".join(f"\x1b[31m{line}\x1b[0m" for line in text.splitlines())
    assert parse_rocminfo(coloured) == parse_rocminfo(text)


def test_not_loaded_line_with_agents_after_it_is_no_error(fixture_text):
    # In containers without kmod rocminfo prints "ROCk module is NOT loaded, possibly no GPU devices"
    # (https://github.com/ROCm/tensorflow-upstream/pull/1364) and may still list the GPUs
    # (https://github.com/ROCm/ROCT-Thunk-Interface/issues/44). Splice that published line onto a real
    # output in place of its "ROCk module ... is loaded" line.
    text = fixture_text(RX7900XTX)
    report = parse_rocminfo("ROCk module is NOT loaded, possibly no GPU devices\n" + text.split("\n", 1)[1])
    assert report.kfd_module_loaded is False
    assert report.error is None and report.error_kind is None
    assert report.error_lines == ["ROCk module is NOT loaded, possibly no GPU devices"]
    assert [g.name for g in report.gpus] == ["gfx1100"]


# Fixtures named rocminfo/error-<what>-*.txt; the lead may add more (kfd missing, hsa failure, ...).
_KIND_BY_NAME = {
    "permission-denied": "kfd_permission",
    "invalid-argument": "kfd_invalid_argument",
    "no-such-file": "kfd_missing",
    "kfd-missing": "kfd_missing",
    "cannot-allocate": "kfd_no_memory",
    "hsa": "hsa_error",
    "not-loaded": "driver_not_loaded",
}


def _error_fixtures() -> list[str]:
    return sorted(p.name for p in (FIXTURES_DIR / "rocminfo").glob("error-*.txt"))


@pytest.mark.parametrize("name", _error_fixtures())
def test_every_error_fixture_gets_its_kind(fixture_text, name):
    text = fixture_text(f"rocminfo/{name}")
    report = parse_rocminfo(text)
    assert report.gpus == []
    assert report.error_kind in ERROR_KINDS and report.error_kind != "other"
    assert report.error in text  # verbatim
    expected = [kind for key, kind in _KIND_BY_NAME.items() if key in name]
    assert expected, f"add the kind of {name} to _KIND_BY_NAME"
    assert report.error_kind == expected[0]


def test_truncated_output_keeps_what_was_read(fixture_text):
    text = fixture_text(MI300X)
    cut = text[: text.index("Agent 6")]
    report = parse_rocminfo(cut)
    assert report.complete is False
    assert [a.index for a in report.agents] == [1, 2, 3, 4, 5]
    assert len(report.gpus) == 3 and all(g.name == "gfx942" for g in report.gpus)
    assert report.error is None
    # Cut inside an agent: the partial agent is still returned, with what it had.
    mid = text[: text.index("Compute Unit:            304")]
    assert parse_rocminfo(mid).agents[-1].chip_id == 0x74A1


@pytest.mark.parametrize("garbage", ["", "   \n\n", None, b"\x00\xff\xfe binary \x1b[31m",
                                     "rocminfo: command not found"])
def test_garbage_gives_an_empty_report(garbage):
    report = parse_rocminfo(garbage)
    assert report.agents == [] and report.gpus == []
    assert report.runtime_version is None and report.complete is False
    if garbage and str(garbage).strip() and not isinstance(garbage, bytes):
        assert report.error_kind == "other" and report.error == garbage.strip()


def test_random_noise_and_random_cuts_never_raise(fixture_text):
    rng = random.Random(1234)
    text = fixture_text(HSA_OVERRIDE)
    for _ in range(30):
        start = rng.randrange(len(text))
        parse_rocminfo(text[start : start + rng.randrange(1, 4000)])
    noise = "".join(chr(rng.randrange(0, 0x3000)) for _ in range(20000))
    assert parse_rocminfo(noise).gpus == []
    shuffled = text.splitlines()
    rng.shuffle(shuffled)
    parse_rocminfo("\n".join(shuffled))


def test_error_kinds_name_a_real_source():
    for kind, where in ERROR_KINDS.items():
        if kind != "other":
            assert re.search(r"https://github\.com/\S+/issues/\d+", where), kind


# ---- what people paste (tests/fixtures/pastes, each with its .source) ----------------------------------------------

def _pasted_rocminfo(relpath: str) -> list:
    """The rocminfo blocks of a real paste, as the paste splitter cuts them, each parsed."""
    from conftest import project_fixture

    from rocmcheck.triage.readers.paste import split_paste

    return [parse_rocminfo(b.text) for b in split_paste(project_fixture(relpath)) if b.kind == "rocminfo"]


def test_incompatible_kernel_and_userspace_is_its_own_error():
    # ROCm/ROCm#1583: eight "HSA Error:  Incompatible kernel and userspace, ... disabled. Upgrade amdgpu." lines, then
    # an agent list abridged by its author.
    (report,) = _pasted_rocminfo("pastes/rocminfo/hsa-error-incompatible-kernel-userspace_RadeonProVII_centos8_"
                                 "rocm4.3_ROCm-1583.txt")
    assert report.error_kind == "incompatible_kernel_userspace"
    assert report.error == ("HSA Error: Incompatible kernel and userspace, Vega 20 WKS GL-XE [Radeon Pro VII] "
                            "disabled. Upgrade amdgpu.")
    assert report.kfd_module_loaded is True and report.gpus == []
    assert "HSA Error" not in report.system_attributes and report.runtime_version == "1.1"


def test_incompatible_kernel_and_userspace_wrapped_over_two_lines():
    # ROCm/ROCm#1536: the same text pasted indented, "Upgrade amdgpu." on a line of its own.
    from conftest import project_fixture

    text = project_fixture("pastes/kernel_log/oops-null-deref-kfd_iommu_unbind_init_user_pages_MI50_el8_ROCm-1536.txt")
    block = text[text.index("```\n") + 4:text.index("```", text.index("```\n") + 4)]
    report = parse_rocminfo(block)
    assert report.error_kind == "incompatible_kernel_userspace"
    assert report.error == "HSA Error: Incompatible kernel and userspace, Vega 20 disabled. Upgrade amdgpu."


def test_a_fragment_of_an_agent_is_a_fragment_not_an_error():
    # corpus 08 (ROCm/ROCm#5238): the middle of a GPU agent, "Wavefront Size: 32" and its first pool.
    (report,) = _pasted_rocminfo("pastes/corpus/08-ROCm-legacy-rocm-build-5238.paste.txt")
    assert report.error is None and report.fragment is True and report.complete is False
    (agent,) = report.agents
    assert agent.device_type == "GPU" and agent.wavefront_size == 32 and agent.memory_bytes == 8372224 * KIB
    # corpus 32: `rocminfo | grep Name`: an agent's name and its ISA's.
    (grep,) = _pasted_rocminfo("pastes/corpus/32-srinivamd-rocminstaller-6.paste.txt")
    assert grep.error is None and grep.fragment is True
    assert [(a.name, a.device_type, a.isas) for a in grep.agents] == [("gfx1030", "GPU",
                                                                       ["amdgcn-amd-amdhsa--gfx1030"])]
    # ROCm/ROCm#5444: `rocminfo | grep -A3 Pool | grep Size`: sizes only, nothing to name an agent by.
    for sizes in _pasted_rocminfo("pastes/rocminfo/fragment_rocminfo-grep-Pool-Size_StrixHalo_Debian13_two-kernels_"
                                  "ROCm-5444.txt"):
        assert sizes.error is None and sizes.fragment is True and sizes.gpus == []


def test_rocminfo_cut_after_its_system_attributes_and_the_old_numeric_status():
    # corpus 41 (ROCm/ROCm-docker#36): "Call returned 4104" without sudo; with sudo, the output cut by its author.
    failed, cut = _pasted_rocminfo("pastes/corpus/41-ROCm-ROCm-docker-36.paste.txt")
    assert failed.error_kind == "hsa_error" and failed.hsa_status == "HSA_STATUS_ERROR_OUT_OF_RESOURCES"
    assert cut.error is None and cut.runtime_version == "1.1" and cut.agents == [] and cut.complete is False
