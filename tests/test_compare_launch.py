"""Which node am I: the launchers' variables (as each launcher sets them, from its source or seen under a real
launcher), the per-node doctor under a real torchrun, and the cross-node collective between CPU "nodes"."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from rocmcheck.facts.launch import DEFAULT_MASTER_PORT, Launch, first_host, node_per_rank, read_launch, visible_for_rank
from rocmcheck.probes.across import judge_cross_node, run_cross_node_stage

# What srun -N2 --ntasks-per-node=8 gives task 11 (Slurm 22.05 seen here under srun -N1 -n2, scaled to two nodes).
SLURM = {"SLURM_JOB_ID": "4211", "SLURM_STEP_ID": "0", "SLURM_PROCID": "11", "SLURM_LOCALID": "3",
         "SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "16",
         "SLURM_NTASKS": "16", "SLURM_STEP_TASKS_PER_NODE": "8(x2)", "SLURM_STEP_NODELIST": "gpu-[007-008]",
         "SLURM_JOB_NODELIST": "gpu-[007-008]"}
# torchrun's agent (local_elastic_agent.py) for node 1 of 2 with 8 processes each, c10d rendezvous.
TORCHRUN = {"RANK": "9", "LOCAL_RANK": "1", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "8",
            "WORLD_SIZE": "16", "MASTER_ADDR": "gpu-007", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "doc1",
            "TORCHELASTIC_USE_AGENT_STORE": "True"}
# deepspeed/launcher/launch.py on the second host of a two-host hostfile.
DEEPSPEED = {"RANK": "8", "LOCAL_RANK": "0", "CROSS_RANK": "1", "CROSS_SIZE": "2", "LOCAL_SIZE": "8",
             "WORLD_SIZE": "16", "MASTER_ADDR": "gpu-007", "MASTER_PORT": "29500"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "MASTER_ADDR": "gpu-007"}
HYDRA = {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"}


def test_slurm_task_knows_its_node_and_the_first_host_is_the_rendezvous():
    launch = read_launch(SLURM, "gpu-008")
    assert (launch.launcher, launch.node_rank, launch.nnodes, launch.rank, launch.world_size) == ("slurm", 1, 2, 11, 16)
    assert (launch.local_rank, launch.local_world_size, launch.leads_node) == (3, 8, False)
    assert (launch.master_addr, launch.master_port, launch.job_id) == ("gpu-007", DEFAULT_MASTER_PORT, "4211")
    assert launch.can_rendezvous
    # An sbatch script's own shell has SLURM_PROCID etc. but no step id (seen with Slurm 22.05): not a task.
    batch = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_ID"}
    assert read_launch(batch, "gpu-007").launcher == "none"


def test_torchrun_inside_srun_is_read_as_torchrun():
    launch = read_launch({**SLURM, **TORCHRUN}, "gpu-008")
    assert (launch.launcher, launch.node_rank, launch.nnodes, launch.local_rank) == ("torchrun", 1, 2, 1)
    assert launch.agent_store and launch.master_port == 29500 and launch.job_id == "4211"


def test_deepspeed_openmpi_and_hydra():
    ds = read_launch(DEEPSPEED, "gpu-008")
    assert (ds.launcher, ds.node_rank, ds.nnodes, ds.leads_node, ds.agent_store) == ("deepspeed", 1, 2, True, False)
    ompi = read_launch(OPENMPI, "gpu-008")  # mpirun -npernode 1: the node is the rank
    assert (ompi.launcher, ompi.node_rank, ompi.nnodes, ompi.leads_node) == ("openmpi", 1, 2, True)
    hydra = read_launch(HYDRA, "n2")  # 4 ranks per node, block mapping
    assert (hydra.launcher, hydra.node_rank, hydra.nnodes, hydra.local_rank) == ("mpich", 1, 2, 1)
    assert hydra.master_addr is None and not hydra.can_rendezvous


def test_no_launcher_and_bad_values():
    alone = read_launch({}, "box")
    assert (alone.launcher, alone.node_rank, alone.nnodes, alone.leads_node) == ("none", 0, 1, True)
    odd = read_launch({**TORCHRUN, "GROUP_RANK": "5"}, "x")
    assert odd.problems == ("node rank 5 is outside 0..1",) and not odd.can_rendezvous
    uneven = read_launch({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, "x")
    assert uneven.node_rank is None and "NODE_RANK" in uneven.problems[0]
    fixed = read_launch({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                         "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "NODE_RANK": "1", "NNODES": "2"}, "x")
    assert (fixed.node_rank, fixed.nnodes, fixed.problems) == (1, 2, ())
    assert read_launch({"RANK": "x", "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": "r"}, "x").rank == 0  # never raises


def test_slurm_hostlists():
    assert first_host("gpu-[003-005,9],cpu1") == "gpu-003"
    assert first_host("node17") == "node17"
    assert first_host("") is None
    assert first_host("a[1-2]-ib,b3") == "a1-ib"


def test_stand_in_nodes_get_their_own_gpu_and_node_rank():
    assert visible_for_rank({}, 1) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert visible_for_rank({"CUDA_VISIBLE_DEVICES": "4,5"}, 1) == {"CUDA_VISIBLE_DEVICES": "5"}
    assert visible_for_rank({"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0,1"}, 1) == {
        "ROCR_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "0"}
    launch = node_per_rank(read_launch(TORCHRUN, "box"))
    assert (launch.hostname, launch.node_rank, launch.nnodes, launch.leads_node) == ("box-rank9", 9, 16, True)


def test_torchrun_really_sets_what_is_read(tmp_path):
    """Two processes under a real torchrun: each reads its own rank, torchrun's store and run id. Each rank writes
    its own file: two ranks printing to one pipe at once can interleave their lines."""
    code = ("import os, sys, json, platform; from rocmcheck.facts.launch import read_launch; "
            "open(os.path.join(sys.argv[1], os.environ['RANK'] + '.json'), 'w').write("
            "json.dumps(read_launch(os.environ, platform.node()).to_dict()))")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                           "--no-python", sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    seen = sorted((json.loads(p.read_text()) for p in tmp_path.glob("*.json")), key=lambda d: d["rank"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [(d["launcher"], d["rank"], d["local_rank"], d["node_rank"], d["nnodes"]) for d in seen] == [
        ("torchrun", 0, 0, 0, 1), ("torchrun", 1, 1, 0, 1)]
    assert all(d["master_addr"] and d["master_port"] and d["agent_store"] for d in seen)


# ------------------------------------------------------------------------------------------ cross-node

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nodes(n: int) -> list[Launch]:
    port = _free_port()
    return [Launch("slurm", f"n{i}", node_rank=i, nnodes=n, rank=i, world_size=n, master_addr="127.0.0.1",
                   master_port=port, job_id="t") for i in range(n)]


def test_cross_node_collective_between_three_cpu_nodes():
    """Three children, one per "node", meet on one TCPStore and run real gloo collectives, the ring pairs too."""
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda l: run_cross_node_stage(l, timeout_s=90, cpu=True)[0], _nodes(3)))
    for i, r in enumerate(results):
        # pass, or warn when the shared CI box slowed one pair: speed on 2 busy cores is not judged here.
        assert r.id == "cluster.collective" and r.status.value in ("pass", "warn"), r.summary
        assert r.summary.startswith("all-reduce and all-gather right across 3 nodes (3 ranks, gloo)")
        assert r.data["nodes"] == 3 and r.data["hosts"] == ["n0", "n1", "n2"] and r.data["all_reduce"]["ok"]
        assert set(r.data["pairs"]) == {"n0-n1", "n1-n2", "n2-n0"}
        assert r.data["node"]["index"] == i and r.data["node"]["best_pair_busbw_gbps"] > 0


def test_a_node_that_never_comes_is_named_within_the_deadline():
    only_first = _nodes(2)[0]
    r = run_cross_node_stage(only_first, timeout_s=16, cpu=True)[0]
    assert r.status.value == "fail" and r.data["missing_nodes"] == [1]
    assert "node(s) 1 of 2 never joined the rendezvous at 127.0.0.1:" in r.summary and "nc -zv" in r.fix.text


def test_a_node_that_joins_then_goes_silent_ends_as_a_verdict():
    """Node 1 answers the rendezvous, then never joins the process group (a node wedged after start-up): node 0
    ends with a failed verdict within its deadline instead of waiting forever."""
    from datetime import timedelta

    import torch.distributed as dist

    first, _second = _nodes(2)

    def ghost() -> None:
        store = dist.TCPStore("127.0.0.1", first.master_port, is_master=False, timeout=timedelta(seconds=30))
        dist.PrefixStore("rocmcheck-across/t", store).set("node/1", json.dumps({"host": "n1", "procs": 1}))

    with ThreadPoolExecutor(2) as pool:
        ghost_done = pool.submit(ghost)
        r = run_cross_node_stage(first, timeout_s=30, cpu=True)[0]
        ghost_done.result()
    assert r.status.value == "fail" and r.data["hosts"] == ["n0", "n1"], r.summary
    # gloo gives up on the missing rank (an error) or the child's deadline ends it (a hang): a verdict either way.
    assert (r.summary.startswith("cross-node collective failed across 2 nodes")
            or "hung: no answer within 30 s (after all 2 nodes joined)" in r.summary), r.summary
    assert "NCCL_DEBUG=INFO" in r.fix.text


def test_no_rank_no_rendezvous():
    assert run_cross_node_stage(read_launch({}, "box"))[0].status.value == "skip"  # one node
    pdsh_like = Launch("none", "box", node_rank=None, nnodes=None)
    assert "no launcher told this process its node rank" in run_cross_node_stage(pdsh_like)[0].summary
    hydra = read_launch(HYDRA, "n2")
    r = run_cross_node_stage(hydra)[0]
    assert r.status.value == "fail" and "MASTER_ADDR" in r.fix.text


def _pair(busbw: float) -> dict:
    return {"all_reduce": {"ok": True, "bytes": 67108864, "ms": 1.0, "algbw_gbps": busbw / 1.5, "busbw_gbps": busbw}}


def test_cross_node_judge_names_the_node_slow_in_both_its_pairs():
    op = {"ok": True, "bytes": 67108864, "ms": 4.0, "algbw_gbps": 20.0, "busbw_gbps": 35.0}
    data = {"world": 32, "backend": "nccl", "hosts": ["a", "b", "c", "d"], "procs": [8, 8, 8, 8],
            "all_reduce": op, "all_gather": op,
            "nodes": {str(i): {"local": {"all_reduce": _pair(300.0)["all_reduce"]}} for i in range(4)},
            # c's NIC is slow: both pairs with c crawl; its neighbours b and d each have one good pair.
            "pairs": {"0-1": _pair(45.0), "1-2": _pair(11.0), "2-3": _pair(10.5), "3-0": _pair(44.0)}}
    r = judge_cross_node(data, 2)
    assert r.status.value == "warn" and r.data["slow_nodes"] == ["c"] and "slow network at c" in r.summary
    assert r.data["node"] == {"index": 2, "host": "c", "best_pair_busbw_gbps": 11.0, "local_busbw_gbps": 300.0}
    data["pairs"]["1-2"]["all_reduce"]["ok"] = False
    assert judge_cross_node(data, 0).status.value == "fail"
