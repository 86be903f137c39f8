"""The GPU probes rocmcheck knows, in run order. Each is defined once, in its own module here (its id, what it
proves, its time limit, its runners and its judge); this file only lists them. No torch here.

Order is the run order. memory first: it reads free memory before the other probes allocate any. The collective
last: it runs in its own child and touches the interconnect only when the others are done."""

from __future__ import annotations

from rocmcheck.probes.catalog import (
    attention,
    collective,
    copy_bandwidth,
    deepspeed_ops,
    flash_attn,
    gemm_numerics,
    gemm_tflops,
    host_bandwidth,
    memory,
    triton,
)
from rocmcheck.probes.spec import Probe

PROBES: tuple[Probe, ...] = (
    memory.PROBE,
    gemm_numerics.PROBE,
    gemm_tflops.PROBE,
    copy_bandwidth.PROBE,
    host_bandwidth.PROBE,
    attention.PROBE,
    flash_attn.PROBE,
    triton.PROBE,
    deepspeed_ops.PROBE,
    collective.PROBE,
)

PROBE_NAMES: tuple[str, ...] = tuple(p.name for p in PROBES)
PROBE_IDS: tuple[str, ...] = tuple(p.id for p in PROBES)
BY_NAME: dict[str, Probe] = {p.name: p for p in PROBES}
BY_ID: dict[str, Probe] = {p.id: p for p in PROBES}
