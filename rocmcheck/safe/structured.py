"""JSON and YAML from files a person hands over, with limits: nesting depth, YAML alias expansion ("billion
laughs"), integer size, and only values JSON can hold. Every refusal is a BadInput whose str() is one line.

One loader for every command: lint's config files, plan's config.json, smoke-train's --deepspeed file and
doctor's bundles. Callers that want more (lint rejects duplicate keys) pass an object_pairs_hook for JSON or a
subclass of LimitedSafeLoader for YAML."""

from __future__ import annotations

import datetime
import json
import math
import os
from typing import Any, Callable

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, SequenceNode

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import MAX_CONFIG_BYTES, read_text_capped
from rocmcheck.safe.text import KEY_ECHO_CHARS, excerpt

# Real configs nest 4 deep (zero_optimization.offload_param.device), bundles 6; 64 is far above both and far
# below Python's recursion limit, so nothing that walks the data later can hit RecursionError.
MAX_DEPTH = 64
# Values after YAML aliases are expanded: a real config has a few hundred; nine levels of nine aliases have 387
# million and take minutes and gigabytes to walk.
MAX_YAML_NODES = 100_000
# 128 bits (39 digits): above any size, count or uint64 sentinel a config or bundle holds; bigger is garbage that
# would make arithmetic on it slow or overflow floats.
MAX_INT_BITS = 128
YAML_SUFFIXES = (".yaml", ".yml")


def _where(path: tuple[Any, ...]) -> str:
    """Where in the document a value is, as one line: each key through excerpt (a newline in a key is shown as
    `\\n`, never written)."""
    if not path:
        return "the top level"
    out = ""
    for part in path:
        key = excerpt(part, KEY_ECHO_CHARS)
        out += f"[{part}]" if isinstance(part, int) else (f".{key}" if out else key)
    return out


_TYPE_NAMES = {datetime.datetime: "a date and time", datetime.date: "a date", set: "a set", frozenset: "a set",
               bytes: "binary data", bytearray: "binary data", tuple: "a sequence"}


def check_plain_data(value: Any, *, allow_nonfinite: bool = False, max_depth: int = MAX_DEPTH) -> None:
    """BadInput unless value is what JSON can hold: dicts with string keys, lists, strings, bools, None,
    integers of at most MAX_INT_BITS bits, finite floats (non-finite ones only when allowed), at most max_depth
    deep. Iterative, so its own depth is no limit."""
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(value, (), 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > max_depth:
            raise BadInput(f"nested more than {max_depth} levels deep at {_where(path[:3])}...")
        if isinstance(node, dict):
            for key, child in node.items():
                if not isinstance(key, str):
                    shown = key if not isinstance(key, bytes) else "binary"
                    raise BadInput(f"key {str(shown)[:40]!r} at {_where(path)} is {_describe(key)}, not a "
                                         "string (quote it)")
                stack.append((child, path + (key,), depth + 1))
        elif isinstance(node, list):
            stack.extend((child, path + (i,), depth + 1) for i, child in enumerate(node))
        elif node is None or isinstance(node, (str, bool)):
            continue
        elif isinstance(node, int):
            if node.bit_length() > MAX_INT_BITS:
                raise BadInput(f"{_where(path)}: an integer of {node.bit_length()} bits is too large "
                                     f"(at most {MAX_INT_BITS})")
        elif isinstance(node, float):
            if not allow_nonfinite and not math.isfinite(node):
                raise BadInput(f"{_where(path)}: {node} is not a finite number")
        else:
            raise BadInput(f"{_where(path)}: {_describe(node)} is not a value JSON can hold (quote it to "
                                 "make it a string)")


def _describe(value: Any) -> str:
    for typ, name in _TYPE_NAMES.items():
        if isinstance(value, typ):
            return name
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _int_limit_message(exc: ValueError) -> str | None:
    text = str(exc)
    if "integer string conversion" in text or "int_max_str_digits" in text:
        return f"an integer has more than {_int_max_digits()} digits"
    return None


def _int_max_digits() -> int:
    import sys

    return getattr(sys, "get_int_max_str_digits", lambda: 4300)()


def parse_json(text: str, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
               allow_nonfinite: bool = False) -> Any:
    """json.loads with the limits above. Errors from object_pairs_hook other than ValueError pass through."""
    try:
        data = json.loads(text, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise BadInput(f"nested more than {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"not valid JSON (line {exc.lineno} column {exc.colno}): {exc.msg}") from None
    except ValueError as exc:
        msg = _int_limit_message(exc)
        if msg is None:
            raise
        raise BadInput(msg) from None
    check_plain_data(data, allow_nonfinite=allow_nonfinite)
    return data


class LimitedSafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses, while composing (before anything is built), documents nested deeper than
    MAX_DEPTH, aliases that expand past MAX_YAML_NODES values, and recursive aliases. Subclass it to add rules
    (construct_mapping for duplicate keys, for instance)."""

    max_depth = MAX_DEPTH
    max_nodes = MAX_YAML_NODES

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._rc_depth = 0

    def _refuse(self, message: str, event: Any) -> None:
        mark = getattr(event, "start_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise BadInput(message + where)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and getattr(target, "_rc_size", None) is None:
                self._refuse(f"alias *{event.anchor} refers to a node that contains it (a recursive structure)", event)
            return super().compose_node(parent, index)
        self._rc_depth += 1
        if self._rc_depth > self.max_depth:
            self._refuse(f"nested more than {self.max_depth} levels deep", self.peek_event())
        try:
            node = super().compose_node(parent, index)
        finally:
            self._rc_depth -= 1
        if isinstance(node, SequenceNode):
            size = 1 + sum(child._rc_size for child in node.value)
        elif isinstance(node, MappingNode):
            size = 1 + sum(k._rc_size + v._rc_size for k, v in node.value)
        else:
            size = 1
        if size > self.max_nodes:
            self._refuse(f"expands to more than {self.max_nodes} values (aliases nested in aliases: refused)",
                         node)
        node._rc_size = size
        return node


def parse_yaml(text: str, *, loader: type[LimitedSafeLoader] = LimitedSafeLoader,
               allow_nonfinite: bool = False) -> Any:
    """One YAML document, safely (no Python objects), with the limits above. yaml.YAMLError subclasses pass
    through so callers can word them with their line number; BadInput for the limits."""
    instance = loader(text)
    try:
        data = instance.get_single_data()
    except RecursionError:
        raise BadInput(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        if isinstance(exc, BadInput):
            raise
        msg = _int_limit_message(exc)
        raise BadInput(msg or f"a value cannot be read: {str(exc)[:200]}") from None
    except (TypeError, OverflowError) as exc:  # e.g. an unhashable key: {[1]: x}, or ? [a]: b
        raise BadInput(f"a value cannot be read: {str(exc)[:200]}") from None
    finally:
        instance.dispose()
    check_plain_data(data, allow_nonfinite=allow_nonfinite)
    return data


def yaml_scalar(value: str) -> str:
    """value as one YAML scalar, quoted as YAML needs: a path with `#`, `: ` or a newline stays one string
    (`deepspeed: /data/ds #1/z.json` unquoted would read as `/data/ds`)."""
    return yaml.safe_dump(str(value), default_style='"', width=float("inf"), allow_unicode=True).strip()


def describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1})" if mark else ""
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or ["?"])[0]
    return f"not valid YAML{where}: {' '.join(str(problem).split())}"


def load_file(path: str | os.PathLike, *, limit: int = MAX_CONFIG_BYTES, what: str = "config file",
              fmt: str | None = None, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
              loader: type[LimitedSafeLoader] = LimitedSafeLoader, allow_nonfinite: bool = False) -> Any:
    """Read (the capped reader) and parse one JSON or YAML file. fmt: "json", "yaml" or None (by suffix: .yaml and
    .yml are YAML, anything else JSON). BadInput with one line naming the file for every problem."""
    text = read_text_capped(path, limit=limit, what=what)
    if fmt is None:
        fmt = "yaml" if str(path).lower().endswith(YAML_SUFFIXES) else "json"
    try:
        if fmt == "yaml":
            try:
                return parse_yaml(text, loader=loader, allow_nonfinite=allow_nonfinite)
            except yaml.YAMLError as exc:
                raise BadInput(describe_yaml_error(exc)) from None
        return parse_json(text, object_pairs_hook=object_pairs_hook, allow_nonfinite=allow_nonfinite)
    except BadInput as exc:
        raise BadInput(f"{excerpt(path)}: {exc}") from None
