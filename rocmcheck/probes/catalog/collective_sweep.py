"""probe.collective_sweep (level 3, 2+ GPUs): all-reduce and all-gather from 8 B to 1 GiB, doubling, each size
checked exactly and timed as rccl-tests / nccl-tests time them; the bus bandwidth at the largest size judged
against the link type between the GPUs (the topology tool's: NVLink, XGMI, PCIe). A leftover NCCL_P2P_DISABLE /
NCCL_SHM_DISABLE / NCCL_P2P_LEVEL=LOC is named beside the figures it explains: a sweep measured with P2P off is
slow for that reason, and one that is fast anyway still carries a setting that costs it elsewhere. It runs in a
child of its own, one process per GPU (rocmcheck/probes/sweep.py); two gloo processes in CPU test mode."""

from __future__ import annotations

from typing import Any

from rocmcheck.fixes import Fix, nccl_transport_unset, shell, then
from rocmcheck.probes.catalog.collective import _MSCCL_OFF, _TRANSPORT_LOG
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number
from rocmcheck.probes.links import LINK_NAMES, PCIE_GEN4_X16_GBPS, slowest_kind
from rocmcheck.probes.spec import Probe
from rocmcheck.result import CheckResult, failed, passed, warned
from rocmcheck.units import fmt_bytes

ID = "probe.collective_sweep"
CHILD = "rocmcheck.probes.sweep"
# All-reduce busbw at the largest size that the slowest link among the GPUs should reach (GB/s):
# - NVLink: half of the 260.8 GB/s measured on 2x H200 (NV18) at 256 MiB (benchmarks/RESULTS.md section 3);
# - XGMI: one pair link's worth, the 32.9 GB/s per-pair floor of probe.p2p_matrix (Primus-SaFE's MI300X floor);
# - PCIe: a quarter of Gen4 x16, as probe.p2p_matrix's PCIe floor.
BUSBW_FLOOR_GBPS = {"nvlink": 130.0, "xgmi": 32.9, "pcie": PCIE_GEN4_X16_GBPS / 4}
FAIL_OF_FLOOR = 0.5
SHOWN_SIZES = (8, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)  # evidence rows


def _transport_fix(settings: list[dict[str, Any]]) -> Fix:
    return nccl_transport_unset(*[s["name"] for s in settings])


def _link_fix(ctx: DeviceContext) -> Fix:
    if ctx.vendor == "amd":
        return then(shell("amd-smi topology", "which pairs are XGMI-linked"),
                    shell("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH rocmcheck probe collective_sweep",
                          "the transport RCCL chose for each channel (P2P/XGMI vs SHM/NET)"))
    return then(shell("nvidia-smi topo -m", "which pairs are NVLink-linked"),
                shell("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH rocmcheck probe collective_sweep",
                      "the transport NCCL chose for each channel (P2P/NVLink vs SHM/NET)"))


def _size(n: int) -> str:
    return fmt_bytes(n, 0, smallest="B")


def _largest(rows: list[dict[str, Any]], op: str) -> dict[str, Any] | None:
    mine = [r for r in rows if r["op"] == op]
    return max(mine, key=lambda r: r["bytes"]) if mine else None


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    world, backend = int(data["world"]), data["backend"]
    rows: list[dict[str, Any]] = data["rows"]
    links = data.get("links") or {}
    kinds: dict[str, str] = links.get("kinds") or {}
    settings = [s for s in data.get("transport_env") or [] if isinstance(s, dict)]
    turned_off = [s for s in settings if s.get("turns_off")]
    evidence = []
    for r in rows:
        if r["bytes"] in SHOWN_SIZES or r is _largest(rows, r["op"]):
            evidence.append(f"{r['op']} {_size(r['bytes'])}: {r['us']:,.1f} us, algbw {r['algbw_gbps']:.2f} "
                            f"GB/s, busbw {r['busbw_gbps']:.2f} GB/s" + ("" if r["ok"] else ", WRONG RESULT"))
    evidence += [f"{s['name']}={s['value']}: {s['meaning']}" for s in settings]
    wrong = sorted({f"{r['op']} at {_size(r['bytes'])}" for r in rows if not r["ok"]})
    ar = _largest(rows, "all_reduce")
    busbw = number(ar["busbw_gbps"]) if ar else None
    kind = slowest_kind(kinds, list(range(world)))
    floor = BUSBW_FLOOR_GBPS.get(kind or "")
    if not kinds:
        evidence.append(f"link types not known: {links.get('why_not_known') or 'no topology read'}")
    info = dict(world=world, backend=backend, rows=rows, link=kind, floor_gbps=floor, largest_busbw_gbps=busbw,
                transport_env=settings, sweep_s=data.get("sweep_s"))
    ranks = f"{world} {'GPUs' if backend == 'nccl' else 'processes'} ({backend})"
    if wrong:
        fix = _MSCCL_OFF if ctx.vendor == "amd" else _TRANSPORT_LOG
        return failed(f"collectives across {ranks} returned wrong data: {', '.join(wrong[:4])}", fix, evidence,
                      **info, id=ID)
    if busbw is None:
        return failed(f"no collective could be timed across {ranks}", _link_fix(ctx), evidence, **info, id=ID)
    size = _size(ar["bytes"]) if ar else "?"
    measured = f"all-reduce busbw {busbw:,.1f} GB/s at {size} across {ranks}"
    cause = (f"; measured with {', '.join(s['name'] + '=' + s['value'] for s in turned_off)}: "
             f"{turned_off[0]['meaning']}, slow for that reason") if turned_off else ""
    if floor and busbw < floor:
        build = failed if busbw < floor * FAIL_OF_FLOOR else warned
        fix = _transport_fix(turned_off) if turned_off else _link_fix(ctx)
        return build(f"{measured}: below the {floor:g} GB/s {LINK_NAMES[kind]} links reach{cause}", fix, evidence,
                     **info, id=ID)
    if turned_off:
        return warned(f"{measured}, but {', '.join(s['name'] + '=' + s['value'] for s in turned_off)} is set: "
                      f"{turned_off[0]['meaning']}", _transport_fix(turned_off), evidence, **info, id=ID)
    judged = (f", above the {floor:g} GB/s {LINK_NAMES[kind]} links reach" if floor and kind
              else " (link type not known: not judged)")
    return passed(f"{measured}{judged}; every size from 8 B right", evidence, **info, id=ID)


PROBE = Probe(ID, "all-reduce and all-gather from 8 B to 1 GiB are right and reach the bus bandwidth of the links",
              120, judge, child=CHILD, level=3)
