"""The process group of a data-parallel smoke-train: who am I, join the group, and the collectives the
verdicts need (mean loss over ranks, everything gathered on rank 0).

torchrun (and the DeepSpeed launcher, and srun + torchrun) describe a rank with the env vars RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. DeepSpeed wants them even for one process:
without them deepspeed.init_distributed goes looking for MPI (`No module named 'mpi4py'`), so a
single-process run gets a one-rank group on 127.0.0.1.
"""

from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def world_from_env(env: dict[str, str] | None = None) -> World:
    env = os.environ if env is None else env
    try:
        return World(int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1)), int(env.get("LOCAL_RANK", 0)))
    except ValueError:
        return World(0, 1, 0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def single_process_env() -> dict[str, str]:
    """What a launcher would set for a world of one; only the variables not already set."""
    wanted = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    missing = {k: v for k, v in wanted.items() if k not in os.environ}
    if "MASTER_PORT" not in os.environ:
        missing["MASTER_PORT"] = str(free_port())
    return missing


def bind_device(world: World, device_request: str) -> None:
    """One GPU per rank: rank i of a node uses GPU LOCAL_RANK (what torchrun expects)."""
    if device_request != "cpu" and torch.cuda.is_available():
        torch.cuda.set_device(world.local_rank % torch.cuda.device_count())


# DeepSpeed's shared-memory all-reduce for CPU ranks (deepspeed/ops/op_builder/cpu/comm.py, ShareMemCommBuilder.NAME).
DEEPSPEED_CPU_SHM_OP = "deepspeed_shm_comm"


def skip_deepspeed_cpu_shm(device_type: str) -> None:
    """On the CPU, DeepSpeed JIT-builds its shared-memory all-reduce with g++ the first time a process group starts
    (docs/distributed.md; benchmarks/RESULTS.md section 22 measured most of a two-rank CPU run's first minute there),
    though only its inference all-reduce uses that op: a fine-tune's collectives go through torch.distributed (gloo)
    either way. Marked not compatible in DeepSpeed's own table of ops (deepspeed.ops.__compatible_ops__, one dict it
    keeps so that edits persist), DeepSpeed takes the path it takes wherever the op cannot be built."""
    if device_type != "cpu":
        return
    import deepspeed.ops

    compatible = getattr(deepspeed.ops, "__compatible_ops__", None)
    if isinstance(compatible, dict):
        compatible[DEEPSPEED_CPU_SHM_OP] = False


def join(world: World, device_type: str, with_deepspeed: bool, timeout_s: float) -> str:
    """Join the process group (NCCL/RCCL on GPUs, gloo on CPU). Returns the backend name.

    With DeepSpeed, deepspeed.init_distributed does it (it also sets up DeepSpeed's comm layer); the
    plain DDP run joins through torch.distributed. A collective that hangs raises after timeout_s
    instead of the 30 min default, so a broken fabric becomes a verdict."""
    os.environ.update(single_process_env())
    timeout = datetime.timedelta(seconds=timeout_s)
    if with_deepspeed:
        import deepspeed

        skip_deepspeed_cpu_shm(device_type)
        deepspeed.init_distributed(dist_backend=None, timeout=timeout, verbose=False)
    elif not torch.distributed.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        kwargs = {"device_id": torch.device("cuda", torch.cuda.current_device())} if backend == "nccl" else {}
        torch.distributed.init_process_group(backend=backend, timeout=timeout, **kwargs)
    return torch.distributed.get_backend()


def leave() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def active() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def mean_over_ranks(value: torch.Tensor) -> torch.Tensor:
    """The global-batch loss: every rank's local loss, averaged (what DDP's gradients average over)."""
    if not active() or torch.distributed.get_world_size() == 1:
        return value
    out = value.detach().clone().float()
    torch.distributed.all_reduce(out, op=torch.distributed.ReduceOp.SUM)
    return out / torch.distributed.get_world_size()


def gather_rows(rows: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's tensor (same shape on all ranks), on every rank; [rows] without a group."""
    if not active() or torch.distributed.get_world_size() == 1:
        return [rows]
    parts = [torch.empty_like(rows) for _ in range(torch.distributed.get_world_size())]
    torch.distributed.all_gather(parts, rows.contiguous())
    return parts

