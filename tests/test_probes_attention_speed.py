"""probe.attention_speed: the shape option, who picks which attention on this stack, the judge on SDPA-faster /
flash-attn-faster / not-installed figures, and a real CPU child run (no flash-attn here: SDPA timed alone)."""

from __future__ import annotations

import pytest

from rocmcheck.fixes import FixKind
from rocmcheck.probes.catalog import attention_speed as speed
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.spec import ProbeSkip
from rocmcheck.probes.stage import run_stage
from rocmcheck.result import Status

MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=1)
SHAPE = {"batch": 1, "heads": 32, "kv_heads": 32, "seq": 4096, "head_dim": 128}


def test_the_shape_option_defaults_to_a_llama_7b_layer_and_checks_what_it_is_given():
    assert speed.parse_shape(None) == speed.parse_shape("") == (1, 32, 32, 4096, 128)
    assert speed.parse_shape(" 2, 32, 8, 8192, 128 ") == (2, 32, 8, 8192, 128)
    for bad, why in (("1,32,4096,128", "five positive integers"), ("1,32,5,4096,128", "multiple of kv_heads"),
                     ("1,32,8,4096,100", "head_dim 100"), ("1,32,8,0,128", "at least 1"),
                     ("4096,32,8,4096,128", "more than"), ("1,32,8,4096,1e3", "five positive integers")):
        with pytest.raises(ValueError, match=why):
            speed.parse_shape(bad)
    with pytest.raises(ProbeSkip, match="ROCMCHECK_ATTENTION_SHAPE"):
        speed._shape({speed.SHAPE_ENV: "llama"})


def test_who_picks_what():
    assert speed.picks("5.24.0", False) == {"transformers default": "sdpa", "llamafactory flash_attn: auto": "sdpa",
                                            "llamafactory flash_attn: sdpa": "sdpa",
                                            "llamafactory flash_attn: fa2": "sdpa"}
    assert speed.picks("4.46.0", True)["llamafactory flash_attn: fa2"] == "flash_attention_2"
    assert speed.picks("4.35.2", False)["transformers default"] == "eager"


def _data(sdpa_ms, fa_ms=None, fa=True):
    flash = {"installed": fa, "version": "2.7.4" if fa else None, "ms": fa_ms}
    if not fa:
        flash["why_not"] = "flash-attn is not installed"
    return {"shape": SHAPE, "sdpa": {"default": {"ms": sdpa_ms}, "FLASH_ATTENTION": {"ms": sdpa_ms},
                                     "CUDNN_ATTENTION": {"ms": None, "error": "RuntimeError: no cuDNN"}},
            "flash_attn": flash, "transformers": "5.24.0"}


def test_sdpa_faster_than_flash_attn_warns_with_the_yaml_edit():
    r = speed.judge(_data(8.0, 11.0), MI300X)
    assert r.status == Status.WARN and "SDPA is 1.38x faster than flash-attn" in r.summary
    assert r.fix.kind == FixKind.EDIT and r.fix.text == "flash_attn: sdpa" and "LLaMA-Factory" in r.fix.file
    assert "rocmcheck smoke-train --attn sdpa" in r.fix.why
    assert any(e == "llamafactory flash_attn: auto -> sdpa" for e in r.evidence)


def test_flash_attn_faster_passes_and_says_fa2_is_worth_setting():
    r = speed.judge(_data(12.0, 9.0), MI300X)
    assert r.status == Status.PASS and "flash_attn: fa2 is worth setting" in r.summary
    assert speed.judge(_data(10.0, 10.5), MI300X).status == Status.PASS


def test_without_flash_attn_it_skips_with_sdpa_timed():
    r = speed.judge(_data(8.0, fa=False), MI300X)
    assert r.status == Status.SKIP and "flash-attn is not installed" in r.summary and "SDPA 8.00 ms" in r.summary
    assert "SDPA CUDNN_ATTENTION: does not run (RuntimeError: no cuDNN)" in r.evidence


def test_flash_attn_that_fails_at_the_shape_warns():
    data = _data(8.0, None)
    data["flash_attn"]["error"] = "RuntimeError: FlashAttention only supports head dimension at most 256"
    r = speed.judge(data, MI300X)
    assert r.status == Status.WARN and "does not run" in r.summary
    assert r.fix.kind == FixKind.EDIT and r.fix.text == "flash_attn: sdpa"


def test_a_real_cpu_child_run_times_sdpa_and_skips_the_comparison():
    r = run_stage(timeout_s=120, only={"attention_speed"}, cpu=True)[0]
    assert r.status == Status.SKIP and "flash-attn" in r.summary, r.summary
    assert r.data["sdpa_ms"] and r.data["shape"]["kv_heads"] == 2  # grouped-query: 4 heads over 2 kv heads
    assert r.data["picks"]["transformers default"] == "sdpa"
