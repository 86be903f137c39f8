"""hipconfig, version strings, ds_report and collect_env parsers on recorded outputs in ../shared/fixtures,
plus one real ds_report run of the installed deepspeed (~4 s: the only source of its general-info section)."""

from __future__ import annotations

import importlib.util
import random
import sys
from importlib import metadata

import pytest

from rocmcheck.facts.parsers.collect_env import parse_collect_env
from rocmcheck.facts.parsers.ds_report import parse_ds_report
from rocmcheck.facts.parsers.hipconfig import hip_version_short, parse_hipconfig
from rocmcheck.facts.parsers.versions import (
    major_minor,
    parse_rocm_version_file,
    parse_torch_cuda_suffix,
    parse_torch_rocm_suffix,
)
from rocmcheck.facts.runner import run_command

HIPCONFIG = "hipconfig/hipconfig-full-rocm6.3.2-linuxmint-gfx90c.txt"
DS_REPORT = "ds_report/mi300x-8gpu-tensorwave-deepspeed-issue6725-truncated.txt"
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
    wsl = parse_collect_env(fixture_text(COLLECT_WSL))["fields"]["PyTorch version"]
    assert parse_torch_rocm_suffix(wsl) == "6.3.4"  # "2.4.0+rocm6.3.4.git7cecbf6d"
    mi300x = parse_collect_env(fixture_text(COLLECT_MI300X))["pip"]["torch"]
    assert parse_torch_rocm_suffix(mi300x) == "6.1"
    for other in ("2.5.1+cu124", "2.13.0+cpu", "2.4.1", "", None, "not a version+rocm"):
        assert parse_torch_rocm_suffix(other) is None


def test_torch_cuda_suffix():
    assert parse_torch_cuda_suffix("2.5.1+cu124") == "12.4"
    assert parse_torch_cuda_suffix("2.0.1+cu118") == "11.8"
    assert parse_torch_cuda_suffix("2.9.0+cu130") == "13.0"
    for other in ("2.4.1+rocm6.1", "2.13.0+cpu", "2.5.1", None, "x+cu"):
        assert parse_torch_cuda_suffix(other) is None


def test_major_minor():
    assert major_minor("6.2.41133-dd7f95766") == "6.2"
    assert major_minor("6.2") == "6.2"
    assert major_minor("") is None and major_minor(None) is None


# ---- ds_report -----------------------------------------------------------------------------------

def test_ds_report_truncated_mi300x(fixture_text):
    report = parse_ds_report(fixture_text(DS_REPORT))
    assert report["accelerator"] == "cuda"  # DeepSpeed calls ROCm "cuda"
    assert report["ninja"] is True
    assert report["ops"] == {
        "async_io": {"installed": False, "compatible": False},
        "fused_adam": {"installed": False, "compatible": True},
        "cpu_adam": {"installed": True, "compatible": True},
        "cpu_adagrad": {"installed": False, "compatible": True},
    }
    assert report["op_warnings"]["async_io"][1] == "async_io: please install the libaio-dev package with apt"
    # The general-info section was cut off in this copy.
    assert report["torch_version"] is None and report["deepspeed_version"] is None
    assert report["shm_warnings"] == []


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
def test_ds_report_of_the_installed_deepspeed():
    """The real ds_report of this machine: covers the general-info section the fixture lacks."""
    res = run_command([sys.executable, "-m", "deepspeed.env_report"], timeout=180)
    if not res.ok:
        pytest.skip(f"ds_report did not run here: {res.describe_failure()}")
    report = parse_ds_report(res.stdout)
    assert report["deepspeed_version"] == metadata.version("deepspeed")
    assert report["torch_version"] == metadata.version("torch")
    assert report["compiled_with"].startswith("torch ")
    assert report["shm_size"].endswith("B")
    assert report["ninja"] in (True, False)
    assert "cpu_adam" in report["ops"] and "async_io" in report["ops"]
    # Every op row was read: as many ops as lines with an [OKAY]/[NO] compatibility column.
    rows = [l for l in res.stdout.splitlines() if l.rstrip().endswith(("[OKAY]\x1b[0m", "[NO]\x1b[0m"))
            and not l.startswith("ninja")]
    assert len(report["ops"]) == len(rows)


# ---- collect_env ---------------------------------------------------------------------------------

def test_collect_env_vllm_mi300x(fixture_text):
    env = parse_collect_env(fixture_text(COLLECT_MI300X))
    fields = env["fields"]
    assert fields["PyTorch version"] == "2.4.1+rocm6.1"
    assert fields["ROCM used to build PyTorch"] == "6.1.40091-a8dbc0c19"
    assert fields["GPU models and configuration"] == "AMD Instinct MI300X (gfx942:sramecc+:xnack-)"
    assert fields["HIP runtime version"] == "6.1.40093"
    assert fields["Is CUDA available"] == "True"
    assert fields["vLLM Version"] == "0.6.3.dev116+g151ef4ef"
    assert env["pip"]["pytorch-triton-rocm"] == "3.0.0" and env["pip"]["triton"] == "3.0.0"
    assert len(env["pip"]) == 10
    assert env["conda"] == {} and env["cpu"] == {} and env["warnings"] == []


def test_collect_env_wsl_with_stderr_noise(fixture_text):
    env = parse_collect_env(fixture_text(COLLECT_WSL))
    assert env["fields"]["PyTorch version"] == "2.4.0+rocm6.3.4.git7cecbf6d"
    assert env["fields"]["Python platform"].endswith("WSL2-x86_64-with-glibc2.35")
    assert env["fields"]["MIOpen runtime version"] == "3.3.0"
    assert env["cpu"]["Model name"] == "13th Gen Intel(R) Core(TM) i7-13700F"
    assert env["cpu"]["CPU(s)"] == "24"
    assert "Architecture" not in env["fields"]  # lscpu lines stay in "cpu"
    assert env["pip"]["torch"] == "2.4.0+rocm6.3.4.git7cecbf6d" and len(env["pip"]) == 17
    assert len(env["warnings"]) == 2
    assert env["warnings"][1].endswith("UserWarning: Can't initialize amdsmi - Error code: 34")
    assert not any(k.startswith("/") or "warn" in k for k in env["fields"])


# ---- garbage for all four ------------------------------------------------------------------------

@pytest.mark.parametrize("garbage", ["", None, b"\x00\x9f\xff", "[pip3]\n[conda] x\nCPU:\n:\n : :", "....... [YES]"])
def test_ds_report_and_collect_env_garbage(garbage):
    report = parse_ds_report(garbage)
    assert report["ops"] == {} and report["torch_version"] is None
    env = parse_collect_env(garbage)
    assert env["pip"] == {} and env["conda"] == {}


def test_random_cuts_never_raise(fixture_text):
    rng = random.Random(11)
    for name in (HIPCONFIG, DS_REPORT, COLLECT_MI300X, COLLECT_WSL):
        text = fixture_text(name)
        for _ in range(15):
            start = rng.randrange(len(text))
            piece = text[start : start + rng.randrange(1, len(text) + 1)]
            parse_hipconfig(piece)
            parse_ds_report(piece)
            parse_collect_env(piece)
            parse_rocm_version_file(piece)
