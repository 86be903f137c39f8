"""The collective probe child: `python -m rocmcheck.probes.collective --request-file FILE` (the runner of
probe.collective, defined and judged in rocmcheck/probes/catalog/collective.py).
Spawns one process per GPU, checks all-reduce and all-gather results exactly, and times them like
nccl-tests/rccl-tests (algbw, busbw). Speaks the probes' events (protocol.py) through rocmcheck/child.py.
Imports torch."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

_IMPORT_START = time.perf_counter()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

_IMPORTED_AT = time.perf_counter()
_IMPORT_S = _IMPORTED_AT - _IMPORT_START

from rocmcheck.child import open_channel, read_request
from rocmcheck.probes.catalog.collective import bus_bandwidth_gbps
from rocmcheck.safe.scratch_folders import scratch_folder
from rocmcheck.units import MIB

PROBE = "collective"


def _values(rank: int, n: int, device: torch.device) -> torch.Tensor:
    """Integer-valued floats, different on every rank: sums stay exact, so the check is equality."""
    gen = torch.Generator().manual_seed(1234 + rank)
    return torch.randint(-1000, 1000, (n,), generator=gen).to(torch.float32).to(device)


def _timed(fn, device: torch.device, iters: int, group: Any = None) -> float:
    """Median seconds per call, every rank of the group in step (barrier before each timed call)."""
    times = []
    for _ in range(iters):
        dist.barrier(group=group)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _all_gather(out: torch.Tensor, inp: torch.Tensor, group: Any = None) -> None:
    # torch 2.13 deprecates all_gather_into_tensor for all_gather_single; older torch has only the former.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, inp, group=group)


def operands(rank: int, world: int, nbytes: int) -> dict[str, Any]:
    """This rank's inputs and the exact expected outputs (CPU tensors) for an all-reduce and an all-gather of
    about nbytes per rank over `world` ranks; rank is the rank within the group measured."""
    n = max(world, nbytes // 4 // world * world)  # divisible by world for all-gather
    piece = n // world
    cpu = torch.device("cpu")
    return {"n": n, "piece": piece, "x": _values(rank, n, cpu),
            "expected": sum(_values(r, n, cpu) for r in range(world)),
            "mine": _values(rank, piece, cpu), "gathered": torch.cat([_values(r, piece, cpu) for r in range(world)])}


def measure(ops: dict[str, Any], world: int, device: torch.device, group: Any = None, iters: int = 5) -> dict[str, Any]:
    """All-reduce then all-gather over the group (None: every rank), each result compared exactly with the
    expected one, each timed (median of iters) and turned into algbw / busbw as nccl-tests does."""
    n, piece = ops["n"], ops["piece"]
    x = ops["x"].to(device)
    dist.all_reduce(x, group=group)
    ok = bool(torch.equal(x.cpu(), ops["expected"]))
    seconds = _timed(lambda: dist.all_reduce(x, group=group), device, iters, group)
    algbw, busbw = bus_bandwidth_gbps("all_reduce", n * 4, seconds, world)
    out: dict[str, Any] = {"all_reduce": {"ok": ok, "bytes": n * 4, "ms": seconds * 1e3, "algbw_gbps": algbw,
                                          "busbw_gbps": busbw}}
    mine = ops["mine"].to(device)
    gathered = torch.full((piece * world,), float("nan"), device=device)
    _all_gather(gathered, mine, group)
    ok = bool(torch.equal(gathered.cpu(), ops["gathered"]))
    seconds = _timed(lambda: _all_gather(gathered, mine, group), device, iters, group)
    algbw, busbw = bus_bandwidth_gbps("all_gather", piece * world * 4, seconds, world)
    out["all_gather"] = {"ok": ok, "bytes": piece * world * 4, "ms": seconds * 1e3, "algbw_gbps": algbw,
                         "busbw_gbps": busbw}
    return out


def worker(rank: int, world: int, backend: str, init_file: str, timeout_s: float, nbytes: int, result_path: str,
           launched_at: float = 0.0) -> None:
    phases = {"worker_started": round(time.time() - launched_at, 2)}
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
    try:
        # Build the NCCL/RCCL communicators now (a 1-element all-reduce: seconds of set-up, no real traffic),
        # so after "go" only the measured collectives remain.
        dist.all_reduce(torch.zeros(1, device=device))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        # The operands and the expected results, on the CPU before "go": generating 256 MiB of random
        # integers per rank takes seconds of CPU and must not sit between "go" and the measurement.
        ops = operands(rank, world, nbytes)
        phases["ready"] = round(time.time() - launched_at, 2)
        phases["go"] = round(time.time() - launched_at, 2)
        result: dict[str, Any] = {"world": world, "backend": backend}
        result.update(measure(ops, world, device))
        phases["measured"] = round(time.time() - launched_at, 2)
        result["phases"] = phases  # where the probe's seconds go (wall clock, from the launcher's start)
        if rank == 0:
            with open(result_path, "w", encoding="utf-8") as fh:
                json.dump(result, fh)
    finally:
        dist.destroy_process_group()


def failure_event(exc: BaseException) -> dict:
    """The result event of a multi-process run whose worker raised or died: the error's last line (what
    torch.multiprocessing carries back from the worker) and its last lines as the traceback."""
    lines = str(exc).strip().splitlines()
    return {"outcome": "error", "data": {}, "error": f"{type(exc).__name__}: {lines[-1][:400] if lines else ''}",
            "traceback": lines[-8:]}


def main(argv: list[str] | None = None) -> int:
    """Request: {"world": ranks (0 = one per visible GPU), "backend": "nccl"|"gloo", "timeout": s per collective,
    "mib": buffer per rank}."""
    request = read_request(argv, prog="python -m rocmcheck.probes.collective")
    args = argparse.Namespace(world=int(request.get("world", 0)),
                              backend=request.get("backend", "nccl"), timeout=float(request.get("timeout", 60.0)),
                              mib=float(request.get("mib", 256.0)))
    channel = open_channel()
    channel.emit("start", probe=PROBE)
    t0 = time.perf_counter()
    launched_at = time.time() - (time.perf_counter() - _IMPORTED_AT) - _IMPORT_S
    world = args.world or torch.cuda.device_count()
    if world < 2:
        channel.emit("result", probe=PROBE, seconds=0.0, outcome="skip", data={"world": world},
                     reason=f"{world} GPU visible, nothing to all-reduce across")
        channel.emit("done")
        return 0
    with scratch_folder("collective") as tmp:
        result_path = os.path.join(tmp, "result.json")
        try:
            mp.start_processes(worker, nprocs=world, start_method="spawn", join=True,
                               args=(world, args.backend, os.path.join(tmp, "init"), args.timeout,
                                     int(args.mib * MIB), result_path, launched_at))
            with open(result_path, encoding="utf-8") as fh:
                event = {"outcome": "ok", "data": json.load(fh)}
        except Exception as exc:  # a worker raised (NCCL error, timeout) or died
            event = failure_event(exc)
    channel.emit("result", probe=PROBE, seconds=round(time.perf_counter() - t0, 3), **event)
    channel.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
