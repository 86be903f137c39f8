"""What the GPU probe children say, over rocmcheck/child.py's JSON-lines channel. Reading never raises.

Events the child writes, in order:
  {"event": "device", "available": bool, "reason": str, "torch": str, "hip": str|None, "cuda": str|None,
   "count": int, "devices": [{"index", "name", "arch", "total_bytes"}]}
  {"event": "start", "probe": name}
  {"event": "result", "probe": name, "outcome": "ok"|"skip"|"error", "data": {...},
   "reason": str|None, "error": str|None, "traceback": [str], "seconds": float}
  {"event": "done"}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.child import parse_event

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


def parse_child_output(stdout: str) -> ChildReport:
    """A probe child's whole stdout -> what it reported; a line that is no event is blamed on the probe
    that was running when it was printed."""
    report = ChildReport()
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line:
            continue
        event = parse_event(line)
        if event is None:
            report.bad[report.unfinished() or ""] = f"unreadable output line: {line[:160]!r}"
            continue
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
        elif kind == "done":
            report.done = True
        else:
            report.bad[report.unfinished() or ""] = f"unknown event: {line[:160]!r}"
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
