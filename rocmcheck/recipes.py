"""The bundled recipes (top-level recipes/ in the source tree, rocmcheck/recipes_data when installed).

rocmcheck/recipes_data is a symlink to ../recipes, so setuptools' package discovery ships the files
as package data and importlib.resources finds them in an installed copy; from a source checkout
whose symlink was lost (e.g. a zip on Windows), the top-level recipes/ folder is used instead.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable  # importlib.abc.Traversable is gone in Python 3.14
from pathlib import Path

from rocmcheck.errors import BadInput
from rocmcheck.package_data import folder
from rocmcheck.safe.files import write_atomic
from rocmcheck.safe.structured import yaml_scalar
from rocmcheck.safe.text import excerpt

__all__ = ["Recipe", "all_recipes", "recipes_root", "write_recipe", "yaml_scalar"]

RECIPE_SUFFIXES = (".json", ".yaml", ".yml")
# `deepspeed: name.json` in a LLaMA-Factory YAML: the DeepSpeed config that `write` copies along.
_DEEPSPEED_LINE = re.compile(r"^(deepspeed:\s*)(\S+)(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Recipe:
    name: str  # file name without suffix: "zero3-offload"
    filename: str
    kind: str  # "deepspeed" or "llamafactory"
    summary: str  # first comment line (YAML) or a fixed line (JSON)
    text: str

    def deepspeed_dependency(self) -> str | None:
        match = _DEEPSPEED_LINE.search(self.text) if self.kind == "llamafactory" else None
        return match.group(2) if match else None


def recipes_root() -> Traversable:
    try:
        root = folder("rocmcheck.recipes_data")
        if root.is_dir() and any(root.iterdir()):
            return root
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    return Path(__file__).resolve().parents[1] / "recipes"


_JSON_SUMMARIES = {
    "zero2": "DeepSpeed ZeRO-2, bf16: optimizer states and gradients sharded across GPUs",
    "zero3": "DeepSpeed ZeRO-3, bf16: parameters sharded too",
    "zero3-offload": "DeepSpeed ZeRO-3, bf16, optimizer and parameters offloaded to CPU (pinned memory)",
}


def all_recipes() -> dict[str, Recipe]:
    found: dict[str, Recipe] = {}
    for entry in sorted(recipes_root().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(RECIPE_SUFFIXES):
            continue
        name = entry.name.rsplit(".", 1)[0]
        text = entry.read_text(encoding="utf-8")
        if entry.name.endswith(".json"):
            kind, summary = "deepspeed", _JSON_SUMMARIES.get(name, "DeepSpeed config")
        else:
            kind = "llamafactory"
            first = next((ln for ln in text.splitlines() if ln.startswith("#")), "# LLaMA-Factory training file")
            summary = first.lstrip("# ").strip()
        found[name] = Recipe(name, entry.name, kind, summary, text)
    return found


def write_recipe(recipe: Recipe, directory: Path, *, force: bool = False) -> list[Path]:
    """Write the recipe (and, for a LLaMA-Factory YAML, the DeepSpeed config it uses) into directory.
    The YAML's deepspeed: line is made absolute: LLaMA-Factory opens it relative to the working
    directory, not to the YAML. Only the folder is resolved, never the file names in it: a symbolic link
    planted under a recipe's name is refused (replaced itself with force), never written through.
    Raises BadInput rather than overwrite without force."""
    catalog = all_recipes()
    directory = Path(directory)
    if directory.is_symlink() and not directory.is_dir():  # dangling, or a loop: mkdir would create its target
        raise BadInput(f"cannot write into {excerpt(directory)}: it is a symbolic link to no folder")
    try:
        target_dir = directory.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop further up the folder's path
        raise BadInput(f"cannot write into {excerpt(directory)}: {exc}") from None
    plan: list[tuple[Path, str]] = []
    dependency = recipe.deepspeed_dependency()
    text = recipe.text
    if dependency:
        dep = catalog[dependency.rsplit(".", 1)[0]]
        dep_path = target_dir / dep.filename
        plan.append((dep_path, dep.text))
        quoted = yaml_scalar(str(dep_path))
        text = _DEEPSPEED_LINE.sub(lambda m: f"{m.group(1)}{quoted}{m.group(3)}", text, count=1)
    plan.append((target_dir / recipe.filename, text))
    existing = [p for p, _ in plan if os.path.lexists(p)]
    if existing and not force:
        raise BadInput(f"not overwriting {', '.join(excerpt(p) for p in existing)} (use --force)")
    target_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for path, content in plan:
            write_atomic(path, content, force=force)
            written.append(path)
    except (OSError, BadInput):
        for path in written:  # all or nothing: a half-written pair would block the rerun
            if path not in existing:
                path.unlink(missing_ok=True)
        raise
    return [p for p, _ in plan]
