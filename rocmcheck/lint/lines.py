"""Where each key of a JSON or YAML config file is written: dotted key path -> line number (1-based).

JSON is YAML's flow syntax, so PyYAML's composer (nodes with positions, no values built, no
aliases expanded) serves both, through the one capped reader and the limited loader. Used only to point
messages at a line; a file it cannot read gives {}.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import read_text_capped
from rocmcheck.safe.structured import LimitedSafeLoader


def key_lines(path: str | Path) -> dict[str, int]:
    try:
        root = yaml.compose(read_text_capped(path, what="config file"), Loader=LimitedSafeLoader)
    except (BadInput, yaml.YAMLError, RecursionError):
        return {}
    lines: dict[str, int] = {}
    stack = [("", root)]
    while stack:
        prefix, node = stack.pop()
        if not isinstance(node, yaml.MappingNode):
            continue
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            path_here = f"{prefix}.{key_node.value}" if prefix else key_node.value
            lines.setdefault(path_here, key_node.start_mark.line + 1)
            stack.append((path_here, value_node))
    return lines


def line_for(lines: dict[str, int], key_path: str) -> int | None:
    """The key's own line, or its nearest written parent's (a message about a missing child key)."""
    while key_path:
        if key_path in lines:
            return lines[key_path]
        key_path = key_path.rpartition(".")[0]
    return None
