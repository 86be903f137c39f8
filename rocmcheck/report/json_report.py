"""The JSON report: a stable, versioned document (documented in docs/json-schema.md)."""

from __future__ import annotations

import json
from typing import Any

from rocmcheck import __version__
from rocmcheck.result import CheckResult, Status, worst

JSON_SCHEMA_VERSION = 1


def summarize(results: list[CheckResult]) -> dict[str, int]:
    counts = {s.value: 0 for s in Status}
    for r in results:
        counts[r.status.value] += 1
    return counts


def overall(results: list[CheckResult]) -> str:
    """"fail" when anything failed or crashed, "warn" when something warned, else "pass"."""
    w = worst(results)
    if w in (Status.FAIL, Status.CRASH):
        return "fail"
    return "warn" if w == Status.WARN else "pass"


def build_report(results: list[CheckResult], machine: dict[str, Any], duration_s: float,
                 source: str = "live") -> dict[str, Any]:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": "rocmcheck",
        "tool_version": __version__,
        "source": source,
        "machine": machine,
        "duration_s": round(duration_s, 3),
        "verdict": overall(results),
        "counts": summarize(results),
        "results": [r.to_dict() for r in results],
    }


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False, default=str)
