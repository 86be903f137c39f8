"""What the GPU probe children say, over rocmcheck/child.py's JSON-lines channel (run_child reads the lines into
events; this reads the events). Reading never raises.

Events the child writes, in order:
  {"event": "device", "available": bool, "reason": str, "torch": str, "hip": str|None, "cuda": str|None,
   "count": int, "devices": [{"index", "name", "arch", "total_bytes"}]}
  {"event": "start", "probe": name}
  {"event": "note", "probe": name, "text": str}   (progress of a long probe; any number, or none)
  {"event": "result", "probe": name, "outcome": "ok"|"skip"|"error", "data": {...},
   "reason": str|None, "error": str|None, "traceback": [str], "seconds": float}
  {"event": "done"}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.child import ChildRun

OUTCOMES = ("ok", "skip", "error")


@dataclass
class ChildReport:
    device: dict[str, Any] | None = None
    started: list[str] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)  # probe (or "") -> why its output was unreadable
    done: bool = False

    def unfinished(self) -> str | None:
        """The probe that started but never reported: the one running when the child died or hung."""
        for name in reversed(self.started):
            if name not in self.results and name not in self.bad:
                return name
        return None


def result_problem(event: dict[str, Any]) -> str | None:
    """Why a result event cannot be used, or None when it is well formed."""
    outcome = event.get("outcome")
    if outcome not in OUTCOMES:
        return f"outcome is {outcome!r}, not one of {', '.join(OUTCOMES)}"
    if not isinstance(event.get("data", {}), dict):
        return "'data' is not an object"
    if outcome == "skip" and not isinstance(event.get("reason"), str):
        return "a skip without 'reason'"
    if outcome == "error" and not isinstance(event.get("error"), str):
        return "an error without 'error'"
    return None


def parse_child_output(run: ChildRun) -> ChildReport:
    """What a probe child reported, from the events rocmcheck.child.run_child read off its stdout. A line that
    was no event is blamed on the probe still running when the child ended (the one it broke), else on no probe."""
    report = ChildReport()
    unknown: list[str] = []
    for event in run.events:
        kind = event["event"]
        if kind == "device":
            report.device = event
        elif kind == "start" and isinstance(event.get("probe"), str):
            report.started.append(event["probe"])
        elif kind == "result" and isinstance(event.get("probe"), str):
            problem = result_problem(event)
            if problem:
                report.bad[event["probe"]] = f"malformed result: {problem}"
            else:
                report.results[event["probe"]] = event
        elif kind == "note":
            pass  # a running probe's progress line: the stage shows it as it arrives (stage.py), nothing to keep
        elif kind == "done":
            report.done = True
        else:
            unknown.append(f"unknown event: {json.dumps(event, default=str)[:160]!r}")
    culprit = report.unfinished() or ""
    for why in unknown + [f"unreadable output line: {line[:160]!r}" for line in run.bad_lines]:
        report.bad.setdefault(culprit, why)
    return report


def device_problem(device: dict[str, Any]) -> str | None:
    """Why a device event cannot be used, or None."""
    if not isinstance(device.get("available"), bool):
        return "device event without 'available'"
    if device["available"]:
        devices = device.get("devices")
        if not isinstance(devices, list) or not devices or not all(isinstance(d, dict) for d in devices):
            return "device event without 'devices'"
    elif not isinstance(device.get("reason"), str):
        return "device event without 'reason'"
    return None
