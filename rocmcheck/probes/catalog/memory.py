"""probe.memory: the GPU memory torch sees (total, free) against what the driver tool reports. Runs first, so it
reads free memory before the other probes allocate any."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import shell, smi_processes
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, passed, warned
from rocmcheck.units import GIB

ID = "probe.memory"
# torch's total vs the driver tool's: a partitioned MI300X (CPX/QPX, NPS4) or MIG shows a fraction, far more than 5 %.
MEMORY_TOTAL_TOLERANCE = 0.05
# Memory already taken by others when the probe ran.
MEMORY_IN_USE_WARN_FRACTION = 0.10
MEMORY_IN_USE_WARN_MIN_BYTES = 2 * GIB  # the probe's own CUDA/HIP context takes ~0.5 GiB

_PARTITION_AMD = shell("amd-smi static --partition",
                       "a partitioned MI300X (CPX/QPX, NPS4) shows a fraction of its memory per GPU")
_PARTITION_NVIDIA = shell("nvidia-smi -q -d MEMORY", "MIG or a visibility setting can shrink what torch sees")


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import memory

    return memory(device)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    devices = data["devices"]
    smi = [int(b) for b in (ctx.smi_memory_bytes or []) if b]
    evidence, mismatched, busy = [], [], []
    for dev in devices:
        total, free = int(dev["total_bytes"]), int(dev["free_bytes"])
        used = total - free
        line = f"GPU {dev['index']}: torch sees {total / GIB:.1f} GiB total, {free / GIB:.1f} GiB free"
        if smi:
            # Index order can differ between torch and the tools (pytorch#131901): match by size.
            closest = min(smi, key=lambda b: abs(b - total))
            line += f"; the system tool reports {closest / GIB:.1f} GiB"
            if abs(closest - total) > MEMORY_TOTAL_TOLERANCE * closest:
                mismatched.append(dev["index"])
        evidence.append(line)
        if used > max(MEMORY_IN_USE_WARN_FRACTION * total, MEMORY_IN_USE_WARN_MIN_BYTES):
            busy.append((dev["index"], used))
    totals = {"devices": devices, "smi_memory_bytes": smi or None}
    if mismatched:
        fix = _PARTITION_AMD if ctx.vendor == "amd" else _PARTITION_NVIDIA
        return warned(f"torch sees a different GPU memory size than the system tool on GPU "
                      f"{', '.join(map(str, mismatched))}", fix, evidence, **totals, id=ID)
    if busy:
        worst = max(busy, key=lambda b: b[1])
        return warned(f"{worst[1] / GIB:.1f} GiB of GPU {worst[0]} memory is already in use by other processes",
                      smi_processes(ctx.vendor, "stop what you don't need before training"), evidence, **totals,
                      id=ID)
    total = sum(int(d["total_bytes"]) for d in devices)
    compared = "matches the system tool" if smi else "no system-tool figure to compare"
    return passed(f"{len(devices)} GPU(s), {total / GIB:.1f} GiB total as torch sees it ({compared}); free for use",
                  evidence, **totals, id=ID)


PROBE = Probe(ID, "the GPU memory torch sees matches what the driver tool reports", 15, judge, run=run, run_cpu=run)
