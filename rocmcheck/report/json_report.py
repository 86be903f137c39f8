"""The JSON envelope every command's --json prints: one shape, versioned, described by the JSON Schema shipped
in the package (rocmcheck/report/rocmcheck.schema.json) and in docs/json-schema.md."""

from __future__ import annotations

import json
from typing import Any

from rocmcheck import __version__
from rocmcheck.package_data import read_json
from rocmcheck.report.render import counts as summarize  # noqa: F401 - the one definition
from rocmcheck.report.render import verdict as overall
from rocmcheck.result import CheckResult

# 2: every command prints this envelope (1 was the doctor's report alone; its fields are all still here).
# 3: a fix is an object {kind, text, why, file} (kind shell | edit | note); verdict "not_judged" when nothing was.
JSON_SCHEMA_VERSION = 3
SCHEMA_FILE = "rocmcheck.schema.json"


def envelope(command: str, results: list[CheckResult], **payload: Any) -> dict[str, Any]:
    """schema_version, tool, tool_version, command, verdict, counts, results, then the command's own payload."""
    doc: dict[str, Any] = {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": "rocmcheck",
        "tool_version": __version__,
        "command": command,
        "verdict": overall(results),
        "counts": summarize(results),
        "results": [r.to_dict() for r in results],
    }
    clash = set(doc) & set(payload)
    if clash:
        raise ValueError(f"payload would overwrite envelope fields: {sorted(clash)}")
    doc.update(payload)
    return doc


def build_report(results: list[CheckResult], machine: dict[str, Any], duration_s: float,
                 source: str = "live") -> dict[str, Any]:
    """The doctor's document."""
    return envelope("doctor", results, source=source, machine=machine, duration_s=round(duration_s, 3))


def schema() -> dict[str, Any]:
    return read_json("rocmcheck.report", SCHEMA_FILE)


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False, default=str)
