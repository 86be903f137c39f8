"""The doctor's last stage: the default smoke-train in a child process (rocmcheck.train.child over the one
child protocol), so a crash (segfault in HIP init, a kernel fault) or a hang becomes a verdict instead of
taking the doctor down. No torch here."""

from __future__ import annotations

from typing import Any

from rocmcheck import fixes
from rocmcheck.child import run_child
from rocmcheck.result import CheckResult, Status, failed, passed
from rocmcheck.train import child as train_child
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.report import TRAIN_BUG_FIX

HUNG_FIX = fixes.shell("rocmcheck smoke-train --device cpu",
                       "if that finishes, the GPU hangs: check dmesg for GPU resets")
CRASHED_FIX = fixes.shell("rocmcheck smoke-train --device cpu",
                          "if that works, the GPU stack crashes: see rocmcheck doctor")
REFUSED_FIX = fixes.shell("rocmcheck smoke-train --help", "the child refused the run's settings")


def run_train_stage(timeout_s: float = 180.0, device: str = "auto", *,
                    config: TrainConfig | None = None) -> list[CheckResult]:
    """config: the run to make (default: the default smoke-train on `device`)."""
    cfg = config or TrainConfig(device=device)
    run = run_child(train_child.MODULE, train_child.train_request(cfg), timeout_s)
    res, tail = run.command, run.stderr_tail()
    if run.hung:
        return [failed(f"smoke-train did not finish within {timeout_s:g} s (hung)", HUNG_FIX, tail,
                       timeout_s=timeout_s, id="train.run")]
    results = _results(run.last("report"))
    if results is None:
        if res.returncode is not None and res.returncode < 0:
            return [failed(f"smoke-train {res.describe_failure().split(' ', 1)[1]}", CRASHED_FIX, tail,
                           id="train.run")]
        if res.returncode == 2:
            return [failed("smoke-train refused its input: " + (tail[-1] if tail else "exit 2"), REFUSED_FIX, tail,
                           id="train.run")]
        return [CheckResult("train.run", Status.CRASH, f"smoke-train gave no verdicts ({res.describe_failure()})", tail,
                            TRAIN_BUG_FIX)]
    if any(r.id == "train.run" for r in results):  # the child caught its own crash and said so
        return results
    return [passed(f"smoke-train ran to the end in {res.duration_s:.1f} s", duration_s=res.duration_s,
                   id="train.run")] + results


def _results(event: dict[str, Any] | None) -> list[CheckResult] | None:
    """The verdicts of the child's "report" event; None when it sent none, or one that does not parse."""
    if event is None:
        return None
    try:
        return [CheckResult.from_dict(d) for d in event["report"]["results"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
