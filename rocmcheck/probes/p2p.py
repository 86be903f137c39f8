"""GPU-to-GPU copies, one ordered pair at a time (probe.p2p_matrix's runner), as TransferBench's pair tests do:
each pair copies alone, so a slow link is not hidden by the others sharing the time. Imports torch: runs inside
the probe child; rocmcheck/probes/catalog/p2p_matrix.py judges what it returns.

Per pair (source -> destination): the bandwidth of a large copy (wall clock around a batch, both devices
synchronised), the latency of a small one (copy and synchronise, median), whether the runtime reports peer access
(without it the copy is staged through host memory), and whether the bytes arrived as sent (the destination
compares them with the same pattern made on its own device)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from rocmcheck.units import KIB, MIB

PAIR_BYTES = 256 * MIB  # large enough that launch and synchronisation costs vanish against the transfer
LATENCY_BYTES = 4 * KIB
ITERS = 10
LATENCY_ITERS = 50


def _sync(*devices: torch.device) -> None:
    for d in devices:
        if d.type == "cuda":
            torch.cuda.synchronize(d)


def _pattern(n: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(n, device=device, dtype=torch.int32) % 251).to(torch.uint8)


def _peer(a: torch.device, b: torch.device) -> bool | None:
    if a.type != "cuda" or b.type != "cuda":
        return None
    return bool(torch.cuda.can_device_access_peer(a.index, b.index))


def copy_pair(src_dev: torch.device, dst_dev: torch.device, nbytes: int = PAIR_BYTES, iters: int = ITERS,
              latency_iters: int = LATENCY_ITERS) -> dict[str, Any]:
    src = _pattern(nbytes, src_dev)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dst_dev)
    for _ in range(2):
        dst.copy_(src, non_blocking=True)
    _sync(src_dev, dst_dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        dst.copy_(src, non_blocking=True)
    _sync(src_dev, dst_dev)
    seconds = (time.perf_counter() - t0) / iters
    ok = bool(torch.equal(dst, _pattern(nbytes, dst_dev)))
    del src, dst
    small_src = _pattern(LATENCY_BYTES, src_dev)
    small_dst = torch.empty(LATENCY_BYTES, dtype=torch.uint8, device=dst_dev)
    times = []
    for _ in range(latency_iters):
        t1 = time.perf_counter()
        small_dst.copy_(small_src, non_blocking=True)
        _sync(src_dev, dst_dev)
        times.append(time.perf_counter() - t1)
    return {"gbps": nbytes / seconds / 1e9 if seconds > 0 else None, "latency_us": statistics.median(times) * 1e6,
            "ok": ok, "peer_access": _peer(src_dev, dst_dev), "bytes": nbytes}


def pair_matrix(devices: list[torch.device], nbytes: int = PAIR_BYTES, iters: int = ITERS,
                latency_iters: int = LATENCY_ITERS) -> list[dict[str, Any]]:
    """Every ordered pair of the devices, one after the other."""
    pairs = []
    for i, a in enumerate(devices):
        for j, b in enumerate(devices):
            if i != j:
                pairs.append({"src": i, "dst": j, **copy_pair(a, b, nbytes, iters, latency_iters)})
                if a.type == "cuda":
                    torch.cuda.empty_cache()
    return pairs
