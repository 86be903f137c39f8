"""probe.attention_speed (level 2): flash-attn against SDPA on the person's attention shape, forward + backward,
causal, bf16, and which one LLaMA-Factory and transformers will pick on this stack. SDPA is often the faster one
on MI300X (hiyouga/LlamaFactory#8793): when it is, the verdict says so and how to choose it. Where flash-attn is
not installed it skips, with SDPA's backends timed alone. Runner: rocmcheck/probes/attention_timing.py.

The shape: ROCMCHECK_ATTENTION_SHAPE="batch,heads,kv_heads,seq,head_dim" in the environment of
`rocmcheck probe attention_speed` (the probe child inherits it); default a LLaMA-7B layer at 4096 tokens.

Who picks what (from their sources): transformers uses attn_implementation="sdpa" when none is given (since
4.36, falling back to "eager" for a model without SDPA support), and flash_attention_2 only when asked for.
LLaMA-Factory's `flash_attn: auto` (its default) leaves that choice to transformers; `sdpa` asks for sdpa; `fa2`
asks for flash_attention_2 when flash-attn imports, else warns and leaves the default."""

from __future__ import annotations

import os
from typing import Any, Mapping

from rocmcheck import versions
from rocmcheck.fixes import edit
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number
from rocmcheck.probes.spec import Probe, ProbeSkip, RunOptions
from rocmcheck.result import CheckResult, passed, skipped, warned

ID = "probe.attention_speed"
SHAPE_ENV = "ROCMCHECK_ATTENTION_SHAPE"
SHAPE_FIELDS = ("batch", "heads", "kv_heads", "seq", "head_dim")
LLAMA_7B_LAYER = (1, 32, 32, 4096, 128)  # LLaMA-7B: 32 heads of 128, no grouped-query attention; 4096 tokens
CPU_SHAPE = (1, 4, 2, 128, 32)
MAX_SHAPE_TOKENS = 1 << 20  # batch x seq beyond any fine-tune's micro-batch: a typo, not a shape
# One is "faster" when it takes at most 1/1.10 of the other's time: run-to-run noise of a median over ten passes
# stays well inside 10 %.
SPEED_MARGIN = 1.10
TRANSFORMERS_SDPA_DEFAULT_SINCE = (4, 36)
LLAMAFACTORY_YAML = "your LLaMA-Factory training YAML"


def parse_shape(text: str | None) -> tuple[int, int, int, int, int]:
    """(batch, heads, kv_heads, seq, head_dim) from "1,32,8,4096,128"; ValueError saying what is wrong."""
    if text is None or not text.strip():
        return LLAMA_7B_LAYER
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != len(SHAPE_FIELDS) or not all(p.isascii() and p.isdigit() and len(p) <= 7 for p in parts):
        raise ValueError(f"{SHAPE_ENV}={text!r}: give {','.join(SHAPE_FIELDS)} as five positive integers")
    b, h, kvh, s, d = (int(p) for p in parts)
    if min(b, h, kvh, s, d) < 1:
        raise ValueError(f"{SHAPE_ENV}={text!r}: every field is at least 1")
    if h % kvh:
        raise ValueError(f"{SHAPE_ENV}={text!r}: heads ({h}) must be a multiple of kv_heads ({kvh})")
    if d > 256 or d % 8:
        raise ValueError(f"{SHAPE_ENV}={text!r}: head_dim {d} is not one attention kernels take (a multiple of 8 "
                         "up to 256)")
    if b * s > MAX_SHAPE_TOKENS:
        raise ValueError(f"{SHAPE_ENV}={text!r}: batch x seq = {b * s} tokens is more than {MAX_SHAPE_TOKENS}")
    return b, h, kvh, s, d


def _shape(env: Mapping[str, str]) -> tuple[int, int, int, int, int]:
    try:
        return parse_shape(env.get(SHAPE_ENV))
    except ValueError as exc:
        raise ProbeSkip(str(exc)) from None


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention_timing import attention_speed

    return attention_speed(device, _shape(os.environ))


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention_timing import attention_speed

    return attention_speed(device, CPU_SHAPE, iters=2)


def picks(transformers: str | None, flash_attn_imports: bool) -> dict[str, str]:
    """What each setting runs on this stack: transformers' default, LLaMA-Factory's flash_attn values. Pure."""
    release = versions.release(transformers)
    default = "sdpa" if release is None or release >= TRANSFORMERS_SDPA_DEFAULT_SINCE else "eager"
    return {"transformers default": default, "llamafactory flash_attn: auto": default,
            "llamafactory flash_attn: sdpa": "sdpa",
            "llamafactory flash_attn: fa2": "flash_attention_2" if flash_attn_imports else default}


def _sdpa_ms(sdpa: dict[str, dict[str, Any]]) -> float | None:
    """SDPA as transformers runs it: torch's own choice of backend (each backend alone is evidence)."""
    return number((sdpa.get("default") or {}).get("ms")) or None


def _choose_sdpa_fix():
    return edit(LLAMAFACTORY_YAML, "flash_attn: sdpa",
                "SDPA is the faster one here (flash_attn: auto picks it too); with transformers alone: "
                "attn_implementation=\"sdpa\"; in rocmcheck's own fine-tune: rocmcheck smoke-train --attn sdpa")


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    shape = data["shape"]
    text = "x".join(str(shape[f]) for f in SHAPE_FIELDS)
    what = f"causal bf16 attention (batch, heads, kv heads, seq, head dim) {text}, forward + backward"
    sdpa: dict[str, dict[str, Any]] = data["sdpa"]
    fa: dict[str, Any] = data.get("flash_attn") or {}
    chosen = picks(data.get("transformers"), bool(fa.get("installed")) and not fa.get("why_not"))
    evidence = [f"SDPA {name}: " + (f"{number(r.get('ms')):.3f} ms" if number(r.get("ms")) else
                                    f"does not run ({r.get('error') or 'no time'})") for name, r in sdpa.items()]
    fa_ms = number(fa.get("ms"))
    fa_text = f"{fa_ms:.3f} ms" if fa_ms else str(fa.get("why_not") or fa.get("error") or "not run")
    evidence.append(f"flash-attn {fa.get('version') or ''}: {fa_text}")
    evidence += [f"{setting} -> {impl}" for setting, impl in chosen.items()]
    sdpa_ms = _sdpa_ms(sdpa)
    info = dict(shape=shape, sdpa_ms=sdpa_ms, flash_attn_ms=fa_ms, picks=chosen,
                sdpa=sdpa, flash_attn_version=fa.get("version"))
    sdpa_text = f"SDPA {sdpa_ms:.2f} ms" if sdpa_ms else "SDPA did not run"
    if not fa.get("installed") or (fa.get("why_not") and not fa_ms):
        why = fa.get("why_not") or "flash-attn is not installed"
        return skipped(f"flash-attn vs SDPA not compared: {why}; {what}: {sdpa_text} on {ctx.label()} "
                       f"(transformers and LLaMA-Factory use {chosen['transformers default']})", evidence, **info,
                       id=ID)
    if fa_ms is None:
        return warned(f"flash-attn {fa.get('version') or ''} does not run {what} on {ctx.label()} "
                      f"({fa.get('error') or 'no time'}); {sdpa_text}", _choose_sdpa_fix(), evidence, **info, id=ID)
    if sdpa_ms is None:
        return passed(f"{what}: flash-attn {fa_ms:.2f} ms; SDPA does not run this shape on {ctx.label()}: "
                      "choose flash_attn: fa2", evidence, **info, id=ID)
    info["sdpa_speedup_over_flash_attn"] = round(fa_ms / sdpa_ms, 3)
    if fa_ms >= sdpa_ms * SPEED_MARGIN:
        return warned(f"{what}: SDPA is {fa_ms / sdpa_ms:.2f}x faster than flash-attn on {ctx.label()} "
                      f"({sdpa_ms:.2f} vs {fa_ms:.2f} ms): fine-tune with SDPA, not fa2", _choose_sdpa_fix(),
                      evidence, **info, id=ID)
    if sdpa_ms >= fa_ms * SPEED_MARGIN:
        return passed(f"{what}: flash-attn is {sdpa_ms / fa_ms:.2f}x faster than SDPA on {ctx.label()} "
                      f"({fa_ms:.2f} vs {sdpa_ms:.2f} ms): flash_attn: fa2 is worth setting "
                      f"(auto runs {chosen['llamafactory flash_attn: auto']})", evidence, **info, id=ID)
    return passed(f"{what}: flash-attn and SDPA within {SPEED_MARGIN - 1:.0%} of each other on {ctx.label()} "
                  f"({fa_ms:.2f} vs {sdpa_ms:.2f} ms): either is fine", evidence, **info, id=ID)


PROBE = Probe(ID, "flash-attn against SDPA, forward+backward at your attention shape, and which one is picked", 60,
              judge, run=run, run_cpu=run_cpu, level=2, budget_s=10.0)
