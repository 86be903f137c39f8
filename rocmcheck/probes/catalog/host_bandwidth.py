"""probe.host_bandwidth: pinned host->device and device->host copies, 256 MiB each way (what ZeRO CPU offload
moves every step). Not in CPU test mode: there is no host/device link to measure."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import shell
from rocmcheck.knowledge.floors import DEVICE_TO_HOST_GBPS, HOST_TO_DEVICE_GBPS
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.host_bandwidth"
# Pinned host<->device GB/s. PCIe 3.0 x16 carries 15.75 GB/s per direction, 4.0 x16 31.5, 5.0 x16 63.
# Where AMD publishes a floor for the product (knowledge/validation_floors.json) that floor is the pass mark instead.
HOST_PASS_GBPS = 20.0  # more than PCIe 3.0 x16 can carry: the link is 4.0 x16 or better and pinned copies work
HOST_FAIL_GBPS = 6.0  # below half a PCIe 3.0 x16: a narrow/downgraded link or unpinned memory

_WHY = ("check the PCIe link generation and width; run on the CPU socket nearest the GPU "
        "(numactl --cpunodebind=N --membind=N)")
_LINK_AMD = shell("amd-smi static --bus", _WHY)
_LINK_NVIDIA = shell("nvidia-smi -q -d PCI", _WHY)
# AMD's floor is measured from the CPU NUMA node nearest the GPU: a copy from the far socket crosses the inter-socket
# link and can fall below it on a healthy node.
_NEAREST_NODE = shell("cat /sys/class/drm/card*/device/numa_node; "
                      "numactl --cpunodebind=N --membind=N rocmcheck probe host_bandwidth",
                      "N: the GPU's NUMA node; if the copy reaches the floor there, bind each rank to its GPU's node "
                      "(torchrun: numactl per rank, mpirun --bind-to numa); if not, check the PCIe link "
                      "(amd-smi static --bus)")


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import host_bandwidth

    return host_bandwidth(device)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    h2d, d2h = number(data["h2d_gb_per_s"]), number(data["d2h_gb_per_s"])
    info = dict(h2d_gb_per_s=h2d, d2h_gb_per_s=d2h, bytes=data.get("bytes"))
    text = f"pinned host->device {h2d or 0:.1f} GB/s, device->host {d2h or 0:.1f} GB/s on {ctx.label()}"
    slowest = min(h2d or 0.0, d2h or 0.0)
    fix = _LINK_AMD if ctx.vendor == "amd" else _LINK_NVIDIA
    h2d_floor, d2h_floor = ctx.floor(HOST_TO_DEVICE_GBPS), ctx.floor(DEVICE_TO_HOST_GBPS)
    if h2d_floor is not None and d2h_floor is not None and slowest >= HOST_FAIL_GBPS:
        info.update(floor_h2d_gb_per_s=h2d_floor.value, floor_d2h_gb_per_s=d2h_floor.value,
                    floor_source=h2d_floor.source)
        evidence = [f"floors: {h2d_floor.cite()}; {d2h_floor.cite()}"]
        below = [f"{what} {got:.1f} < {f.value:g}" for what, got, f in
                 (("host->device", h2d or 0.0, h2d_floor), ("device->host", d2h or 0.0, d2h_floor)) if got < f.value]
        if not below:
            return passed(text + f": at {h2d_floor.who} floor for {h2d_floor.product}", evidence, **info, id=ID)
        than = "the site expects" if h2d_floor.site else "AMD validates"
        return warned(text + f": below {h2d_floor.who} floor for {h2d_floor.product} ({', '.join(below)} GB/s), so "
                      f"CPU offload will be slower than {than}", _NEAREST_NODE, evidence, **info, id=ID)
    if slowest >= HOST_PASS_GBPS:
        return passed(text, **info, id=ID)
    if slowest >= HOST_FAIL_GBPS:
        return warned(text + f": below {HOST_PASS_GBPS:.0f} GB/s, so CPU offload will be slow", fix, **info, id=ID)
    return failed(text + f": below {HOST_FAIL_GBPS:.0f} GB/s, far under any PCIe 3.0 x16 link", fix, **info, id=ID)


PROBE = Probe(ID, "pinned host<->device copies (what CPU offload lives on) are fast", 20, judge, run=run)
