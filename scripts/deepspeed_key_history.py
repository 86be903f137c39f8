"""Regenerate the version table in rocmcheck/lint/deepspeed_keys.json from DeepSpeed release sdists.

Usage: pip download --no-deps --no-binary :all: deepspeed==X.Y.Z -d DIR (for each release to compare),
then: python scripts/deepspeed_key_history.py DIR/deepspeed-*.tar.gz
Prints, per config section, the first and last release (of those given) whose pydantic model
accepts each key. Reads the sources with ast; nothing is imported or built.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tarfile

from packaging.version import Version

# section -> (file inside the sdist, pydantic class)
MODELS = {
    "zero_optimization": ("deepspeed/runtime/zero/config.py", "DeepSpeedZeroConfig"),
    "zero_optimization.offload_param": ("deepspeed/runtime/zero/offload_config.py", "DeepSpeedZeroOffloadParamConfig"),
    "zero_optimization.offload_optimizer": (
        "deepspeed/runtime/zero/offload_config.py",
        "DeepSpeedZeroOffloadOptimizerConfig",
    ),
    "bf16": ("deepspeed/runtime/precision_config.py", "DeepSpeedBF16Config"),
    "fp16": ("deepspeed/runtime/precision_config.py", "DeepSpeedFP16Config"),
}


def model_keys(source: str, class_name: str) -> set[str] | None:
    """Field names plus their aliases (DeepSpeed accepts both: populate_by_name=True)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            keys: set[str] = set()
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    keys.add(item.target.id)
                    if isinstance(item.value, ast.Call):
                        for kw in item.value.keywords:
                            if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                                keys.add(kw.value.value)
            return keys
    return None


def removed_keys(source: str) -> dict[str, list[str]]:
    """The _REMOVED_*_CONFIG_KEYS tables DeepSpeed uses to reject keys of removed features."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name) and re.fullmatch(r"_REMOVED_\w+_KEYS", target.id):
                    found[target.id] = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    return found


def main(paths: list[str]) -> None:
    table: dict[str, dict[str, list[str]]] = {}
    has_model: dict[str, list[str]] = {}  # releases where the section is a strict pydantic model at all
    removed: dict[str, dict[str, list[str]]] = {}
    versions = []
    for path in paths:
        version = re.search(r"deepspeed-([0-9.]+)\.tar\.gz$", path).group(1)
        versions.append(version)
        with tarfile.open(path) as tar:
            members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}

            def read(name: str) -> str | None:
                member = members.get(name)
                return tar.extractfile(member).read().decode() if member else None

            for section, (file, cls) in MODELS.items():
                src = read(file)
                keys = model_keys(src, cls) if src else None
                if keys is not None:
                    has_model.setdefault(section, []).append(version)
                for key in keys or ():
                    table.setdefault(section, {}).setdefault(key, []).append(version)
            cfg = read("deepspeed/runtime/config.py") or ""
            for name, keys in removed_keys(cfg).items():
                for key in keys:
                    removed.setdefault(name, {}).setdefault(key, []).append(version)
    versions.sort(key=Version)
    newest = versions[-1]
    out = {"releases_read": versions, "keys": {}, "removed": {}, "strict_sections": {}}
    for section, keys in table.items():  # every key the newest release accepts, per strict section
        out["strict_sections"][section] = sorted(k for k, seen in keys.items() if newest in seen)
    for section, keys in table.items():
        for key, seen in keys.items():
            seen.sort(key=Version)
            strict_in = sorted(has_model[section], key=Version)
            if seen != strict_in:  # only keys that some strict release rejects are interesting
                out["keys"][f"{section}.{key}"] = {"first_seen": seen[0], "last_seen": seen[-1]}
    for name, keys in removed.items():
        for key, seen in keys.items():
            out["removed"][key] = {"table": name, "first_rejected": min(seen, key=Version)}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
