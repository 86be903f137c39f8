"""The arguments a named training script defines, read from its source (parsed with ast, never run): the fields of
its dataclasses (what HfArgumentParser parses besides TrainingArguments: `HfArgumentParser((ModelArguments,
DataTrainingArguments, TrainingArguments))`, as transformers' examples/pytorch/*/run_*.py do) and the options of its
argparse parsers (`add_argument("--max-seq-length")` is `max_seq_length`). With them, a key of a TrainingArguments
file that neither TrainingArguments nor the script defines is HfArgumentParser's "Some keys are not used", not a
key the script may define."""

from __future__ import annotations

import ast
from pathlib import Path

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import read_text_capped
from rocmcheck.safe.text import excerpt


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _option_dest(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    longs = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
             and a.value.startswith("--")]
    return longs[0][2:].replace("-", "_") if longs else None


def script_keys(path: Path) -> set[str]:
    """The argument names `path` defines. BadInput when it cannot be read or is not Python."""
    text = read_text_capped(path, what="training script")
    try:
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise BadInput(f"{excerpt(path)}: not a Python script ({excerpt(exc)})") from None
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _is_dataclass(node):
            keys |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            dest = _option_dest(node)
            if dest:
                keys.add(dest)
    return keys
