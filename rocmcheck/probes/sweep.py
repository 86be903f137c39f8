"""The collective sweep child: `python -m rocmcheck.probes.sweep --request-file FILE` (the runner of
probe.collective_sweep, judged in rocmcheck/probes/catalog/collective_sweep.py). One process per GPU, as
rocmcheck/probes/collective.py starts them (two gloo processes in CPU test mode); the same request and go file.

All-reduce and all-gather over message sizes from 8 B doubling up to the largest (1 GiB by default), as
rccl-tests / nccl-tests sweep them (-b 8 -e 1G -f 2): at each size the result is checked exactly once, then
timed over a batch (a warm-up, then ITERS calls between two events) and turned into algbw / busbw with their
formulas. For all-gather the size is the whole gathered buffer, as there. Values are integers times small
factors, so every sum is exact in fp32 and the expected result is known without the other ranks' data.
Rank 0 also reads the link topology (rocmcheck/probes/links.py) while the others set up, and the launcher
records the NCCL transport variables the ranks ran with. Imports torch."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rocmcheck.child import open_channel, read_request
from rocmcheck.facts.parsers.nccl_env import transport_settings
from rocmcheck.probes.catalog.collective import bus_bandwidth_gbps
from rocmcheck.probes.collective import _all_gather, failure_event
from rocmcheck.safe.scratch_folders import scratch_folder
from rocmcheck.units import MIB

PROBE = "collective_sweep"
SMALLEST_BYTES = 8
DEFAULT_LARGEST_MIB = 1024.0  # 1 GiB, rccl-tests' -e 1G
WARMUP = 5  # nccl-tests' -w default
ITERS = 20  # nccl-tests' -n default
MAX_POINTS = 40  # sizes kept at most (8 B .. 4 TiB doubling): a request for more is bounded here
_PERIOD = 251  # values cycle through -125 .. 125


def sizes(largest_bytes: int) -> list[int]:
    out, size = [], SMALLEST_BYTES
    while size <= largest_bytes and len(out) < MAX_POINTS:
        out.append(size)
        size *= 2
    return out


def _base(n: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(n, device=device, dtype=torch.int64) % _PERIOD - _PERIOD // 2).to(torch.float32)


def _batch_seconds(fn, device: torch.device, iters: int) -> float:
    """Seconds per call over a batch, every rank starting together."""
    for _ in range(WARMUP):
        fn()
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def measure_sweep(rank: int, world: int, device: torch.device, points: list[int], iters: int = ITERS
                  ) -> list[dict[str, Any]]:
    base = _base(max(points) // 4 + world, device)
    rows: list[dict[str, Any]] = []
    for size in points:
        n = max(1, size // 4)
        buf = base[:n] * (rank + 1)
        dist.all_reduce(buf)
        ok = bool(torch.equal(buf, base[:n] * (world * (world + 1) // 2)))
        buf.zero_()  # timed on zeros: repeated sums never overflow
        seconds = _batch_seconds(lambda: dist.all_reduce(buf), device, iters)
        algbw, busbw = bus_bandwidth_gbps("all_reduce", n * 4, seconds, world)
        rows.append({"op": "all_reduce", "bytes": n * 4, "ok": ok, "us": seconds * 1e6, "algbw_gbps": algbw,
                     "busbw_gbps": busbw})
        piece = size // 4 // world
        if piece < 1:
            continue
        mine = base[:piece] * (rank + 1)
        out = torch.full((piece * world,), float("nan"), device=device)
        _all_gather(out, mine)
        ok = bool(torch.equal(out, torch.cat([base[:piece] * (r + 1) for r in range(world)])))
        seconds = _batch_seconds(lambda: _all_gather(out, mine), device, iters)
        algbw, busbw = bus_bandwidth_gbps("all_gather", piece * world * 4, seconds, world)
        rows.append({"op": "all_gather", "bytes": piece * world * 4, "ok": ok, "us": seconds * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": busbw})
    return rows


def _topology(device: torch.device) -> dict[str, Any]:
    from rocmcheck.probes.links import topology_of, torch_bus_id

    if device.type != "cuda":
        return {"kinds": {}, "why_not_known": "CPU test mode (gloo)"}
    count = torch.cuda.device_count()
    buses = [torch_bus_id(torch.cuda.get_device_properties(i)) for i in range(count)]
    return topology_of("amd" if torch.version.hip else "nvidia", buses, os.environ)


def worker(rank: int, world: int, backend: str, init_file: str, timeout_s: float, largest: int,
           result_path: str) -> None:
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
    try:
        dist.all_reduce(torch.zeros(1, device=device))  # communicators built before go
        links = _topology(device) if rank == 0 else None
        t0 = time.perf_counter()
        rows = measure_sweep(rank, world, device, sizes(largest))
        if rank == 0:
            with open(result_path, "w", encoding="utf-8") as fh:
                json.dump({"world": world, "backend": backend, "rows": rows, "links": links,
                           "sweep_s": round(time.perf_counter() - t0, 3)}, fh)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Request: as rocmcheck/probes/collective.py's ("world", "backend", "timeout"); "mib" is the
    largest size here (MiB)."""
    request = read_request(argv, prog="python -m rocmcheck.probes.sweep")
    world = int(request.get("world", 0)) or torch.cuda.device_count()
    backend = request.get("backend", "nccl")
    timeout_s = float(request.get("timeout", 120.0))
    largest = int(float(request.get("mib", DEFAULT_LARGEST_MIB)) * MIB)
    channel = open_channel()
    channel.emit("start", probe=PROBE)
    t0 = time.perf_counter()
    if world < 2:
        channel.emit("result", probe=PROBE, seconds=0.0, outcome="skip", data={"world": world},
                     reason=f"{world} GPU visible, no collective to sweep")
        channel.emit("done")
        return 0
    settings = [{"name": s.name, "value": s.value, "turns_off": s.turns_off, "meaning": s.meaning}
                for s in transport_settings(os.environ)]
    with scratch_folder("sweep") as tmp:
        result_path = os.path.join(tmp, "result.json")
        try:
            mp.start_processes(worker, nprocs=world, start_method="spawn", join=True,
                               args=(world, backend, os.path.join(tmp, "init"), timeout_s, largest, result_path))
            with open(result_path, encoding="utf-8") as fh:
                data = json.load(fh)
            data["transport_env"] = settings
            event = {"outcome": "ok", "data": data}
        except Exception as exc:  # a rank raised (NCCL error, timeout) or died
            event = failure_event(exc)
    channel.emit("result", probe=PROBE, seconds=round(time.perf_counter() - t0, 3), **event)
    channel.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
