"""What one `rocmcheck smoke-train` asks for, decided once: every check on the input (a person's flags, the model
folder, the DeepSpeed config, --out) and which of the three ways it runs.

- TRAIN: this process trains. Alone (the default; --lora-rank; --deepspeed CONFIG on one rank), or as one rank of
  a world a launcher started (torchrun, the DeepSpeed launcher, srun + torchrun: WORLD_SIZE > 1 in its
  environment), where rank 0 shows and writes the report and the other ranks train quietly.
- LAUNCH: `--gpus N` (N > 1) from a person's shell: this process starts N ranks under torchrun (launch.py) and
  shows rank 0's report as a single run's.
- BENCH: `--bench`, the 1.1B shape: this loop against HF Trainer and torch.compile (bench.py).

No torch here: the input is refused (BadInput: one line, exit 2) before torch is paid for. The one check that
needs torch, how many ranks this machine can hold (rank_problem), is made by the runner once torch imports.
"""

from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from rocmcheck.errors import BadInput
from rocmcheck.train.config import TrainConfig, default_lr, validate_model_dir, validate_numbers
from rocmcheck.train.ds_config import DeepSpeedPlan, model_hidden_size, prepare_deepspeed_config

DEFAULT_TIMEOUT_S = 1800.0
# Ranks on a CPU (gloo): they prove the data-parallel path (two already do: tests/test_train_distributed.py),
# never speed. Each needs a core of its own (ranks that time-share one core wait for each other at every
# collective, and the launch outlives its timeout) and holds about 0.5 GiB (the default run's measured peak on
# this repository's CPU box, train.memory); 8 keeps a box of any size responsive.
MAX_CPU_RANKS = 8


class Mode(str, enum.Enum):
    TRAIN = "train"  # this process trains (alone, or as one rank a launcher started)
    LAUNCH = "launch"  # this process starts --gpus N ranks under torchrun and shows rank 0's report
    BENCH = "bench"  # --bench


@dataclass
class Request:
    cfg: TrainConfig
    mode: Mode
    plan: DeepSpeedPlan | None = None  # --deepspeed, linted and "auto" filled
    nproc: int = 1  # LAUNCH: the ranks to start
    timeout_s: float = DEFAULT_TIMEOUT_S  # LAUNCH: the whole launch; every mode: the limit on one collective
    bench_shape: str = "1.1b"
    as_json: bool = False
    force: bool = False  # --out: replace the outputs in a folder that has files
    rank: int = 0  # RANK when a launcher started this process, else 0
    world_size: int = 1  # WORLD_SIZE when a launcher started this process, else 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that shows and writes the report."""
        return self.rank == 0


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name, default))
    except (TypeError, ValueError):
        return default


def decide(cfg: TrainConfig, *, lr_given: bool = True, bench: bool = False, bench_shape: str = "1.1b",
           deepspeed: Path | None = None, nproc: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S, force: bool = False,
           as_json: bool = False, env: Mapping[str, str] | None = None) -> Request:
    """The run a command line asks for, or BadInput naming what a person must fix. `cfg` holds the training
    flags; lr_given False: --lr was not given, so the model's default is filled in here."""
    env = os.environ if env is None else env
    world, rank = _int_env(env, "WORLD_SIZE", 1), _int_env(env, "RANK", 0)
    is_rank = world > 1
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not (
            math.isfinite(timeout_s) and timeout_s > 0):
        raise BadInput(f"--timeout must be a positive number of seconds (got {timeout_s})")
    if nproc < 1:
        raise BadInput(f"--gpus must be at least 1 (got {nproc})")
    parallel = deepspeed is not None or nproc > 1 or is_rank
    if bench and parallel:
        raise BadInput("--bench runs in one process on one GPU: it cannot be combined with --deepspeed or --gpus "
                       "(nor under a launcher)")
    if cfg.drift and (bench or deepspeed is not None):
        raise BadInput(f"--drift runs the plain bf16 run against fp32, not {'--bench' if bench else '--deepspeed'}: "
                       "drop it (a DeepSpeed run is held to the plain run by train.deepspeed_parity; run --drift "
                       "with the same settings without --deepspeed for the plain run against fp32)")
    model_config: dict[str, Any] | None = None
    if not bench:
        model_config = validate_model_dir(cfg.model)
        if not lr_given:
            text_config = model_config.get("text_config") if isinstance(model_config.get("text_config"), dict) else {}
            cfg.lr = default_lr(cfg.is_bundled_model, cfg.lora_rank,
                                model_config.get("hidden_size") or text_config.get("hidden_size"))
    validate_numbers(cfg)
    if parallel:
        if cfg.pure_bf16 or cfg.compile:
            raise BadInput("--deepspeed/--gpus cannot be combined with --pure-bf16 or --compile (the DeepSpeed "
                           "config's bf16 section sets the precision)")
        if deepspeed is not None and cfg.lora_rank:
            raise BadInput("--lora-rank runs without DeepSpeed here (plain or --gpus N); drop --deepspeed")
        if is_rank and nproc > 1:
            raise BadInput(f"--gpus {nproc}: this process is already one of {world} ranks started by a launcher "
                           "(WORLD_SIZE is set); drop --gpus")
    plan = None
    if deepspeed is not None:
        plan = prepare_deepspeed_config(deepspeed, cfg, world if is_rank else nproc,
                                        model_hidden_size(model_config or {}))
    if cfg.out is not None and not is_rank:  # a launched rank: the command that launched it checked --out
        from rocmcheck.train.outputs import out_dir_problem

        problem = out_dir_problem(cfg.out, force)
        if problem:
            raise BadInput(problem)
    mode = Mode.BENCH if bench else Mode.LAUNCH if nproc > 1 else Mode.TRAIN
    return Request(cfg, mode, plan, nproc if mode is Mode.LAUNCH else 1, float(timeout_s), bench_shape, as_json,
                   force, rank if is_rank else 0, world if is_rank else 1)


def rank_problem(nproc: int, device: str, gpus: int, cores: int) -> str | None:
    """Why this machine cannot hold `nproc` ranks (one line), or None. gpus: the GPUs torch sees here; cores: the
    CPU cores this process may run on. One rank per GPU; on a CPU (--device cpu) one per core, MAX_CPU_RANKS at
    most. A person who asked for GPUs on a machine without one is told so, never given CPU ranks instead."""
    if nproc <= 1:
        return None
    if device == "cpu":
        limit = max(1, min(cores, MAX_CPU_RANKS))
        if nproc > limit:
            return (f"--gpus {nproc} --device cpu: at most {limit} CPU ranks here (one per core: {cores} "
                    f"core(s) for this process; {MAX_CPU_RANKS} at most)")
        return None
    if gpus == 0:
        return (f"--gpus {nproc}: torch sees no GPU here; to run {nproc} ranks on the CPU (gloo, a test of the "
                "data-parallel path), add --device cpu")
    if nproc > gpus:
        return (f"--gpus {nproc}: only {gpus} GPU(s) visible here (one rank per GPU; CUDA_VISIBLE_DEVICES / "
                "HIP_VISIBLE_DEVICES choose which)")
    return None
