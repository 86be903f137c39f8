"""doctor's cross-node stage (`--across-nodes`), parent side: starts the across_nodes child on the launcher's
rendezvous, and turns what it said - figures, nodes that never came, an error, a hang - into the verdict
`cluster.collective`. Whatever happens ends within the stage's deadline: a hung NIC is a verdict, not a hung job.
No torch here."""

from __future__ import annotations

from typing import Any

from rocmcheck.child import child_env, run_child
from rocmcheck.facts.launch import Launch
from rocmcheck.fixes import BUG_FIX, Fix, note, shell
from rocmcheck.outliers import SLOW_FRACTION, slow_nodes
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

CHECK_ID = "cluster.collective"
CHILD = "rocmcheck.probes.across_nodes"
DEFAULT_TIMEOUT_S = 180.0
# Of the stage's deadline: the part spent waiting for the other nodes to arrive (their doctors start the stage at
# different times: fact collection alone may take its whole 60 s deadline on one node), and the limit of each
# collective (a 64 MiB all-reduce takes milliseconds on a working network; minutes means it hangs).
RENDEZVOUS_SHARE = 0.5
COLLECTIVE_SHARE = 0.25
GPU_MIB = 64.0  # per rank: large enough for busbw to reach its plateau over RoCE/IB, small enough for 16 x 8 ranks
CPU_MIB = 1.0
NET_WHY = ("the log names the NIC and transport each node picked; check ibv_devinfo (PORT_ACTIVE, rate) and "
           "NCCL_IB_HCA / NCCL_SOCKET_IFNAME on {nodes}")
RANK_FIX = note("tell every node its place: export NODE_RANK (this node's index, from 0) and NNODES (the node "
                "count) the same way on every node, or launch with srun / torchrun")
MASTER_FIX = note("export MASTER_ADDR (the first node's host name) and MASTER_PORT (29500 unless taken), the same "
                  "on every node, or launch with srun / torchrun, which set them")


def net_fix(nodes: str) -> Fix:
    """The cross-node debug run: NCCL's INIT/NET log on every node, each node's bundle kept."""
    return shell("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET rocmcheck doctor --across-nodes "
                 "--bundle-dir rocmcheck-bundles", NET_WHY.format(nodes=nodes))


def _host(hosts: list[Any], i: int) -> str:
    return str(hosts[i]) if i < len(hosts) and hosts[i] else f"node {i}"


def judge_cross_node(data: dict[str, Any], node_rank: int) -> CheckResult:
    """The figures every node reported -> one verdict, the same on every node, plus this node's own figures
    (data["node"]) that compare sets side by side."""
    hosts = list(data.get("hosts") or [])
    world, nnodes = data["world"], len(data.get("procs") or hosts)
    evidence, wrong = [], []
    for op in ("all_reduce", "all_gather"):
        r = data[op]
        evidence.append(f"all nodes, {op}: {'right' if r['ok'] else 'WRONG'} result, {r['bytes'] / 1e6:.0f} MB, "
                        f"busbw {r['busbw_gbps']:.1f} GB/s")
        if not r["ok"]:
            wrong.append(f"{op} over all nodes")
    local = {}
    for idx, entry in (data.get("nodes") or {}).items():
        ar = ((entry or {}).get("local") or {}).get("all_reduce")
        if ar:
            local[_host(hosts, int(idx))] = ar["busbw_gbps"]
            if not ar["ok"]:
                wrong.append(f"all-reduce among {_host(hosts, int(idx))}'s own GPUs")
    pairs: dict[str, float] = {}
    best: dict[str, float] = {}
    for key, entry in (data.get("pairs") or {}).items():
        a, b = (int(x) for x in key.split("-"))
        ar = entry["all_reduce"]
        name = f"{_host(hosts, a)}-{_host(hosts, b)}"
        pairs[name] = ar["busbw_gbps"]
        evidence.append(f"pair {name}: all-reduce {'right' if ar['ok'] else 'WRONG'}, "
                        f"busbw {ar['busbw_gbps']:.1f} GB/s")
        if not ar["ok"]:
            wrong.append(f"all-reduce between {name}")
        for n in (a, b):
            best[_host(hosts, n)] = max(best.get(_host(hosts, n), 0.0), ar["busbw_gbps"])
    evidence += [f"{h}: its own GPUs' all-reduce busbw {v:.1f} GB/s" for h, v in local.items()]
    me = _host(hosts, node_rank)
    info = dict(world=world, nodes=nnodes, backend=data.get("backend"), hosts=hosts, procs=data.get("procs"),
                all_reduce=data["all_reduce"], all_gather=data["all_gather"], pairs=pairs,
                local_busbw=local, node={"index": node_rank, "host": me, "best_pair_busbw_gbps": best.get(me),
                                         "local_busbw_gbps": local.get(me)})
    if wrong:
        return failed(f"{'; '.join(wrong)} returned wrong data", net_fix("every node"), evidence,
                      id=CHECK_ID, **info)
    # A node whose best pair is slow: both of its links to its neighbours are slow, so the fault is its own.
    slow, ref = slow_nodes(best, SLOW_FRACTION["cross_best_pair_busbw"]) if len(best) >= 3 else ([], 0.0)
    slow_local, ref_local = slow_nodes(local, SLOW_FRACTION["cross_local_busbw"]) if len(local) >= 3 else ([], 0.0)
    ar = data["all_reduce"]
    head = (f"all-reduce and all-gather right across {nnodes} nodes ({world} ranks, {data.get('backend')}); "
            f"all-reduce busbw {ar['busbw_gbps']:.1f} GB/s")
    if slow or slow_local:
        parts = []
        if slow:
            parts.append("slow network at " + ", ".join(f"{h} ({best[h]:.1f} GB/s in its best pair)" for h in slow)
                         + f" against a median {ref:.1f} GB/s")
        if slow_local:
            parts.append("slow among its own GPUs: " + ", ".join(f"{h} ({local[h]:.1f} GB/s)" for h in slow_local)
                         + f" against a median {ref_local:.1f} GB/s")
        return warned(f"{head}, but {'; '.join(parts)}", net_fix(", ".join(slow + slow_local)),
                      evidence, id=CHECK_ID, slow_nodes=slow + slow_local, **info)
    return passed(head, evidence, id=CHECK_ID, **info)


def stage_request(launch: Launch, timeout_s: float, cpu: bool) -> dict[str, Any]:
    return {"node_rank": launch.node_rank, "nnodes": launch.nnodes, "master_addr": launch.master_addr,
            "master_port": launch.master_port, "agent_store": launch.agent_store, "hostname": launch.hostname,
            "run_id": launch.job_id or "run", "rendezvous_timeout": timeout_s * RENDEZVOUS_SHARE,
            "timeout": timeout_s * COLLECTIVE_SHARE, "mib": CPU_MIB if cpu else GPU_MIB, "cpu": cpu}


def run_cross_node_stage(launch: Launch | None, timeout_s: float = DEFAULT_TIMEOUT_S, cpu: bool = False,
                         python: str | None = None) -> list[CheckResult]:
    """One verdict, `cluster.collective`. cpu=True: one gloo process per node (a machine without GPUs, tests)."""
    if launch is None or launch.node_rank is None or launch.nnodes is None:
        return [skipped("cross-node collective skipped: no launcher told this process its node rank "
                        "(run it under srun, torchrun, the DeepSpeed launcher or mpirun; pdsh gives no rank)",
                        id=CHECK_ID)]
    if launch.problems:
        return [failed(f"cross-node collective not run: {'; '.join(launch.problems)}", RANK_FIX, id=CHECK_ID)]
    if launch.nnodes < 2:
        return [skipped("cross-node collective skipped: one node in this launch (probe.collective covers its GPUs)",
                        id=CHECK_ID)]
    if not launch.master_addr or launch.master_port is None:
        return [failed(f"cross-node collective not run: {launch.launcher} gave no MASTER_ADDR to meet at",
                       MASTER_FIX, id=CHECK_ID)]
    request = stage_request(launch, timeout_s, cpu)
    run = run_child(CHILD, request, timeout_s, env=child_env(), python=python)
    where = f"{launch.master_addr}:{launch.master_port}"
    missing = run.last("missing")
    if missing is not None:
        nodes = ", ".join(str(n) for n in missing.get("nodes", []))
        return [failed(f"node(s) {nodes} of {launch.nnodes} never joined the rendezvous at {where} within "
                       f"{missing.get('waited_s', 0):g} s",
                       shell("nc -zv {addr} {port}", "run it on the missing nodes: the rendezvous must be reachable "
                             "from them, and the launcher must start the same doctor command on every node",
                             addr=launch.master_addr, port=launch.master_port),
                       [f"stderr: {line}" for line in run.stderr_tail()], id=CHECK_ID,
                       missing_nodes=missing.get("nodes"),
                       node={"index": launch.node_rank, "host": launch.hostname})]
    result = run.last("result")
    if result is not None and result.get("outcome") == "ok":
        try:
            return [judge_cross_node(result["data"], launch.node_rank)]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return [failed(f"cross-node collective: rocmcheck could not read its figures ({type(exc).__name__}: {exc})",
                           BUG_FIX, id=CHECK_ID)]
    joined = run.last("joined")
    hosts = [n.get("host") for n in (joined or {}).get("nodes", [])]
    node_info = {"index": launch.node_rank, "host": launch.hostname}
    if result is not None:
        return [failed(f"cross-node collective failed across {launch.nnodes} nodes: {result.get('error')}",
                       net_fix("every node"), list(result.get("traceback") or [])[-5:], id=CHECK_ID,
                       hosts=hosts, node=node_info)]
    if run.hung:
        stage = f"after all {launch.nnodes} nodes joined" if joined else "before every node had joined"
        return [failed(f"cross-node collective hung: no answer within {timeout_s:g} s ({stage}); a NIC, a switch port "
                       "or a firewall between nodes stops the traffic", net_fix("every node"),
                       [f"stderr: {line}" for line in run.stderr_tail()], id=CHECK_ID, hung=True, timeout_s=timeout_s,
                       hosts=hosts, node=node_info)]
    return [failed(f"cross-node collective died: {run.command.describe_failure()}", net_fix("every node"),
                   [f"stderr: {line}" for line in run.stderr_tail()], id=CHECK_ID, node=node_info)]
