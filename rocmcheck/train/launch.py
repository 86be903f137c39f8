"""`smoke-train --deepspeed` / `--nproc N`: validate, launch the ranks, collect rank 0's report.

--nproc N runs the train child (rocmcheck.train.child, over the one child protocol of rocmcheck/child.py)
under torchrun (`python -m torch.distributed.run --standalone --nproc-per-node N -m rocmcheck.train.child
--request JSON`) with a timeout. torchrun rather than torch.multiprocessing.spawn: it is what a person
uses on a real box and across nodes (the same rendezvous, the same env vars, elastic agent that stops
every rank when one dies), and each rank is a fresh process, so no GPU state is ever forked. Every rank
points its fd 1 at stderr; rank 0 sends its progress and its report as events on the real stdout, and
this process prints the report like a single run's.

A process that torchrun, the DeepSpeed launcher or srun + torchrun started (WORLD_SIZE > 1 in its
environment) is one rank: it runs directly, and rank 0 prints the report.

No torch imported here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmcheck.child import child_env, run_child, stdout_to_stderr
from rocmcheck.errors import BadInput
from rocmcheck.result import failed
from rocmcheck.train import child as train_child
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.ds_config import DeepSpeedPlan, model_hidden_size, prepare_deepspeed_config
from rocmcheck.train.report import RunReport

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
    return run_and_report(cfg, as_json, run=lambda c, progress=None: launch_ranks(c, run, progress))


def run_as_rank(cfg: TrainConfig, run: ParallelRun, as_json: bool) -> int:
    """This process was started as one rank by a launcher a person ran (the DeepSpeed launcher, srun +
    torchrun), or runs alone: rank 0 trains and reports like a single run; the others train quietly."""
    from rocmcheck.train.runner import run_and_report

    def train(c: TrainConfig, progress=None):
        from rocmcheck.train.run import run_smoke_train

        return run_smoke_train(c, progress=progress, plan=run.plan, pg_timeout_s=run.timeout_s)

    if int(os.environ.get("RANK", "0") or 0) == 0:
        return run_and_report(cfg, as_json, run=train)
    stdout_to_stderr()  # stdout is rank 0's report (--json); this rank's library prints go to stderr
    try:
        report = train(cfg)
    except Exception:  # noqa: BLE001 - rank 0 reports the run; this rank's crash shows on stderr and in its exit
        import traceback

        traceback.print_exc()
        return 1
    return 1 if any(r.status.is_problem for r in report.results) else 0


def torchrun_launcher(nproc: int) -> list[str]:
    """The launcher the ranks run under: torchrun on this machine, no restarts (a failed rank is a verdict)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "--max-restarts", "0"]


def launch_ranks(cfg: TrainConfig, run: ParallelRun, progress=None) -> RunReport:
    """torchrun with N ranks of rocmcheck.train.child under one timeout; rank 0's "report" event, or a
    verdict saying why there is none. progress(step, steps, row) sees rank 0's "step" events as they come."""
    def on_event(event: dict[str, Any]) -> None:
        if progress is not None and event.get("event") == "step" and isinstance(event.get("step"), int):
            try:
                progress(event["step"], int(event.get("steps") or cfg.steps), event)
            except (KeyError, TypeError, ValueError):
                pass  # a malformed progress line never stops the launch

    extra = {"DS_ACCELERATOR": "cpu"} if cfg.device == "cpu" and "DS_ACCELERATOR" not in os.environ else None
    launcher = torchrun_launcher(run.nproc)
    print(f"launching {run.nproc} ranks: {' '.join(launcher[1:])} -m {train_child.MODULE} (timeout {run.timeout_s:g} s)",
          file=sys.stderr)
    child = run_child(train_child.MODULE, train_child.train_request(cfg, run.plan, run.timeout_s), run.timeout_s,
                      env=child_env(extra), launcher=launcher, on_event=on_event, cwd=os.getcwd())
    res = child.command
    launch = {"argv": [*launcher, "-m", train_child.MODULE, "--request-file", "..."], "module": train_child.MODULE,
              "returncode": res.returncode, "duration_s": res.duration_s, "timed_out": res.timed_out}
    found = child.last("report")
    if found is not None and isinstance(found.get("report"), dict) and not res.timed_out:
        report = RunReport.from_dict(found["report"])
        report.info["launch"] = launch
        return report
    tail = [line for line in (res.stderr.strip().splitlines() + child.bad_lines) if line.strip()][-12:]
    if res.timed_out:
        result = failed(f"the {run.nproc} ranks did not finish within {run.timeout_s:g} s (hung)",
                        "NCCL_DEBUG=INFO rocmcheck smoke-train --nproc 2 --steps 20   (a hang in the first collective: on "
                        "MI300X check `iommu=pt` on the kernel command line, docs/distributed.md)", tail, **launch, id="train.launch")
    else:
        result = failed(f"torchrun exited {res.returncode} before rank 0 sent a report: "
                        f"{res.describe_failure()}",
                        "read the evidence (the ranks' last lines); rerun with --nproc 1 to see the same run in one process",
                        tail, **launch, id="train.launch")
    return RunReport([result], info={"config": cfg.to_dict(), "launch": launch})
