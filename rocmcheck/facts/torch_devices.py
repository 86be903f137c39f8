"""torch's GPUs described once, for every child that imports torch (the stack probe, the GPU probes, the batch
finder, smoke-train): index, name, arch, memory. The module never imports torch itself: the caller passes the
torch it imported, so importing this file stays cheap.

The arch rule: on a ROCm build, gcnArchName carries target features ("gfx942:sramecc+:xnack-") and the arch is
the part before the first colon; on a CUDA build it is sm_<major><minor> of the compute capability."""

from __future__ import annotations

from typing import Any

from rocmcheck.knowledge import base_gfx, cuda_arch_from_capability


def device_arch(torch: Any, props: Any) -> str:
    """gfx942 / sm_90 for one device's properties; "" when torch does not say."""
    if getattr(torch.version, "hip", None):
        return base_gfx(getattr(props, "gcnArchName", "") or "")
    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    return cuda_arch_from_capability(major, minor) if major is not None and minor is not None else ""


def describe_device(torch: Any, index: int) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(index)
    return {"index": index, "name": props.name, "arch": device_arch(torch, props),
            "gcn_arch": getattr(props, "gcnArchName", None), "capability": [props.major, props.minor],
            "total_bytes": int(props.total_memory)}


def describe_devices(torch: Any) -> list[dict[str, Any]]:
    """Every visible GPU; [] when torch sees none (a CPU build, no device, or a driver torch cannot reach)."""
    try:
        if not torch.cuda.is_available():
            return []
        count = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - a broken runtime raises anything here; "no device" is the answer
        return []
    return [describe_device(torch, i) for i in range(count)]
