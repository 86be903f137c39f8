"""`smoke-train --gpus N`: start the N ranks and return rank 0's report. Nothing else: what to run was decided
(request.py), and the runner shows and writes what comes back (runner.py).

The ranks are the train child (rocmcheck.train.child, over the one child protocol of rocmcheck/child.py) under
torchrun (`python -m torch.distributed.run --standalone --nproc-per-node N -m rocmcheck.train.child
--request-file FILE`) with a timeout. torchrun rather than torch.multiprocessing.spawn: it is what a person uses
on a real box and across nodes (the same rendezvous, the same env vars, an elastic agent that stops every rank
when one dies), and each rank is a fresh process, so no GPU state is ever forked. Every rank points its fd 1 at
stderr; rank 0 sends its progress and its report as events on the real stdout.

No torch imported here.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from rocmcheck import fixes
from rocmcheck.child import child_env, run_child
from rocmcheck.result import failed
from rocmcheck.train import child as train_child
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.ds_config import DeepSpeedPlan
from rocmcheck.train.report import RunReport

Progress = Callable[[int, int, dict[str, Any]], None]


def torchrun_launcher(nproc: int) -> list[str]:
    """The launcher the ranks run under: torchrun on this machine, no restarts (a failed rank is a verdict)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "--max-restarts", "0"]


def hang_fix(nproc: int) -> fixes.Fix:
    return fixes.shell("NCCL_DEBUG=INFO rocmcheck smoke-train --gpus {nproc} --steps 20",
                       "a hang in the first collective: on MI300X check iommu=pt on the kernel command line "
                       "(docs/distributed.md)", nproc=nproc)


NO_REPORT_FIX = fixes.note("read the evidence (the ranks' last lines); rerun with --gpus 1 to see the same run in "
                           "one process")


def launch_ranks(cfg: TrainConfig, plan: DeepSpeedPlan | None, nproc: int, timeout_s: float,
                 progress: Progress | None = None) -> RunReport:
    """torchrun with `nproc` ranks of rocmcheck.train.child under one timeout; rank 0's "report" event, or a
    verdict saying why there is none. progress(step, steps, row) sees rank 0's "step" events as they come."""
    def on_event(event: dict[str, Any]) -> None:
        if progress is not None and event.get("event") == "step" and isinstance(event.get("step"), int):
            try:
                progress(event["step"], int(event.get("steps") or cfg.steps), event)
            except (KeyError, TypeError, ValueError):
                pass  # a malformed progress line never stops the launch

    extra = {"DS_ACCELERATOR": "cpu"} if cfg.device == "cpu" and "DS_ACCELERATOR" not in os.environ else None
    launcher = torchrun_launcher(nproc)
    child = run_child(train_child.MODULE, train_child.train_request(cfg, plan, timeout_s), timeout_s,
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
        result = failed(f"the {nproc} ranks did not finish within {timeout_s:g} s (hung)", hang_fix(nproc), tail,
                        **launch, id="train.launch")
    else:
        result = failed(f"torchrun exited {res.returncode} before rank 0 sent a report: {res.describe_failure()}",
                        NO_REPORT_FIX, tail, **launch, id="train.launch")
    return RunReport([result], info={"config": cfg.to_dict(), "launch": launch})
