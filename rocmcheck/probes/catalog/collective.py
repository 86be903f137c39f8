"""probe.collective: all-reduce and all-gather across all visible GPUs (NCCL/RCCL), results checked exactly,
bandwidth as nccl-tests computes it. It runs in a child of its own, one process per GPU
(rocmcheck/probes/collective.py; two gloo processes in CPU test mode), started by the stage beside the main child."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import shell
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.spec import Probe
from rocmcheck.result import CheckResult, failed, passed

ID = "probe.collective"
CHILD = "rocmcheck.probes.collective"
OPS = ("all_reduce", "all_gather")

_MSCCL_OFF = shell("export RCCL_MSCCL_ENABLE=0", "AMD's validation guide disables MSCCL to avoid data mismatches; "
                   "then rerun")
_TRANSPORT_LOG = shell("NCCL_DEBUG=INFO rocmcheck probe collective", "see which transport corrupts data")


def bus_bandwidth_gbps(op: str, size_bytes: float, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s the way nccl-tests/rccl-tests compute them (doc/PERFORMANCE.md there):
    algbw = size / time; all_reduce busbw = algbw * 2(n-1)/n; all_gather busbw = algbw * (n-1)/n, where
    for all_gather size is the whole gathered buffer (n x the per-rank piece)."""
    if seconds <= 0 or world < 1:
        raise ValueError("seconds must be > 0 and world >= 1")
    algbw = size_bytes / seconds / 1e9
    factor = {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world}[op]
    return algbw, algbw * factor


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    world, backend = data["world"], data["backend"]
    evidence, wrong = [], []
    for op in OPS:
        r = data[op]
        evidence.append(f"{op}: {'right' if r['ok'] else 'WRONG'} result, {r['bytes'] / 1e6:.0f} MB in "
                        f"{r['ms']:.3f} ms, algbw {r['algbw_gbps']:.1f} GB/s, busbw {r['busbw_gbps']:.1f} GB/s")
        if not r["ok"]:
            wrong.append(op)
    info = dict(world=world, backend=backend, all_reduce=data["all_reduce"], all_gather=data["all_gather"],
                phases=data.get("phases"))
    if wrong:
        fix = _MSCCL_OFF if ctx.vendor == "amd" else _TRANSPORT_LOG
        return failed(f"{' and '.join(wrong)} across {world} ranks ({backend}) returned wrong data", fix, evidence,
                      **info, id=ID)
    ar = data["all_reduce"]
    ranks = "GPUs" if backend == "nccl" else "processes"
    return passed(f"all-reduce and all-gather right across {world} {ranks} ({backend}); all-reduce busbw "
                  f"{ar['busbw_gbps']:.1f} GB/s", evidence, **info, id=ID)


PROBE = Probe(ID, "all-reduce and all-gather across all visible GPUs give the right result", 90, judge, child=CHILD)
