"""Which node am I? The node rank, node count and rendezvous a launcher gave this process, read from the
variables each launcher sets. Pure: the environment and host name go in, a Launch comes out; never raises.

The innermost launcher wins: torchrun started by srun sees both torchrun's and Slurm's variables, and its
own ranks are torchrun's. Sources (the variable names as the launchers set them):
- torchrun (torch.distributed.elastic agent): RANK, LOCAL_RANK, GROUP_RANK (the node), GROUP_WORLD_SIZE,
  LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE.
- DeepSpeed launcher (deepspeed/launcher/launch.py): RANK, LOCAL_RANK, CROSS_RANK (the node), CROSS_SIZE,
  LOCAL_SIZE, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
- Open MPI's mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE (no node index: with the
  default by-slot mapping the node is rank // local size).
- MPICH / Intel MPI (Hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS; PMIx: PMIX_RANK.
- Slurm's srun: SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_NODES (SLURM_NNODES),
  SLURM_STEP_NUM_TASKS (SLURM_NTASKS), SLURM_STEP_NODELIST (SLURM_JOB_NODELIST), SLURM_JOB_ID. Only a task of a
  step has SLURM_STEP_ID: the batch script's own shell has the SLURM_PROCID=0 family without it (Slurm 22.05).
- pdsh sets nothing: each host runs the command once and the host name tells the nodes apart; without a
  rank there is no rendezvous (bundles only).
A NODE_RANK / NNODES pair (Lightning, many sbatch scripts) fills a node index nothing else gave.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping

# Where rank 0 of node 0 hosts the rendezvous when the launcher names none (srun, mpirun, pdsh): torchrun's
# own default port (torch.distributed.run --master-port).
DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class Launch:
    launcher: str  # "torchrun" | "deepspeed" | "openmpi" | "mpich" | "slurm" | "none"
    hostname: str
    node_rank: int | None = 0  # None: the launcher does not say (pdsh-style)
    nnodes: int | None = 1
    rank: int = 0  # this process among all of the launcher's processes
    world_size: int = 1
    local_rank: int = 0  # this process among the processes of its node
    local_world_size: int = 1
    master_addr: str | None = None
    master_port: int | None = None
    agent_store: bool = False  # torchrun hosts the rendezvous store itself: every rank is a store client
    job_id: str | None = None
    problems: tuple[str, ...] = ()  # what did not add up, in words

    @property
    def leads_node(self) -> bool:
        """The one process per node that does the node's work (local rank 0)."""
        return self.local_rank == 0

    @property
    def can_rendezvous(self) -> bool:
        return (self.node_rank is not None and self.nnodes is not None and bool(self.master_addr)
                and self.master_port is not None and not self.problems)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["problems"] = list(self.problems)
        return d


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = (env.get(name) or "").strip()
        if re.fullmatch(r"[0-9]{1,9}", value):  # a rank or a count; longer digit runs are not one
            return int(value)
    return None


def first_host(nodelist: str) -> str | None:
    """The first host of a Slurm host list: "gpu-[003-005,9],cpu1" -> "gpu-003". None when unreadable."""
    nodelist = nodelist.strip()
    m = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?([^,]*)", nodelist)
    if not m or not (m.group(1) or m.group(2)):
        return None
    prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
    if ranges is None:
        return prefix or None
    first = ranges.split(",")[0].split("-")[0].strip()
    return f"{prefix}{first}{suffix}" if first else None


def _master(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    addr = (env.get("MASTER_ADDR") or "").strip() or None
    port = _int(env, "MASTER_PORT")
    return addr, port


def read_launch(env: Mapping[str, str], hostname: str) -> Launch:
    """This process's place in the launch. Order: the innermost launcher first (torchrun, the DeepSpeed
    launcher, Open MPI, Slurm, Hydra/PMIx), then no launcher at all."""
    addr, port = _master(env)
    common = {"hostname": hostname, "master_addr": addr, "master_port": port,
              "job_id": (env.get("SLURM_JOB_ID") or env.get("TORCHELASTIC_RUN_ID") or None)}

    if "TORCHELASTIC_RUN_ID" in env or "GROUP_RANK" in env:
        return _finish("torchrun", env, common,
                       rank=_int(env, "RANK"), world=_int(env, "WORLD_SIZE"), local=_int(env, "LOCAL_RANK"),
                       local_world=_int(env, "LOCAL_WORLD_SIZE"), node=_int(env, "GROUP_RANK"),
                       nnodes=_int(env, "GROUP_WORLD_SIZE"),
                       agent_store=(env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"))
    if "CROSS_RANK" in env:
        return _finish("deepspeed", env, common,
                       rank=_int(env, "RANK"), world=_int(env, "WORLD_SIZE"), local=_int(env, "LOCAL_RANK"),
                       local_world=_int(env, "LOCAL_SIZE"), node=_int(env, "CROSS_RANK"),
                       nnodes=_int(env, "CROSS_SIZE"))
    if "OMPI_COMM_WORLD_RANK" in env:
        return _finish("openmpi", env, common,
                       rank=_int(env, "OMPI_COMM_WORLD_RANK"), world=_int(env, "OMPI_COMM_WORLD_SIZE"),
                       local=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK"),
                       local_world=_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE"),
                       node=None, nnodes=None)
    if "SLURM_PROCID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env):
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        if not common["master_addr"] and nodelist:
            common["master_addr"] = first_host(nodelist)
        return _finish("slurm", env, common,
                       rank=_int(env, "SLURM_PROCID"),
                       world=_int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"),
                       local=_int(env, "SLURM_LOCALID"), local_world=None, node=_int(env, "SLURM_NODEID"),
                       nnodes=_int(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES"))
    if "PMI_RANK" in env or "PMIX_RANK" in env:
        return _finish("mpich", env, common,
                       rank=_int(env, "PMI_RANK", "PMIX_RANK"), world=_int(env, "PMI_SIZE"),
                       local=_int(env, "MPI_LOCALRANKID"), local_world=_int(env, "MPI_LOCALNRANKS"),
                       node=None, nnodes=None)
    node, nnodes = _int(env, "NODE_RANK"), _int(env, "NNODES")
    if node is not None or nnodes is not None:  # a script that numbers its nodes itself
        return _finish("none", env, common, rank=node, world=nnodes, local=0, local_world=1, node=node, nnodes=nnodes)
    # No launcher variables: one process on one node, or one of pdsh's (each host alone, told apart by its name).
    return Launch("none", hostname, master_addr=addr, master_port=port, job_id=common["job_id"])


def _finish(launcher: str, env: Mapping[str, str], common: dict[str, Any], *, rank: int | None, world: int | None,
            local: int | None, local_world: int | None, node: int | None, nnodes: int | None,
            agent_store: bool = False) -> Launch:
    problems = []
    rank = 0 if rank is None else rank
    world = world or 1
    local = 0 if local is None else local
    if local_world is None and launcher == "slurm":
        # SLURM_TASKS_PER_NODE is "8(x2)" or "2,1"; a uniform count is enough to place the node leader.
        per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
        m = re.fullmatch(r"(\d+)(?:\(x\d+\))?", per_node.strip())
        local_world = int(m.group(1)) if m else None
    local_world = local_world or 1
    if node is None and nnodes is None and local_world and world % local_world == 0:
        node, nnodes = rank // local_world, world // local_world  # block mapping: every node has local_world ranks
    node = _int(env, "NODE_RANK") if node is None else node
    nnodes = _int(env, "NNODES") if nnodes is None else nnodes
    if node is None or nnodes is None:
        problems.append(f"{launcher} gave no node index (set NODE_RANK and NNODES)")
    elif not 0 <= node < nnodes:
        problems.append(f"node rank {node} is outside 0..{nnodes - 1}")
    if not 0 <= rank < world:
        problems.append(f"rank {rank} is outside 0..{world - 1}")
    port = common["master_port"]
    if common["master_addr"] and port is None:
        port = DEFAULT_MASTER_PORT
    return Launch(launcher, common["hostname"], node_rank=node, nnodes=nnodes, rank=rank, world_size=world,
                  local_rank=local, local_world_size=local_world, master_addr=common["master_addr"], master_port=port,
                  agent_store=agent_store, job_id=common["job_id"], problems=tuple(problems))


# ------------------------------------------------------------------------------------------------ stand-ins

VISIBILITY_VARIABLES = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
# Every variable read_launch reads: the doctor records them so a check can count a job's ranks from a bundle.
LAUNCH_VARIABLES = (
    "TORCHELASTIC_RUN_ID", "GROUP_RANK", "GROUP_WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_STEPID",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_NODES",
    "SLURM_NNODES", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID", "PMI_RANK", "PMIX_RANK",
    "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "NODE_RANK", "NNODES",
)


def visible_for_rank(env: Mapping[str, str], local_rank: int) -> dict[str, str]:
    """The visibility variables that leave this rank its own GPU: the local_rank-th of what it sees now. The
    variables already set are narrowed (each is read against what the one before it left visible); with none
    set, CUDA_VISIBLE_DEVICES (which HIP reads too) is set."""
    updates = {}
    for name in VISIBILITY_VARIABLES:
        value = (env.get(name) or "").strip()
        if value:
            ids = [v.strip() for v in value.split(",") if v.strip()]
            updates[name] = ids[local_rank] if local_rank < len(ids) else ids[-1]
            local_rank = 0  # the next variable counts within what this one left
    if not updates:
        updates["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    return updates


def node_per_rank(launch: Launch) -> Launch:
    """Every process of the launch stands in for a node of its own (its own GPU, bundle and node rank): the
    cross-node path tried on one machine."""
    from dataclasses import replace

    return replace(launch, hostname=f"{launch.hostname}-rank{launch.rank}", node_rank=launch.rank,
                   nnodes=launch.world_size, local_rank=0, local_world_size=1,
                   problems=tuple(p for p in launch.problems if "node" not in p))
