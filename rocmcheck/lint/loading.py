"""Reading config files: JSON (duplicate keys rejected, as DeepSpeed does) and YAML, through the one capped reader
and the one limited loader (rocmcheck/safe); and finding a file one config names by path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import expand_user
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


def resolve_named_file(value: str, config_file: Path, opened: str, run: str) -> tuple[Path | None, str | None]:
    """A file `config_file` names by path (a DeepSpeed config), as its consumer opens it: relative to the working
    directory. (path, None) when found from here; (path, why) when it exists only next to config_file (linted too,
    with the warning that the run would not find it); (None, why or None) when found nowhere (why: a ~user this
    machine does not have). opened: when the consumer opens it ("of accelerate launch"); run: what to start from
    the right folder ("launch")."""
    try:
        given = expand_user(value)
    except BadInput as exc:
        return None, str(exc)
    if given.is_file():
        return given, None
    beside = config_file.parent / given
    if not given.is_absolute() and not value.startswith("~") and beside.is_file():
        return beside, (f"'{excerpt(value)}' is opened relative to the working directory {opened}; it exists only "
                        f"relative to {excerpt(config_file.name)}, so {run} from {excerpt(config_file.parent)} or use "
                        "an absolute path")
    return None, None
