"""probe.bitsandbytes on the real bitsandbytes CPU backend (installed in the test venv; it runs the same
quantize / dequantize / matmul_4bit entry points as a GPU build), a broken dequantizer planted in it, the CDNA
block-size rule, and the judge on an import error and a build that refuses the default block size."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rocmcheck.probes.catalog import bitsandbytes as bnb_probe
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.quant4 import CDNA_BLOCKSIZE, DEFAULT_BLOCKSIZE, bnb_4bit, is_cdna
from rocmcheck.probes.spec import ProbeSkip
from rocmcheck.probes.stage import run_stage
from rocmcheck.result import Status

CPU = torch.device("cpu")
MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=1)
H200 = DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90", count=1)
needs_bnb = pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None,
                               reason="bitsandbytes is not installed in this environment")


def test_the_cdna_rule_covers_the_instinct_archs_only():
    assert all(is_cdna(a) for a in ("gfx908", "gfx90a", "gfx942"))
    assert not any(is_cdna(a) for a in ("gfx1100", "gfx1201", "sm_90", ""))


@needs_bnb
def test_a_real_cpu_child_run_passes():
    r = run_stage(timeout_s=120, only={"bitsandbytes"}, cpu=True)[0]
    assert r.status == Status.PASS, (r.summary, r.evidence)
    assert r.data["blocksize"] == DEFAULT_BLOCKSIZE and r.data["cdna"] is False
    assert set(r.data["results"]) == {"nf4", "fp4"}


@needs_bnb
def test_on_cdna_the_rule_picks_128_and_tries_the_default_64():
    data = bnb_4bit(CPU, "gfx942")
    assert data["cdna"] and data["blocksize"] == CDNA_BLOCKSIZE
    assert data["results"]["nf4"]["blocksize"] == 128 and data["default_blocksize_on_cdna"]["blocksize"] == 64
    r = bnb_probe.judge(data, MI300X)
    assert r.status == Status.PASS and "blocksize 128, the CDNA rule" in r.summary
    assert r.evidence[0].startswith("CDNA rule: blocksize 64 is unsupported on CDNA GPUs, 128 used")


@needs_bnb
def test_a_broken_dequantizer_fails_the_round_trip(monkeypatch):
    import bitsandbytes.functional as F

    real = F.dequantize_4bit
    monkeypatch.setattr(F, "dequantize_4bit", lambda q, state, *a, **k: real(q, state, *a, **k) * 0.5)
    r = bnb_probe.judge(bnb_4bit(CPU, ""), H200)
    assert r.status == Status.FAIL and "4-bit is broken" in r.summary and "nf4 round trip is wrong" in r.summary
    assert r.fix.text == "pip install --upgrade bitsandbytes"


def test_without_bitsandbytes_the_probe_skips_saying_so(monkeypatch):
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bitsandbytes" else find(name, *a))
    with pytest.raises(ProbeSkip, match="bitsandbytes is not installed"):
        bnb_4bit(CPU, "")


def _healthy(**over):
    data = {"version": "0.45.0", "backend": "ROCm", "libraries": ["libbitsandbytes_rocm62.so"], "cdna": True,
            "blocksize": 128, "torch_hip": "6.2.41133", "torch_cuda": None, "arch": "gfx942",
            "results": {"nf4": {"blocksize": 128, "round_trip_rel_err": 0.095, "matmul_rel_err": 2e-3},
                        "fp4": {"blocksize": 128, "round_trip_rel_err": 0.127, "matmul_rel_err": 2e-3}},
            "default_blocksize_on_cdna": {"blocksize": 64, "round_trip_rel_err": 0.092, "matmul_rel_err": 2e-3}}
    data.update(over)
    return data


def test_a_build_that_refuses_blocksize_64_on_cdna_warns():
    refused = {"blocksize": 64, "error": "RuntimeError: blocksize in [4096, 2048, 1024, 512, 256, 128]"}
    r = bnb_probe.judge(_healthy(default_blocksize_on_cdna=refused), MI300X)
    assert r.status == Status.WARN and "the default 64" in r.summary and r.data["default_blocksize_works"] is False
    assert "ROCm" in r.fix.why and "github.com/ROCm/bitsandbytes" in r.fix.why


def test_an_import_error_fails_with_the_fix():
    r = bnb_probe.judge({"version": "0.43.3", "import_error": "RuntimeError: Configured CUDA binary not found at "
                         "libbitsandbytes_rocm63.so", "torch_hip": "6.3.42131", "torch_cuda": None}, MI300X)
    assert r.status == Status.FAIL and "does not import" in r.summary and "6.3.42131" in r.fix.why


def test_a_wrong_matmul_and_nan_fail():
    bad = _healthy()
    bad["results"]["fp4"]["matmul_rel_err"] = 0.4
    assert "fp4 matmul_4bit is wrong" in bnb_probe.judge(bad, MI300X).summary
    nan = _healthy()
    nan["results"]["nf4"]["round_trip_rel_err"] = None  # NaN in the child arrives as null, and never passes
    assert bnb_probe.judge(nan, MI300X).status == Status.FAIL
    assert bnb_probe.judge(_healthy(), MI300X).status == Status.PASS
