"""Regenerate rocmcheck/lint/transformers_keys.json: which TrainingArguments keys each transformers release accepts.

Usage: pip download --no-deps transformers==X.Y.Z -d DIR (for each release to compare), then
    python scripts/transformers_key_history.py DIR/transformers-*.whl > rocmcheck/lint/transformers_keys.json
The keys are the init=True dataclass fields of Seq2SeqTrainingArguments and TrainingArguments (what
HfArgumentParser.parse_dict accepts), read from the wheels' sources with ast: nothing is imported.
Only used when transformers cannot be imported, and to say in which release a key was removed.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile

from packaging.version import Version

FILES = {"TrainingArguments": "transformers/training_args.py",
         "Seq2SeqTrainingArguments": "transformers/training_args_seq2seq.py"}


def init_fields(source: str, class_name: str) -> set[str]:
    """Annotated class attributes, minus field(init=False): dataclasses.fields(cls) if f.init."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            names = set()
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    call = item.value
                    no_init = isinstance(call, ast.Call) and any(
                        kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
                        for kw in call.keywords)
                    if not no_init and not item.target.id.startswith("_"):
                        names.add(item.target.id)
            return names
    raise SystemExit(f"{class_name} not found")


def main(paths: list[str]) -> None:
    releases: dict[Version, set[str]] = {}
    for path in paths:
        version = Version(re.search(r"transformers-([^-]+)-", path).group(1))
        with zipfile.ZipFile(path) as wheel:
            keys = set()
            for cls, name in FILES.items():
                keys |= init_fields(wheel.read(name).decode(), cls)
        releases[version] = keys
    ordered = sorted(releases)
    history = {}
    for key in sorted(set().union(*releases.values())):
        seen = [v for v in ordered if key in releases[v]]
        history[key] = {"first_seen": str(seen[0]), "last_seen": str(seen[-1])}
    json.dump({"releases_read": [str(v) for v in ordered], "history": history}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
