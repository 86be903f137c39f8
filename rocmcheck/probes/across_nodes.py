"""The cross-node collective child: `python -m rocmcheck.probes.across_nodes --request JSON`, one per node, started
by that node's doctor. Imports torch.

1. Rendezvous on the launcher's MASTER_ADDR:MASTER_PORT (a TCPStore: node 0's child hosts it, or torchrun's
   agent already does). Each node posts its host name and its GPU count and waits for every other node; the
   ones that never come are reported by node index and the wait ends at its deadline.
2. One process per local GPU (one CPU process per node without a GPU, over gloo) joins one process group of all
   ranks of all nodes, and measures, with the collective probe's code (collective.measure: exact results,
   nccl-tests' busbw):
   - all-reduce and all-gather over every rank of every node;
   - each node's own GPUs at once (its local busbw, to tell the GPU fabric from the network);
   - with three or more nodes, each neighbouring pair of the ring (0-1, 1-2, ..., n-1 - 0) alone: a node with
     a bad NIC is slow in both of its pairs, its neighbours in only one.
3. Every figure is posted to the store, so every node reports all of them.

Events (rocmcheck/child.py): "start", "joined" {nodes}, "missing" {nodes, waited_s}, "phase" {name},
"result" {outcome: ok|error, data, error}, "done". Every collective has the request's timeout; the parent's own
deadline covers a process that hangs anyway (a wedged NIC)."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from rocmcheck.child import open_channel, read_request
from rocmcheck.probes.collective import failure_event, measure, operands
from rocmcheck.safe.scratch_folders import scratch_folder
from rocmcheck.units import MIB

PROBE = "across_nodes"
PAIR_MIB_FRACTION = 1.0  # pairs use the same buffer as the whole-world test


def ring_pairs(nnodes: int) -> list[tuple[int, int]]:
    """Neighbouring node pairs of the ring; none for fewer than three nodes (the pair would be the whole world)."""
    if nnodes < 3:
        return []
    return [(i, (i + 1) % nnodes) for i in range(nnodes)]


def _store(req: dict[str, Any], is_master: bool, timeout_s: float) -> Any:
    store = dist.TCPStore(req["master_addr"], int(req["master_port"]), is_master=is_master,
                          timeout=timedelta(seconds=timeout_s), wait_for_workers=False)
    return dist.PrefixStore(f"rocmcheck-across/{req.get('run_id') or 'run'}", store)


def _ranks(counts: list[int]) -> list[list[int]]:
    out, start = [], 0
    for c in counts:
        out.append(list(range(start, start + c)))
        start += c
    return out


def worker(local: int, req: dict[str, Any], counts: list[int], result_path: str) -> None:
    node, nnodes = int(req["node_rank"]), int(req["nnodes"])
    timeout_s = float(req.get("timeout", 60.0))
    cpu = bool(req.get("cpu")) or not torch.cuda.is_available()
    device = torch.device("cpu") if cpu else torch.device("cuda", local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    node_ranks = _ranks(counts)
    rank, world = node_ranks[node][local], sum(counts)
    store = _store(req, False, timeout_s)
    dist.init_process_group("gloo" if cpu else "nccl", store=dist.PrefixStore("pg", store), rank=rank,
                            world_size=world, timeout=timedelta(seconds=timeout_s))
    nbytes = int(float(req.get("mib", 64.0)) * MIB)
    try:
        dist.all_reduce(torch.zeros(1, device=device))  # communicators built before anything is timed
        results: dict[str, Any] = {"world": world, "backend": "gloo" if cpu else "nccl"}
        results.update(measure(operands(rank, world, nbytes), world, device))
        # Every node's own GPUs at once: groups are disjoint, so they run side by side.
        groups = [dist.new_group(r) for r in node_ranks]
        mine = node_ranks[node]
        if len(mine) >= 2:
            local_m = measure(operands(local, len(mine), nbytes), len(mine), device, groups[node])
            results["local"] = local_m
        pairs = ring_pairs(nnodes)
        pair_groups = [dist.new_group(node_ranks[a] + node_ranks[b]) for a, b in pairs]  # every rank creates all
        pair_results = {}
        for (a, b), group in zip(pairs, pair_groups):
            members = node_ranks[a] + node_ranks[b]
            if rank in members:
                size = len(members)  # group ranks follow the global ranks' order
                mine_ops = operands(sorted(members).index(rank), size, int(nbytes * PAIR_MIB_FRACTION))
                m = measure(mine_ops, size, device, group)
                pair_results[f"{a}-{b}"] = {"all_reduce": m["all_reduce"]}
            dist.barrier()  # the next pair starts when this one is done everywhere
        if local == 0:
            store.set(f"figures/{node}", json.dumps({"local": results.get("local"), "pairs": pair_results}))
            store.wait([f"figures/{i}" for i in range(nnodes)], timedelta(seconds=timeout_s))
            figures = {i: json.loads(store.get(f"figures/{i}")) for i in range(nnodes)}
            results["nodes"] = {str(i): {"local": f["local"]} for i, f in figures.items()}
            results["pairs"] = {k: v for f in figures.values() for k, v in f["pairs"].items()}
            with open(result_path, "w", encoding="utf-8") as fh:
                json.dump(results, fh)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Request: {"node_rank", "nnodes", "master_addr", "master_port", "agent_store" (torchrun hosts the store),
    "hostname", "run_id", "rendezvous_timeout" (s to wait for every node), "timeout" (s per collective),
    "mib" (buffer per rank), "cpu" (gloo, one process per node, even where GPUs exist)}."""
    req = read_request(argv, prog="python -m rocmcheck.probes.across_nodes")
    channel = open_channel()
    channel.emit("start", probe=PROBE)
    t0 = time.perf_counter()
    node, nnodes = int(req["node_rank"]), int(req["nnodes"])
    wait_s = float(req.get("rendezvous_timeout", 120.0))
    cpu = bool(req.get("cpu")) or not torch.cuda.is_available()
    procs = 1 if cpu else torch.cuda.device_count()
    # Node 0 hosts the store unless torchrun's agent already does on that address.
    store = _store(req, node == 0 and not req.get("agent_store"), wait_s)
    store.set(f"node/{node}", json.dumps({"host": req.get("hostname"), "procs": procs}))
    keys = [f"node/{i}" for i in range(nnodes)]
    try:
        store.wait(keys, timedelta(seconds=wait_s))
    except Exception:  # torch raises DistStoreError (a RuntimeError) at the timeout
        missing = [i for i, k in enumerate(keys) if not store.check([k])]
        channel.emit("missing", nodes=missing, waited_s=wait_s)
        channel.emit("done")
        return 0
    nodes = [json.loads(store.get(k)) for k in keys]
    channel.emit("joined", nodes=nodes)
    counts = [int(n["procs"]) for n in nodes]
    event: dict[str, Any]
    if procs < 1:
        event = {"outcome": "error", "data": {}, "error": "no GPU visible on this node"}
    else:
        with scratch_folder("across") as tmp:
            result_path = os.path.join(tmp, "result.json")
            try:
                mp.start_processes(worker, nprocs=procs, start_method="spawn", join=True,
                                   args=(req, counts, result_path))
                with open(result_path, encoding="utf-8") as fh:
                    data = json.load(fh)
                data["hosts"] = [n.get("host") for n in nodes]
                data["procs"] = counts
                event = {"outcome": "ok", "data": data}
            except Exception as exc:  # a worker raised (NCCL error, collective timeout) or died
                event = failure_event(exc)
    # Node 0 holds the store: it leaves only when every node has finished with it (or a collective's time has
    # passed: a node that is that late is stuck, and its own deadline will tell it).
    store.set(f"finished/{node}", "1")
    if node == 0 and not req.get("agent_store"):
        try:
            store.wait([f"finished/{i}" for i in range(nnodes)], timedelta(seconds=float(req.get("timeout", 60.0))))
        except Exception:
            pass
    channel.emit("result", probe=PROBE, seconds=round(time.perf_counter() - t0, 3), **event)
    channel.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
