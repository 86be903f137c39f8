"""`python -m rocmcheck.train.child --request-file FILE`: one smoke-train run in a child process, over the one
child protocol (rocmcheck/child.py). The doctor's train stage runs it alone; `smoke-train --nproc N` runs it
under torchrun, one process per rank.

Request (train_request): {"config": TrainConfig.to_dict(), "deepspeed": DeepSpeedPlan.to_dict() or null,
"pg_timeout_s": the limit on any one collective, or null}. The plan arrives already linted and filled, so no rank
reads the DeepSpeed file again. The doctor's early start adds "held": {"wait_s", "timeout_s"}: the child imports
what the run imports, then waits up to wait_s for the doctor's word on stdin (rocmcheck/child.py, Word; it names
the device), then runs with faulthandler's watchdog armed for timeout_s; without a word it exits 0.

Events, rank 0 only (every rank points fd 1 at stderr; the others never emit):
  {"event": "step", "step": n, "steps": total, "loss": x, "tokens_per_s": y}   as training goes
  {"event": "report", "report": RunReport.to_dict()}                           once, at the end
A crash inside the run becomes a verdict in that report (report.error_result). A bad request exits 2.

Importing this module imports no torch (the parent builds the request here); the run imports it.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

from rocmcheck.child import leave, open_channel, read_request, wait_for_word
from rocmcheck.errors import BadInput
from rocmcheck.facts.python_env import use_fallback_path
from rocmcheck.train import cpu_threads
from rocmcheck.train.config import DEVICE_CHOICES, TrainConfig
from rocmcheck.train.ds_config import DeepSpeedPlan

MODULE = "rocmcheck.train.child"


def train_request(cfg: TrainConfig, plan: DeepSpeedPlan | None = None,
                  pg_timeout_s: float | None = None) -> dict[str, Any]:
    """pg_timeout_s None: the run's own default limit on a collective."""
    return {"config": cfg.to_dict(), "deepspeed": plan.to_dict() if plan is not None else None,
            "pg_timeout_s": pg_timeout_s}


def parse_request(request: dict[str, Any]) -> tuple[TrainConfig, DeepSpeedPlan | None, float | None]:
    """The request's parts; BadInput when it is not one train_request builds."""
    if not isinstance(request.get("config"), dict):
        raise BadInput("bad train request: no \"config\" object")
    try:
        cfg = TrainConfig.from_dict(request["config"])
        plan = DeepSpeedPlan.from_dict(request["deepspeed"]) if request.get("deepspeed") else None
        pg_timeout_s = None if request.get("pg_timeout_s") is None else float(request["pg_timeout_s"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # BadInput is a ValueError
        raise BadInput(f"bad train request: {exc}") from None
    return cfg, plan, pg_timeout_s


def die_with_parent() -> None:
    """torchrun starts each rank in its own session, so when run_command's timeout kills torchrun's process
    group the ranks would live on (a rank stuck in a collective for good). Linux's parent-death signal ends
    this process when its parent (torchrun's agent, or the doctor) dies. Best effort: a no-op where prctl is
    unavailable."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _import_ahead() -> None:
    """What the run will import, imported now while the child waits (best effort: a failing import fails again,
    reported, in the run itself); the collector off meanwhile, as the run imports them."""
    from rocmcheck.heap import imports_without_gc

    with imports_without_gc():
        try:
            from rocmcheck.train import modeling, run  # noqa: F401 - imports torch

            modeling.offline_and_quiet()
            modeling.import_model_classes()
        except Exception:  # noqa: BLE001 - whatever it is, the run meets it again and says so
            pass


def wait_held(held: dict[str, Any], cfg: TrainConfig) -> TrainConfig | None:
    """Import ahead, wait for the word, arm the watchdog: the config to run (on the word's device), or None when
    let go, no word came within wait_s, or the word names a device this run cannot take."""
    _import_ahead()
    word = wait_for_word(float(held.get("wait_s") or 0))
    if word is None or word.get("device") not in DEVICE_CHOICES:
        return None
    import dataclasses
    import faulthandler

    faulthandler.dump_traceback_later(float(held.get("timeout_s") or 0) or 1e9, exit=True)
    return dataclasses.replace(cfg, device=word["device"])


def main(argv: list[str] | None = None) -> int:
    use_fallback_path()  # run by another environment's Python: rocmcheck's own dependencies after its packages
    cpu_threads.wait_passively()  # before torch is imported: OpenMP reads it once, as torch loads it
    request = read_request(argv, prog=f"python -m {MODULE}")
    channel = open_channel()
    try:
        cfg, plan, pg_timeout_s = parse_request(request)
    except BadInput as exc:
        print(str(exc), file=sys.stderr)
        return 2
    from rocmcheck.train.report import RunReport, error_result

    die_with_parent()  # a parent (torchrun's agent, the doctor) killed for its timeout takes this run with it
    if isinstance(request.get("held"), dict):  # the doctor's early start: import now, train once it says so
        cfg = wait_held(request["held"], cfg)
        if cfg is None:
            return 0  # let go: the doctor needs no run after all
    rank = int(os.environ.get("RANK", "0") or 0)

    def progress(step: int, steps: int, row: dict[str, Any]) -> None:
        if rank == 0:
            channel.emit("step", step=step, steps=steps, loss=row.get("loss"), tokens_per_s=row.get("tokens_per_s"))

    try:
        from rocmcheck.train.run import run_smoke_train  # imports torch

        limits = {} if pg_timeout_s is None else {"pg_timeout_s": pg_timeout_s}
        report = run_smoke_train(cfg, progress=progress, plan=plan, **limits)
    except Exception as exc:  # noqa: BLE001 - a crash becomes a verdict in the report
        traceback.print_exc()
        report = RunReport([error_result(exc)], info={"config": cfg.to_dict()})
    if rank == 0:
        channel.emit("report", report=report.to_dict())
        return 0  # the parent judges the report; a non-zero exit would only make torchrun shout
    return 1 if any(r.status.is_problem for r in report.results) else 0


if __name__ == "__main__":
    leave(main())
