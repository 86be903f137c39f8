"""Reading config files: JSON (duplicate keys rejected, as DeepSpeed does) and YAML, through the one capped reader
and the one limited loader (rocmcheck/safe)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rocmcheck.errors import BadInput
from rocmcheck.safe.structured import LimitedSafeLoader, load_file
from rocmcheck.safe.text import excerpt


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
    last one silently; a training file with two `learning_rate:` lines runs with the second). Checked on
    each mapping as it is composed, before merges are applied: block and flow mappings alike
    (`zero_optimization: {stage: 2, stage: 3}`), and `<<:` merges may still be overridden on purpose."""

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # a non-scalar key is refused later (check_plain_data: keys are strings)
            key, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
            if key in seen:
                where = f"lines {seen[key]} and {line}" if seen[key] != line else f"both on line {line}"
                raise _DuplicateKey(f'{excerpt(key_node.value)}" appears twice ({where})')
            seen[key] = line
        return node


def load_mapping(path: Path) -> dict:
    try:
        data = load_file(path, what="config file", object_pairs_hook=_no_duplicates, loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        if path.suffix.lower() in (".yaml", ".yml"):
            raise BadInput(f"{excerpt(path)}: key \"{exc}: the run would silently use the last one") from None
        raise BadInput(f"{excerpt(path)}: key \"{excerpt(exc)}\" appears twice (DeepSpeed rejects duplicate "
                       "keys)") from None
    if not isinstance(data, dict):
        raise BadInput(f"{excerpt(path)}: expected a mapping of keys at the top, found {type(data).__name__}")
    return data
