"""hipconfig and version-string parsers on recorded outputs in tests/fixtures/public."""

from __future__ import annotations

import random
import re

import pytest

from rocmcheck.facts.parsers.hipconfig import hip_version_short, parse_hipconfig
from rocmcheck.facts.parsers.versions import parse_rocm_version_file, parse_torch_rocm_suffix
from rocmcheck.versions import series

HIPCONFIG = "hipconfig/hipconfig-full-rocm6.3.2-linuxmint-gfx90c.txt"
COLLECT_MI300X = "collect_env/mi300x-8gpu-vllm-collect-env-rocm6.1-torch2.4.1.txt"
COLLECT_WSL = "collect_env/wsl2-rx7900xtx-gfx1100-rocm6.3.4-torch2.4.0.txt"


# ---- hipconfig -----------------------------------------------------------------------------------

def test_hipconfig_full(fixture_text):
    config = parse_hipconfig(fixture_text(HIPCONFIG))
    assert config.hip_version == "6.3.42134-a9a80e791"
    assert config.hip_version_short == "6.3"
    assert (config.platform, config.runtime, config.compiler) == ("amd", "rocclr", "clang")
    assert config.rocm_path == config.hip_path == "/opt/rocm-6.3.2"
    assert config.clang_version.startswith("AMD clang version 18.0.0git") and "roc-6.3.2" in config.clang_version


def test_hipconfig_version_alone(fixture_text):
    # `hipconfig --version` prints only the string that --full shows after "HIP version:", with no
    # newline (HIP's hipconfig.pl: `if ($p_version) { print $HIP_VERSION; }`); take that real string
    # from the fixture.
    version = parse_hipconfig(fixture_text(HIPCONFIG)).hip_version
    for text in (version, version + "\n", version + "\r\n"):
        config = parse_hipconfig(text)
        assert (config.hip_version, config.hip_version_short) == ("6.3.42134-a9a80e791", "6.3")
        assert config.platform is None and config.rocm_path is None


@pytest.mark.parametrize("garbage", ["", None, b"\x00\xff", "hipconfig: command not found", "==hipconfig\n:\n::"])
def test_hipconfig_garbage(garbage):
    config = parse_hipconfig(garbage)
    assert config.hip_version is None and config.hip_version_short is None and config.platform is None


def test_hip_version_short():
    assert hip_version_short("6.3.42134-a9a80e791") == "6.3"
    assert hip_version_short("7.1") == "7.1"
    assert hip_version_short("garbage") is None and hip_version_short(None) is None


# ---- version strings -----------------------------------------------------------------------------

def test_rocm_version_file():
    assert parse_rocm_version_file("6.2.3-119\n") == "6.2.3"
    assert parse_rocm_version_file("7.14.0") == "7.14.0"
    assert parse_rocm_version_file("\r\n6.1.2-98\r\n") == "6.1.2"
    for garbage in ("", None, "abc", "6", b"\xff\xfe"):
        assert parse_rocm_version_file(garbage) is None


def test_torch_rocm_suffix(fixture_text):
    assert parse_torch_rocm_suffix("2.4.1+rocm6.1") == "6.1"
    assert parse_torch_rocm_suffix("2.10.0+rocm7.13.0a20260416") == "7.13.0"
    # Real torch versions read out of the collect_env fixtures.
    wsl = re.search(r"^PyTorch version: (\S+)", fixture_text(COLLECT_WSL), re.MULTILINE).group(1)
    assert wsl == "2.4.0+rocm6.3.4.git7cecbf6d" and parse_torch_rocm_suffix(wsl) == "6.3.4"
    mi300x = re.search(r"^\[pip3\] torch==(\S+)", fixture_text(COLLECT_MI300X), re.MULTILINE).group(1)
    assert mi300x == "2.4.1+rocm6.1" and parse_torch_rocm_suffix(mi300x) == "6.1"
    for other in ("2.5.1+cu124", "2.13.0+cpu", "2.4.1", "", None, "not a version+rocm"):
        assert parse_torch_rocm_suffix(other) is None




def test_random_cuts_never_raise(fixture_text):
    rng = random.Random(11)
    for name in (HIPCONFIG, COLLECT_MI300X, COLLECT_WSL):
        text = fixture_text(name)
        for _ in range(15):
            start = rng.randrange(len(text))
            piece = text[start : start + rng.randrange(1, len(text) + 1)]
            parse_hipconfig(piece)
            parse_rocm_version_file(piece)


# ---- every parser is total: hostile numbers in real outputs ----------------------------------------
# A tool (or a file in a bundle) can print a number no real one has: thousands of digits (int() refuses more than
# 4300), 1e999 (infinity once parsed), NaN, or digits of another script. Each real fixture below is fed to its
# parser with every number replaced by one of those: the parser must give a value (a field it cannot read stays
# unknown), never raise.

HOSTILE_NUMBERS = ("9" * 5000, "9" * 400, "1e999", "-1e999", "NaN", "inf", "٣٣", "1.2.3.4", "-0", "0x" + "f" * 80)


def _real_outputs(fixture_text) -> list[tuple[str, object]]:
    """(a real output, the parser that reads it) for every parser of tool or file text."""
    from pathlib import Path

    from rocmcheck.facts.collect import NVIDIA_QUERY_FIELDS
    from rocmcheck.facts.parsers import gpu_health, kernel_log, nvidia_smi, rocminfo, smi

    fixtures = {
        "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt": rocminfo.parse_rocminfo,
        "rocm-smi/mi300x-8gpu-rocm6.2.3-concise-ansi-literal.txt": smi.parse_rocm_smi,
        "amd-smi/amd-smi-version-rocm6.3.3.txt": smi.parse_amd_smi_version,
        "amd-smi/mi210x2-list-duplicate-uuid-rocm6.3.3.txt": smi.parse_amd_smi_list,
        "amd-smi/mi300x-static-json-vram-jq.txt": smi.parse_amd_smi_static_json,
        "amd-smi/mi300x-static-truncated.txt": smi.parse_amd_smi_static_json,
        "nvidia-smi/h200x2-driver580.159.04-default.txt": nvidia_smi.parse_nvidia_smi_table,
        "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt":
            lambda text: nvidia_smi.parse_nvidia_smi_csv(text, NVIDIA_QUERY_FIELDS),
        "nvidia-smi/h200x2-q-ecc-performance-clock.txt": gpu_health.parse_nvidia_smi_q,
        HIPCONFIG: parse_hipconfig,
    }
    cases = [(fixture_text(name), parse) for name, parse in fixtures.items()]
    cases += [(path.read_text(encoding="utf-8"), kernel_log.parse_kernel_log)
              for path in sorted((Path(__file__).parent / "fixtures" / "kernel-log").glob("*.txt"))]
    cases += [('{"card0": {"Card Series": "AMD Instinct MI300X", "VRAM Total Memory (B)": "206141652992"}}',
               smi.parse_rocm_smi_json),
              ("GPU[0]\t\t: VRAM Total Memory (B): 206141652992\n", smi.parse_rocm_smi_meminfo),
              ("32.0 GT/s PCIe", gpu_health.pcie_gen), ("ue: 0\nce: 3\n", gpu_health.parse_ras_count),
              ("0x00000001 : 0x00001000 : R\n", gpu_health.count_bad_pages), ("6.2.3-119\n", parse_rocm_version_file),
              ("2.5.1+rocm6.2.3", parse_torch_rocm_suffix), ("6.2.41133-dd7f95766", series),
              ("6.3.42134-a9a80e791", hip_version_short)]
    return cases


@pytest.mark.parametrize("number", HOSTILE_NUMBERS)
def test_every_parser_survives_hostile_numbers_in_real_outputs(number, fixture_text):
    cases = _real_outputs(fixture_text)
    assert len(cases) > 25
    for text, parse in cases:
        parse(re.sub(r"[0-9]+(?:\.[0-9]+)?", lambda m: number, text))  # a value, never an exception


def test_hostile_sizes_in_amd_smi_json_are_not_known():
    from rocmcheck.facts.parsers.smi import parse_amd_smi_static_json, size_bytes

    for value in ("1e999", "-1e999", "NaN", "9" * 400, "-5", "true", '"9999999999999999999999999 GB"', "[1]", "{}"):
        report = parse_amd_smi_static_json('[{"gpu": 0, "vram": {"size": {"value": %s, "unit": "MB"}}}]' % value)
        assert report.gpus[0].vram_total_bytes is None, value
    assert parse_amd_smi_static_json('[{"gpu": 0, "vram": {"size": {"value": 196592, "unit": "MB"}}}]') \
        .gpus[0].vram_total_bytes == 196592 * 2**20
    assert size_bytes(float("inf")) is None and size_bytes(float("nan")) is None and size_bytes(10**400) is None
    assert size_bytes("192 GB") == 192 * 2**30
