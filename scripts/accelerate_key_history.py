"""Regenerate rocmcheck/lint/accelerate_keys.json: which top-level keys each accelerate release's config file reader
accepts.

Usage: pip download --no-deps accelerate==X.Y.Z -d DIR (for each release to compare), then
    python scripts/accelerate_key_history.py DIR/accelerate-*.whl > rocmcheck/lint/accelerate_keys.json
The keys are the dataclass fields of ClusterConfig and its base BaseConfig (what ClusterConfig.from_yaml_file
compares the file's keys with: cls.__dataclass_fields__), read from the wheels'
accelerate/commands/config/config_args.py with ast: nothing is imported. The keys BaseConfig.process_config turns
into the new format before that comparison (`fp16`, `dynamo_backend`) are listed under "converted".
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile

from packaging.version import Version

SOURCE = "accelerate/commands/config/config_args.py"
CLASSES = ("BaseConfig", "ClusterConfig")


def fields(source: str) -> set[str]:
    names: set[str] = set()
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name in CLASSES:
            found.add(node.name)
            names |= {item.target.id for item in node.body
                      if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
    if found != set(CLASSES):
        raise SystemExit(f"{sorted(set(CLASSES) - found)} not found")
    return names


def converted(source: str) -> set[str]:
    """Keys process_config deletes or pops after reading them (`del config_dict["fp16"]`, `.pop("dynamo_backend")`)."""
    deleted = re.findall(r'del config_dict\["(\w+)"\]', source)
    return set(deleted) | set(re.findall(r'config_dict\.pop\("(\w+)"', source))


def main(paths: list[str]) -> None:
    releases: dict[Version, set[str]] = {}
    old_format: set[str] = set()
    for path in paths:
        version = Version(re.search(r"accelerate-([^-]+)-", path).group(1))
        with zipfile.ZipFile(path) as wheel:
            source = wheel.read(SOURCE).decode()
        releases[version] = fields(source)
        old_format |= converted(source)
    ordered = sorted(releases)
    history = {}
    for key in sorted(set().union(*releases.values())):
        seen = [v for v in ordered if key in releases[v]]
        history[key] = {"first_seen": str(seen[0]), "last_seen": str(seen[-1])}
    json.dump({"_about": "ClusterConfig's keys per accelerate release (scripts/accelerate_key_history.py)",
               "releases_read": [str(v) for v in ordered], "history": history, "converted": sorted(old_format)},
              sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
