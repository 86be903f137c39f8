"""Reading config files: JSON (duplicate keys rejected, as DeepSpeed does) and YAML, through the one capped reader
and the one limited loader (rocmcheck/safe)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rocmcheck.errors import BadInput
from rocmcheck.safe.structured import LimitedSafeLoader, load_file


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _UniqueKeyLoader(LimitedSafeLoader):
    """yaml.safe_load, except that a key given twice in one mapping is an error (PyYAML keeps the
    last one silently; a training file with two `learning_rate:` lines runs with the second)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges may be overridden on purpose
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: let PyYAML report it
                    continue
                if first != key_node.start_mark.line + 1:
                    raise _DuplicateKey(f"{key}\" appears twice (lines {first} and {key_node.start_mark.line + 1})")
        return super().construct_mapping(node, deep=deep)


def load_mapping(path: Path) -> dict:
    try:
        data = load_file(path, what="config file", object_pairs_hook=_no_duplicates, loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        if path.suffix.lower() in (".yaml", ".yml"):
            raise BadInput(f"{path}: key \"{exc}: the run would silently use the last one") from None
        raise BadInput(f"{path}: key \"{exc}\" appears twice (DeepSpeed rejects duplicate keys)") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a mapping of keys at the top, found {type(data).__name__}")
    return data
