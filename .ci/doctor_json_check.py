"""Check `rocmcheck doctor --json` output from the container: valid JSON, verdicts present, and an exit
code that matches them (issue 2: 0 when nothing failed, 1 when something failed).

usage: python3 .ci/doctor_json_check.py DOCTOR_JSON_FILE EXIT_CODE
Standard library only: it runs on the CI host, not in the image.
"""

from __future__ import annotations

import json
import sys

PROBLEMS = {"fail", "crash"}


def verdicts(node):
    """Every object that looks like a CheckResult (id + status), wherever the schema nests them."""
    if isinstance(node, dict):
        if isinstance(node.get("id"), str) and isinstance(node.get("status"), str):
            yield node
        for value in node.values():
            yield from verdicts(value)
    elif isinstance(node, list):
        for value in node:
            yield from verdicts(value)


def main(path: str, exit_code: int) -> int:
    text = open(path, encoding="utf-8", errors="replace").read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"doctor --json is not valid JSON: {exc}; starts with {text[:300]!r}", file=sys.stderr)
        return 1
    results = list(verdicts(doc))
    if not results:
        print("doctor --json holds no verdicts (objects with id and status)", file=sys.stderr)
        return 1
    problems = [r["id"] for r in results if r["status"] in PROBLEMS]
    expected = 1 if problems else 0
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"doctor --json: {len(results)} verdicts {counts}; failing: {', '.join(problems) or 'none'}")
    devices = [f"{r['id']}={r['status']}" for r in results if r["id"].startswith(("devices.", "container."))]
    print(f"device/container verdicts: {', '.join(devices) or 'none'}")
    if exit_code != expected:
        print(f"doctor exited {exit_code}, but its verdicts say {expected}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
