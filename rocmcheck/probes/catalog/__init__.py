"""The GPU probes rocmcheck knows, in run order. Each is defined once, in its own module here (its id, what it
proves, its level, its time limit and duration budget, its runners and its judge); this file only lists them, and
rocmcheck/probes/levels.py picks the ones a doctor level runs (a level runs its own and every lower level's).

Order is the run order: level 1 first, so the quick verdicts come first at every level, then level 2 (numerics),
then level 3 (stress). memory first: it reads free memory before the other probes allocate any. The collective
last: it runs in its own child and touches the interconnect only when the others are done.

A new probe: a module here with its PROBE (level=..., budget_s=... or duration_share=...), and one line in PROBES
among its level's. No torch here."""

from __future__ import annotations

from rocmcheck.probes.catalog import (
    adamw_foreach,
    adamw_fused,
    attention,
    attention_speed,
    bitsandbytes,
    collective,
    collective_sweep,
    copy_bandwidth,
    deepspeed_ops,
    flash_attn,
    fp8_gemm,
    gemm_blas,
    gemm_blaslt,
    gemm_numerics,
    gemm_tflops,
    host_bandwidth,
    memory,
    memory_pattern,
    p2p_matrix,
    rms_norm,
    rms_norm_llama,
    sdpa_cudnn,
    sdpa_efficient,
    sdpa_flash,
    sdpa_math,
    stress_gemm,
    triton,
)
from rocmcheck.probes.spec import Probe

PROBES: tuple[Probe, ...] = (
    # level 1: quick
    memory.PROBE,
    gemm_numerics.PROBE,
    gemm_tflops.PROBE,
    copy_bandwidth.PROBE,
    host_bandwidth.PROBE,
    attention.PROBE,
    flash_attn.PROBE,
    triton.PROBE,
    deepspeed_ops.PROBE,
    # level 2: numerics on every path a fine-tune takes
    gemm_blaslt.PROBE,
    gemm_blas.PROBE,
    sdpa_flash.PROBE,
    sdpa_efficient.PROBE,
    sdpa_cudnn.PROBE,
    sdpa_math.PROBE,
    rms_norm.PROBE,
    rms_norm_llama.PROBE,
    adamw_fused.PROBE,
    adamw_foreach.PROBE,
    bitsandbytes.PROBE,
    fp8_gemm.PROBE,
    attention_speed.PROBE,
    # level 3: stress
    p2p_matrix.PROBE,
    stress_gemm.PROBE,
    memory_pattern.PROBE,
    collective_sweep.PROBE,  # in a child of its own, released after the main child, before the collective
    # level 1, in a child of its own, released last
    collective.PROBE,
)

PROBE_NAMES: tuple[str, ...] = tuple(p.name for p in PROBES)
PROBE_IDS: tuple[str, ...] = tuple(p.id for p in PROBES)
BY_NAME: dict[str, Probe] = {p.name: p for p in PROBES}
BY_ID: dict[str, Probe] = {p.id: p for p in PROBES}
