"""probe.p2p_matrix (level 3, 2+ GPUs): every ordered GPU pair copies alone (TransferBench-style), and the matrix
of bandwidths and latencies is judged: the bytes must arrive as sent, each pair must reach what its link type
(read from the topology tool: NVLink, XGMI, PCIe) carries, and a pair far slower than the other pairs of the same
link type is named, with the outlier rule `rocmcheck compare` uses (rocmcheck/outliers.py). Runner:
rocmcheck/probes/p2p.py; the links: rocmcheck/probes/links.py. In CPU test mode two CPU "devices" copy."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import note, shell
from rocmcheck.knowledge.floors import XGMI_PAIR_GBPS
from rocmcheck.outliers import slow_nodes
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number
from rocmcheck.probes.links import LINK_NAMES, PCIE_GEN4_X16_GBPS, PCIE_GEN5_X16_GBPS
from rocmcheck.probes.spec import Probe, ProbeSkip, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.p2p_matrix"
# What one direction of a pair's copy should reach, by link type (GB/s):
# - NVLink: more than a PCIe Gen5 x16 link could carry (63 GB/s); NV18 on H100/H200 is 450 GB/s per direction
#   on the datasheet (900 GB/s both ways), so a pair at PCIe speed is not using its NVLink.
# - XGMI: AMD's own floor for the product where knowledge/validation_floors.json has one (TransferBench healthcheck:
#   45 GB/s x 0.97 per pair in the all-to-all on MI300X and MI325X; a pair copying alone has its link to itself);
#   else 32.9 GB/s, the per-pair floor of Primus-SaFE's MI300X preflight; ROCm's cvs health config expects 33.9.
# - PCIe: a quarter of Gen4 x16 (31.5 GB/s): even routed through the host bridges a pair stays above it.
PAIR_FLOOR_GBPS = {"nvlink": PCIE_GEN5_X16_GBPS, "xgmi": 32.9, "pcie": PCIE_GEN4_X16_GBPS / 4}
FAIL_OF_FLOOR = 0.5  # below half its floor a pair is broken, not slow
# A pair this far below the median of the pairs of its link type is named (rocmcheck/outliers.py's rule); copies
# between equal links vary far less than this. bench_level3.py on a 2+ GPU machine measures the spread.
P2P_SLOW_FRACTION = 0.20
CPU_DEVICES = 2
CPU_BYTES = 1 << 20

_LINK_FIX_AMD = shell("amd-smi topology; amd-smi xgmi -l",
                      "see which pair has no XGMI link or a link down; reseat or RMA the GPU, or check the "
                      "platform's XGMI settings")
_LINK_FIX_NVIDIA = shell("nvidia-smi topo -m; nvidia-smi nvlink --status",
                         "see which pair runs without NVLink or with links down; check the fabric manager on "
                         "NVSwitch systems")
_WRONG_FIX = note("bytes copied between two GPUs arrived changed: drain the node and run the vendor link tests "
                  "(AMD: TransferBench / rvs pbqt; NVIDIA: dcgmi diag -r 3)")


def _link_fix(ctx: DeviceContext):
    return _LINK_FIX_AMD if ctx.vendor == "amd" else _LINK_FIX_NVIDIA


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    import os

    import torch

    from rocmcheck.probes.links import topology_of, torch_bus_id
    from rocmcheck.probes.p2p import pair_matrix

    count = torch.cuda.device_count()
    if count < 2:
        raise ProbeSkip(f"{count} GPU visible: no pair to copy between")
    devices = [torch.device("cuda", i) for i in range(count)]
    buses = [torch_bus_id(torch.cuda.get_device_properties(i)) for i in range(count)]
    links = topology_of("amd" if torch.version.hip else "nvidia", buses, os.environ)
    return {"gpus": count, "pairs": pair_matrix(devices), "links": links}


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.p2p import pair_matrix

    pairs = pair_matrix([device] * CPU_DEVICES, nbytes=CPU_BYTES, iters=2, latency_iters=3)
    return {"gpus": CPU_DEVICES, "pairs": pairs, "links": {"kinds": {}, "why_not_known": "CPU test mode"}}


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    pairs: list[dict[str, Any]] = data["pairs"]
    links = data.get("links") or {}
    kinds: dict[str, str] = links.get("kinds") or {}
    evidence, wrong, broken, slow = [], [], [], []
    by_kind: dict[str, dict[str, float]] = {}
    floors = dict(PAIR_FLOOR_GBPS)
    amd_floor = ctx.floor(XGMI_PAIR_GBPS)
    if amd_floor is not None:
        floors["xgmi"] = amd_floor.value
        evidence.append(f"XGMI pair floor {amd_floor.value:g} GB/s: {amd_floor.cite()}")
    for p in pairs:
        key = f"{p['src']}->{p['dst']}"
        kind = kinds.get(f"{p['src']}-{p['dst']}")
        gbps, lat = number(p.get("gbps")), number(p.get("latency_us"))
        peer = p.get("peer_access")
        evidence.append(f"GPU {key}: {gbps or 0:,.1f} GB/s, {lat or 0:.1f} us, link {kind or 'not known'}"
                        + ("" if peer is None else f", peer access {'on' if peer else 'OFF'}")
                        + ("" if p.get("ok") else ", BYTES WRONG"))
        if not p.get("ok"):
            wrong.append(key)
        floor = floors.get(kind or "")
        if gbps is None or (floor and gbps < floor * FAIL_OF_FLOOR):
            broken.append(f"{key} {gbps or 0:,.1f} GB/s over {LINK_NAMES[kind]} (< {floor * FAIL_OF_FLOOR:g})" if floor
                          else f"{key} not measured")
        elif floor and gbps < floor:
            slow.append(f"{key} {gbps:,.1f} GB/s over {LINK_NAMES[kind]} (< {floor:g})")
        if gbps is not None:
            by_kind.setdefault(kind or "not known", {})[key] = gbps
    outliers = []
    for kind, values in by_kind.items():
        named, ref = slow_nodes(values, P2P_SLOW_FRACTION)
        link = f"{LINK_NAMES[kind]} pairs" if kind in LINK_NAMES else "pairs (link type not known)"
        outliers += [f"{key} {values[key]:,.1f} GB/s vs {ref:,.1f} for the other {link}" for key in named]
    fabric_no_peer = [f"{p['src']}->{p['dst']}" for p in pairs if p.get("peer_access") is False
                      and kinds.get(f"{p['src']}-{p['dst']}") in ("nvlink", "xgmi")]
    if not kinds:
        evidence.append(f"link types not known: {links.get('why_not_known') or 'no topology read'}")
    values = [v for vs in by_kind.values() for v in vs.values()]
    info = dict(gpus=data["gpus"], pairs=pairs, links=kinds, slow_pairs=outliers + slow + broken,
                min_gbps=round(min(values), 1) if values else None,
                median_gbps=round(sorted(values)[len(values) // 2], 1) if values else None)
    n = len(pairs)
    if wrong:
        return failed(f"GPU-to-GPU copies arrived with wrong bytes on {len(wrong)} of {n} pairs ({', '.join(wrong)})",
                      _WRONG_FIX, evidence, **info, id=ID)
    if broken:
        return failed(f"{len(broken)} GPU pair(s) copy far below what their link carries: {'; '.join(broken[:3])}",
                      _link_fix(ctx), evidence, **info, id=ID)
    if slow or outliers:
        return warned(f"slow GPU pair(s): {'; '.join((slow + outliers)[:3])}", _link_fix(ctx), evidence, **info,
                      id=ID)
    if fabric_no_peer:
        return warned(f"peer access is off on {len(fabric_no_peer)} fabric-linked pair(s) "
                      f"({', '.join(fabric_no_peer[:4])}): their copies go through host memory", _link_fix(ctx),
                      evidence, **info, id=ID)
    span = f"{info['min_gbps']:,.1f}-{max(values):,.1f} GB/s" if values else "no rate"
    kinds_seen = ", ".join(sorted({LINK_NAMES[k] for k in kinds.values()})) or "link types not known"
    return passed(f"{n} GPU pair(s) copy right, {span} one way ({kinds_seen}), no slow pair", evidence, **info, id=ID)


PROBE = Probe(ID, "every GPU pair copies right at the speed of its link (NVLink / XGMI / PCIe); names a slow pair",
              120, judge, run=run, run_cpu=run_cpu, level=3)
