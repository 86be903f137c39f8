"""The doctor's last stage: the default smoke-train in a child process (rocmcheck.train.child over the one
child protocol), so a crash (segfault in HIP init, a kernel fault) or a hang becomes a verdict instead of
taking the doctor down. EarlyTrain starts that child while the doctor's earlier stages run and holds it until they
are done (rocmcheck/child.py, Word: the child imports, then waits for the word on its stdin). `python`: the
interpreter whose stack the doctor judges (--python, an active environment), which runs the child without
rocmcheck installed there (rocmcheck/facts/python_env.py, child_env_in); None: rocmcheck's own. No torch here."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from rocmcheck import fixes
from rocmcheck.child import ChildRun, Word, run_child
from rocmcheck.facts.python_env import child_env_in
from rocmcheck.result import CheckResult, Status, failed, passed
from rocmcheck.train import child as train_child
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.report import TRAIN_BUG_FIX

# What the early child's overall limit adds to its wait and its run: the interpreter's start and the last report.
HELD_MARGIN_S = 30.0

HUNG_FIX = fixes.shell("rocmcheck smoke-train --device cpu",
                       "if that finishes, the GPU hangs: check dmesg for GPU resets")
CRASHED_FIX = fixes.shell("rocmcheck smoke-train --device cpu",
                          "if that works, the GPU stack crashes: see rocmcheck doctor")
REFUSED_FIX = fixes.shell("rocmcheck smoke-train --help", "the child refused the run's settings")

# What the stage's caller sees of each training step: (step, steps, the child's "step" event: loss, tokens_per_s).
OnStep = Callable[[int, int, dict[str, Any]], None]


def step_listener(on_step: OnStep | None) -> Callable[[dict[str, Any]], None] | None:
    """run_child's on_event for a train child: its "step" events, as they arrive, to on_step (a malformed one is
    dropped: the display never breaks the run)."""
    if on_step is None:
        return None

    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") != "step":
            return
        try:
            step, steps = int(event["step"]), int(event["steps"])
        except (KeyError, TypeError, ValueError):
            return
        on_step(step, steps, event)

    return on_event


def run_train_stage(timeout_s: float = 180.0, device: str = "auto", *, drift: bool = False,
                    config: TrainConfig | None = None, on_step: OnStep | None = None,
                    python: str | None = None) -> list[CheckResult]:
    """config: the run to make (default: the default smoke-train on `device`; with drift, also its fp32 run and
    train.drift, as `smoke-train --drift`). on_step: each training step as the child reports it."""
    cfg = config or TrainConfig(device=device, drift=drift)
    with child_env_in(python) as env:
        run = run_child(train_child.MODULE, train_child.train_request(cfg), timeout_s, env=env, python=python,
                        on_event=step_listener(on_step))
    return verdicts_of(run, timeout_s, run.command.duration_s)


class EarlyTrain:
    """The same stage with its child started ahead: the child imports torch, transformers and the model classes while
    the doctor's earlier stages run, then waits for its word; `go` sends it (with the device) and returns the
    stage's verdicts, `cancel` lets the child go without a run; a `cancel` after `go` changes nothing, so a caller
    cancels on every way out.

    wait_s: the longest the stages before it may take (the child gives up after that); timeout_s: the run's own
    limit, counted from `go` (the child's watchdog), so a hung run is called hung as the plain stage calls it."""

    def __init__(self, timeout_s: float, wait_s: float, *, drift: bool = False,
                 config: TrainConfig | None = None, python: str | None = None) -> None:
        self.timeout_s = timeout_s
        self.word = Word()
        cfg = config or TrainConfig(device="auto", drift=drift)
        request = train_child.train_request(cfg) | {"held": {"wait_s": wait_s, "timeout_s": timeout_s}}
        self._runs: list[ChildRun] = []
        self._ended_at: list[float] = []
        self.on_step: OnStep | None = None  # set by go: the child reports steps only after the word

        def on_event(event: dict[str, Any]) -> None:
            listener = step_listener(self.on_step)
            if listener is not None:
                listener(event)

        def child() -> None:
            try:
                with child_env_in(python) as env:
                    self._runs.append(run_child(train_child.MODULE, request, wait_s + timeout_s + HELD_MARGIN_S,
                                                env=env, python=python, word=self.word, on_event=on_event))
            finally:
                self._ended_at.append(time.monotonic())

        self._thread = threading.Thread(target=child, name="rocmcheck-early-train", daemon=True)
        self._thread.start()

    def go(self, device: str, on_step: OnStep | None = None) -> list[CheckResult]:
        """on_step: each training step as the child reports it."""
        self.on_step = on_step
        self.word.go(device=device)
        self._thread.join()
        sent = self.word.go_at or time.monotonic()
        ran_s = max(0.0, (self._ended_at[0] if self._ended_at else time.monotonic()) - sent)
        return verdicts_of(self._runs[0], self.timeout_s, ran_s)

    def cancel(self) -> None:
        self.word.stop()
        self._thread.join()


def verdicts_of(run: ChildRun, timeout_s: float, ran_s: float) -> list[CheckResult]:
    """The stage's verdicts from how its child ended; ran_s: the seconds the run itself took."""
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
    cpu, python = _info(run.last("report"), "cpu", "line"), _info(run.last("report"), "python")
    return [passed(f"smoke-train ran to the end in {ran_s:.1f} s" + (f" ({cpu})" if cpu else ""), duration_s=ran_s,
                   id="train.run", **({"python": python} if python else {}))] + results


def _info(event: dict[str, Any] | None, *keys: str) -> str | None:
    """A text of the run's report info: ("cpu", "line"), a CPU run's thread count and why ("CPU: 2 threads
    (affinity 2, no cgroup quota)"); ("python",), the interpreter that trained. None when absent."""
    try:
        value: Any = event["report"]["info"]  # type: ignore[index]
        for key in keys:
            value = value[key]
    except (KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


def _results(event: dict[str, Any] | None) -> list[CheckResult] | None:
    """The verdicts of the child's "report" event; None when it sent none, or one that does not parse."""
    if event is None:
        return None
    try:
        return [CheckResult.from_dict(d) for d in event["report"]["results"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
