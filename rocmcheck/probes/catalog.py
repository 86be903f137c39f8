"""The GPU probes rocmcheck knows: name, what each proves, and its own time limit. No torch here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    proves: str
    timeout_s: float  # per-probe limit inside the child; a probe past it is reported as hung
    in_main_child: bool = True  # False: runs in its own child (the collective spawns one process per GPU)


# Order is the run order. memory first: it reads free memory before the other probes allocate any.
PROBES: tuple[ProbeSpec, ...] = (
    ProbeSpec("memory", "the GPU memory torch sees matches what the driver tool reports", 15),
    ProbeSpec("gemm_numerics", "a bf16 matrix product computes the right numbers", 20),
    ProbeSpec("gemm_tflops", "bf16 matrix products run at the speed this GPU should reach", 30),
    ProbeSpec("copy_bandwidth", "device memory moves data at the speed this GPU should reach", 20),
    ProbeSpec("host_bandwidth", "pinned host<->device copies (what CPU offload lives on) are fast", 20),
    ProbeSpec("attention", "torch's fused attention (SDPA) runs for a bf16 causal LLaMA shape and is right", 30),
    ProbeSpec("flash_attn", "flash-attn forward and backward run and match the reference", 60),
    ProbeSpec("triton", "Triton compiles and runs a kernel on this GPU", 60),
    # JIT-building DeepSpeed ops takes minutes; only `rocmcheck probe deepspeed_ops` builds (see stage.py).
    ProbeSpec("deepspeed_ops", "DeepSpeed FusedAdam and DeepSpeedCPUAdam load and step like torch AdamW", 60),
    ProbeSpec("collective", "all-reduce and all-gather across all visible GPUs give the right result", 90, in_main_child=False),
)

PROBE_NAMES: tuple[str, ...] = tuple(p.name for p in PROBES)
BY_NAME: dict[str, ProbeSpec] = {p.name: p for p in PROBES}

# How long a JIT build of DeepSpeed ops may take when the user asked for it explicitly.
DEEPSPEED_BUILD_TIMEOUT_S = 900.0


def probe_id(name: str) -> str:
    return f"probe.{name}"
