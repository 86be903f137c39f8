"""`smoke-train --deepspeed` / `--nproc N`: validate, launch the ranks, collect rank 0's report.

--nproc N re-launches rocmcheck under torchrun (`python -m torch.distributed.run --standalone
--nproc-per-node N -m rocmcheck smoke-train ...`) through run_command with a timeout. torchrun rather
than torch.multiprocessing.spawn: it is what a person uses on a real box and across nodes (the same
rendezvous, the same env vars, elastic agent that stops every rank when one dies), and each rank is a
fresh process, so no GPU state is ever forked. Rank 0 writes its report to a file (stdout carries every
rank's library noise); this process prints it like a single run's.

A process that torchrun, the DeepSpeed launcher or srun + torchrun started (WORLD_SIZE > 1 in its
environment) is one rank: it runs directly, and rank 0 prints the report.

No torch imported here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmcheck.facts.runner import run_command
from rocmcheck.result import failed
from rocmcheck.train.config import BadInput, TrainConfig
from rocmcheck.train.ds_config import DeepSpeedPlan, model_hidden_size, prepare_deepspeed_config
from rocmcheck.train.report import RunReport

REPORT_FILE_ENV = "ROCMCHECK_RANK0_REPORT"  # set by the launching process: rank 0 writes its JSON there
DEFAULT_TIMEOUT_S = 1800.0
INSTALL_DEEPSPEED = "DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed   (after torch; see docs/distributed.md)"


@dataclass
class ParallelRun:
    nproc: int  # ranks to launch from here; 1 when this process is already a rank (or runs alone)
    plan: DeepSpeedPlan | None
    timeout_s: float
    is_rank: bool  # started by a launcher as one of several ranks


def world_size_from_env(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        return int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def prepare_parallel(cfg: TrainConfig, deepspeed_config: Path | None, nproc: int, timeout_s: float,
                     model_config: dict[str, Any] | None) -> ParallelRun | None:
    """None for the ordinary single-process plain run; BadInput for anything a person must fix."""
    launched_world = world_size_from_env()
    is_rank = launched_world > 1
    if nproc < 1:
        raise BadInput(f"--nproc must be at least 1 (got {nproc})")
    if is_rank and nproc > 1:
        raise BadInput(f"--nproc {nproc}: this process is already one of {launched_world} ranks started by a launcher "
                       "(WORLD_SIZE is set); drop --nproc")
    if timeout_s <= 0:
        raise BadInput(f"--timeout must be positive (got {timeout_s:g})")
    if deepspeed_config is None and nproc == 1 and not is_rank:
        return None
    plan = None
    if deepspeed_config is not None:
        world = launched_world if is_rank else nproc
        plan = prepare_deepspeed_config(deepspeed_config, cfg, world, model_hidden_size(model_config or {}))
    return ParallelRun(nproc=1 if is_rank else nproc, plan=plan, timeout_s=timeout_s, is_rank=is_rank)


def run_parallel(cfg: TrainConfig, run: ParallelRun, as_json: bool) -> int:
    """The exit code: 0 when every verdict is fine, 1 otherwise."""
    from rocmcheck.train.runner import run_and_report

    if run.plan is not None and importlib.util.find_spec("deepspeed") is None:
        return run_and_report(cfg, as_json, run=lambda c, progress=None: RunReport([failed(
            "--deepspeed needs DeepSpeed, which is not installed", INSTALL_DEEPSPEED, id="train.deepspeed")]))
    if run.plan is not None and int(os.environ.get("RANK", "0") or 0) == 0:
        for line in run.plan.warnings:  # lint warnings do not stop the run, but a person should see them
            print(line, file=sys.stderr)
    if run.is_rank or run.nproc == 1:
        return run_as_rank(cfg, run, as_json)
    return run_and_report(cfg, as_json, run=lambda c, progress=None: launch_ranks(c, run))


def run_as_rank(cfg: TrainConfig, run: ParallelRun, as_json: bool) -> int:
    """This process trains as one rank (or alone). Rank 0 reports; the others stay quiet."""
    from rocmcheck.train.runner import error_result, run_and_report

    def train(c: TrainConfig, progress=None):
        from rocmcheck.train.run import run_smoke_train

        return run_smoke_train(c, progress=progress, plan=run.plan, pg_timeout_s=run.timeout_s)

    rank = int(os.environ.get("RANK", "0") or 0)
    report_file = os.environ.get(REPORT_FILE_ENV)
    if report_file:
        die_with_parent()
    if rank == 0 and not report_file:
        return run_and_report(cfg, as_json, run=train)
    if rank != 0:
        os.dup2(2, 1)  # stdout is rank 0's report (--json); the other ranks' library prints go to stderr
    try:
        report = train(cfg)
    except Exception as exc:  # noqa: BLE001 - a crash becomes a verdict in rank 0's report
        import traceback

        traceback.print_exc()
        report = RunReport([error_result(exc)])
    if rank == 0:
        Path(report_file).write_text(json.dumps(report.to_dict(), default=str), encoding="utf-8")
        return 0  # the launching process judges the report; a non-zero exit would only make torchrun shout
    return 1 if any(r.status.is_problem for r in report.results) else 0


def die_with_parent() -> None:
    """torchrun starts each rank in its own session, so when run_command's timeout kills torchrun's process
    group the ranks would live on (a rank stuck in a collective for good). Linux's parent-death signal
    ends this rank when torchrun's agent dies. Best effort: a no-op where prctl is unavailable."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def torchrun_argv(cfg: TrainConfig, run: ParallelRun) -> list[str]:
    """The command each rank runs: this same smoke-train, minus --nproc and --json (rank 0 reports to a file)."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(run.nproc),
            "--max-restarts", "0", "-m", "rocmcheck", "smoke-train"]
    argv += ["--model", str(cfg.model), "--steps", str(cfg.steps), "--micro-batch", str(cfg.micro_batch),
             "--grad-accum", str(cfg.grad_accum), "--seq-len", str(cfg.seq_len), "--lr", repr(cfg.lr),
             "--attn", cfg.attn, "--device", cfg.device, "--seed", str(cfg.seed), "--timeout", repr(run.timeout_s)]
    flags = {"--pure-bf16": cfg.pure_bf16, "--gradient-checkpointing": cfg.gradient_checkpointing,
             "--compile": cfg.compile, "--no-profile": not cfg.profile}
    argv += [flag for flag, on in flags.items() if on]
    if cfg.out:
        argv += ["--out", str(cfg.out)]
    if cfg.lora_rank:
        argv += ["--lora-rank", str(cfg.lora_rank)]
    if run.plan is not None:
        argv += ["--deepspeed", run.plan.path]
    return argv


def launch_ranks(cfg: TrainConfig, run: ParallelRun):
    """torchrun with N ranks under one timeout; rank 0's report, or a verdict saying why there is none."""
    argv = torchrun_argv(cfg, run)
    with tempfile.TemporaryDirectory(prefix="rocmcheck-ranks-") as tmp:
        report_path = Path(tmp) / "rank0.json"
        env = dict(os.environ)
        env[REPORT_FILE_ENV] = str(report_path)
        # The ranks must import this same rocmcheck, installed or run from a checkout.
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if cfg.device == "cpu":
            env.setdefault("DS_ACCELERATOR", "cpu")
        print(f"launching {run.nproc} ranks: {' '.join(argv[1:8])} ... (timeout {run.timeout_s:g} s)", file=sys.stderr)
        res = run_command(argv, timeout=run.timeout_s, env=env, cwd=os.getcwd())
        text = report_path.read_text(encoding="utf-8") if report_path.is_file() else None
    launch = {"argv": argv, "returncode": res.returncode, "duration_s": res.duration_s, "timed_out": res.timed_out}
    if text is not None and not res.timed_out:
        report = RunReport.from_dict(json.loads(text))
        report.info["launch"] = launch
        return report
    tail = [line for line in (res.stderr.strip().splitlines() + res.stdout.strip().splitlines()) if line.strip()][-12:]
    if res.timed_out:
        result = failed(f"the {run.nproc} ranks did not finish within {run.timeout_s:g} s (hung)",
                        "NCCL_DEBUG=INFO rocmcheck smoke-train --nproc 2 --steps 20   (a hang in the first collective: on "
                        "MI300X check `iommu=pt` on the kernel command line, docs/distributed.md)", tail, **launch, id="train.launch")
    else:
        result = failed(f"torchrun exited {res.returncode} before rank 0 wrote a report: "
                        f"{res.describe_failure()}",
                        "read the evidence (the ranks' last lines); rerun with --nproc 1 to see the same run in one process",
                        tail, **launch, id="train.launch")
    return RunReport([result], info={"config": cfg.to_dict(), "launch": launch})
