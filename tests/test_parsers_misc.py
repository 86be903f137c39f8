"""hipconfig and version-string parsers on recorded outputs in tests/fixtures/public."""

from __future__ import annotations

import random
import re

import pytest

from rocmcheck.facts.parsers.hipconfig import hip_version_short, parse_hipconfig
from rocmcheck.facts.parsers.versions import major_minor, parse_rocm_version_file, parse_torch_rocm_suffix

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


def test_major_minor():
    assert major_minor("6.2.41133-dd7f95766") == "6.2"
    assert major_minor("6.2") == "6.2"
    assert major_minor("") is None and major_minor(None) is None


def test_random_cuts_never_raise(fixture_text):
    rng = random.Random(11)
    for name in (HIPCONFIG, COLLECT_MI300X, COLLECT_WSL):
        text = fixture_text(name)
        for _ in range(15):
            start = rng.randrange(len(text))
            piece = text[start : start + rng.randrange(1, len(text) + 1)]
            parse_hipconfig(piece)
            parse_rocm_version_file(piece)
