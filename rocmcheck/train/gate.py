"""The doctor's smoke-train child, started early and held at a gate: it imports torch, transformers and the model
classes (torch._dynamo among them: transformers.masking_utils imports it) while the doctor collects facts and runs
its GPU probes, and trains only once the doctor opens the gate, so training steps never run beside the performance
probes. On one H200 those imports are about half of the default smoke-train's 11.6-12.9 s; on the 2-core CPU box the
doctor's stack child and the train child import side by side (benchmarks/RESULTS.md, section 18).

The gate is a file in a folder only this user can read: the parent writes {"device": "cuda" | "cpu"} to open it,
or {"cancel": true} when no run is wanted after all (torch turned out not importable, a stage crashed); atomically
(written aside, then renamed), so the child never reads half a decision. The child waits at most `wait_s` (then
gives up, as if cancelled). Once open, the child arms faulthandler's watchdog for the run's own `timeout_s`: a run
that hangs past it has its threads' tracebacks written to stderr and ends, and the parent calls it hung, whatever
the time it spent waiting. No torch here at module level: the parent side imports this.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocmcheck.safe.scratch_folders import make_folder, remove_folder
from rocmcheck.train.config import DEVICE_CHOICES, TrainConfig

FILE_NAME = "gate.json"
POLL_S = 0.02  # how often the waiting child looks for the gate file


class Gate:
    """The parent's side: the folder, and the one decision written into it."""

    def __init__(self) -> None:
        self.folder = make_folder("gate")  # mode 0700
        self.path = self.folder / FILE_NAME
        self.opened_at: float | None = None
        self.decided = False

    def spec(self, wait_s: float, timeout_s: float) -> dict[str, Any]:
        """What the child's request carries ("gate" key)."""
        return {"path": str(self.path), "wait_s": wait_s, "timeout_s": timeout_s}

    def _write(self, decision: dict[str, Any]) -> None:
        if self.decided:
            return  # decided once: a cancel after the gate opened changes nothing
        self.decided = True
        aside = self.folder / (FILE_NAME + ".new")
        try:
            aside.write_text(json.dumps(decision), encoding="utf-8")
            os.replace(aside, self.path)
        except OSError:
            pass  # the folder is gone: removed when the child ended, so there is no one left to tell

    def open(self, device: str) -> None:
        self._write({"device": device})
        self.opened_at = time.monotonic()

    def cancel(self) -> None:
        self._write({"cancel": True})

    def remove(self) -> None:
        remove_folder(self.folder)


def _import_ahead() -> None:
    """What the run will import, imported now while the child waits (best effort: a failing import fails again,
    reported, in the run itself). The collector off and the heap frozen after, as the run imports them."""
    from rocmcheck.heap import imports_without_gc

    with imports_without_gc():
        try:
            from rocmcheck.train import modeling, run  # noqa: F401 - imports torch

            modeling.offline_and_quiet()
            modeling.import_model_classes()
        except Exception:  # noqa: BLE001 - whatever it is, the run meets it again and says so
            pass


def read_decision(path: Path) -> dict[str, Any] | None:
    try:
        decision = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return decision if isinstance(decision, dict) else None


def wait_at_gate(spec: dict[str, Any], cfg: TrainConfig) -> TrainConfig | None:
    """The child's side: import ahead, wait for the decision, arm the watchdog. The config to run (its device the
    parent's), or None when cancelled, never decided within wait_s, or decided on a device this run cannot take."""
    _import_ahead()
    path = Path(str(spec.get("path", "")))
    deadline = time.monotonic() + float(spec.get("wait_s", 0) or 0)
    decision = read_decision(path)
    while decision is None and time.monotonic() < deadline:
        time.sleep(POLL_S)
        decision = read_decision(path)
    if decision is None or decision.get("cancel") or decision.get("device") not in DEVICE_CHOICES:
        return None
    import faulthandler

    faulthandler.dump_traceback_later(float(spec.get("timeout_s") or 0) or 1e9, exit=True)
    return replace(cfg, device=decision["device"])
