"""Every code the lint package can emit is written out literally in its source (never assembled at run time) and
listed in docs/lint.md, and docs/lint.md lists no code the package does not have."""

from __future__ import annotations

import ast
import re

from lint_helpers import REPO

CODE = re.compile(r"lint\.[a-z0-9_]+\.[a-z0-9_]+")


def _source_codes() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((REPO / "rocmcheck" / "lint").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.fullmatch(node.value):
                found.setdefault(node.value, path.name)
    return found


def _assembled_codes() -> list[str]:
    """f-strings that would build a code at run time (f"lint.deepspeed.{name}")."""
    out = []
    for path in sorted((REPO / "rocmcheck" / "lint").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant) \
                    and str(node.values[0].value).startswith("lint."):
                out.append(f"{path.name}:{node.lineno}")
    return out


def _documented_codes() -> set[str]:
    text = (REPO / "docs" / "lint.md").read_text(encoding="utf-8")
    return set(re.findall(r"`(lint\.[a-z0-9_]+\.[a-z0-9_]+)`", text))


def test_every_code_is_written_out_literally():
    assert _assembled_codes() == []
    assert len(_source_codes()) >= 30  # the scan finds the codes (a scan that found none would pass anything)


def test_every_code_is_listed_in_docs_lint_md_and_nothing_else_is():
    source, documented = _source_codes(), _documented_codes()
    missing = {code: where for code, where in source.items() if code not in documented}
    assert not missing, f"codes missing from docs/lint.md: {missing}"
    assert documented <= set(source), f"docs/lint.md lists codes lint does not have: {documented - set(source)}"
