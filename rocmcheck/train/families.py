"""Which model families smoke-train trains, and what in a model it trains with LoRA. No torch here: the model_type
is checked before torch is imported, and the LoRA targets are chosen from names and sizes a caller reads off the
model.

A model folder is trained when the installed transformers builds its model_type as a causal LM: the model_type is
a key of transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (the table AutoModelForCausalLM builds from, keyed by the
model_types of CONFIG_MAPPING), read from transformers' own source without importing it (importing transformers'
auto classes imports torch, seconds before a refusal could be said). Where that table cannot be read from the
source (another layout in a future transformers), the mapping itself is imported.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable, NamedTuple

from rocmcheck import fixes
from rocmcheck.errors import BadInput

CAUSAL_TABLE = "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"
MAX_SOURCE_BYTES = 4 << 20  # transformers 5.25's modeling_auto.py is 122 kB
# A Linear whose leaf name says it routes tokens (Mixtral's gate, Qwen-MoE's shared_expert_gate, a router): a LoRA
# adapter there would train the routing decision itself, which no MoE recipe adapts (peft's all-linear skips it
# by its output size, the expert count).
ROUTER_LEAF = re.compile(r"(^|_)(gate|router)$")
# A module path inside the repeated decoder blocks: a numbered child of a ModuleList (model.layers.3.,
# transformer.h.3.), so the embedding, the final norm and lm_head are never chosen.
IN_DECODER_LAYER = re.compile(r"\.\d+\.")


class Family(NamedTuple):
    model_type: str
    class_name: str | None  # the causal-LM class transformers builds for it; None: it builds none
    transformers_version: str


VERSION_LINE = re.compile(r'^__version__ = ["\']([^"\']+)["\']', re.M)


def transformers_version() -> str | None:
    """The installed transformers' version: its __init__.py's __version__ line (reading the package metadata scans
    every installed distribution: a third of a second on a busy machine), else the metadata."""
    root = _package_root()
    if root is not None:
        found = VERSION_LINE.search(_read(root / "__init__.py"))
        if found:
            return found.group(1)
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return None


def _package_root() -> Path | None:
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=1)
def causal_lm_classes() -> dict[str, str] | None:
    """model_type -> class name for every causal LM the installed transformers builds; None without transformers."""
    root = _package_root()
    if root is None:
        return None
    table = causal_table_from_source(_read(root / "models" / "auto" / "modeling_auto.py"))
    if table:
        return table
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # imports torch

    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_SOURCE_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def causal_table_from_source(text: str) -> dict[str, str]:
    """The MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict([(model_type, class), ...]) assignment of transformers'
    models/auto/modeling_auto.py (the same literal table in 4.x and 5.x), or {} when it is not there as a literal.
    Only the assignment's own lines are parsed where they can be found (the whole file takes a fifth of a second).
    Pure; never raises."""
    start = text.find(f"\n{CAUSAL_TABLE} = ")
    end = text.find("\n)\n", start) if start >= 0 else -1
    if end > start >= 0:
        found = _table_in(text[start + 1:end + 3])
        if found:
            return found
    return _table_in(text)


def _table_in(text: str) -> dict[str, str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == CAUSAL_TABLE
                                                      for t in node.targets)):
            continue
        value = node.value
        if isinstance(value, ast.Call) and len(value.args) == 1:
            value = value.args[0]
        try:
            pairs = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return {}
        items = pairs.items() if isinstance(pairs, dict) else pairs
        try:
            table = {k: v for k, v in items if isinstance(k, str) and isinstance(v, str)}
        except (TypeError, ValueError):
            return {}
        return table
    return {}


def family(model_type: object) -> Family | None:
    """What the installed transformers builds for `model_type` (class None: nothing); None without transformers."""
    table = causal_lm_classes()
    version = transformers_version()
    if table is None or version is None:
        return None
    name = model_type if isinstance(model_type, str) else None
    return Family(str(model_type), table.get(name) if name else None, version)


class UnbuildableFamily(BadInput):
    """A model folder whose model_type the installed transformers does not build as a causal LM."""

    fix = fixes.shell("pip install -U transformers", "a newer transformers may build this model_type; "
                      "rocmcheck smoke-train --model takes any causal LM it builds")


def refusal(fam: Family) -> str:
    """The one line a model folder of a family transformers does not build is refused with."""
    return (f"model_type {fam.model_type!r}: the installed transformers {fam.transformers_version} cannot build it as "
            "a causal LM (AutoModelForCausalLM has no class for it; a newer transformers may have one)")


# -- LoRA targets ----------------------------------------------------------------------------------------------------

class Linear(NamedTuple):
    """One nn.Linear of a model, as named_modules() names it, and its sizes."""

    name: str
    in_features: int
    out_features: int


def lora_targets(linears: Iterable[Linear], num_experts: int | None = None) -> list[str]:
    """The leaf names of the Linear modules LoRA adapts: every Linear inside the decoder layers (attention
    projections, dense MLPs, shared experts, compressed-attention projections), never lm_head or the embedding
    (outside the layers), never a router (ROUTER_LEAF, or a Linear whose output is one score per expert or a single
    gate value). Sorted, each name once (peft's target_modules matches a module whose name ends with one)."""
    leaves: set[str] = set()
    for lin in linears:
        path = f".{lin.name}."
        if not IN_DECODER_LAYER.search(path):
            continue
        leaf = lin.name.rsplit(".", 1)[-1]
        if ROUTER_LEAF.search(leaf) or lin.out_features == 1 or (num_experts and lin.out_features == num_experts
                                                                  and lin.in_features != num_experts):
            continue
        leaves.add(leaf)
    return sorted(leaves)


def num_experts(config: dict) -> int | None:
    """The routed-expert count of a config.json (Mixtral and GPT-OSS: num_local_experts; Qwen-MoE: num_experts;
    DeepSeek: n_routed_experts); None for a dense model."""
    if isinstance(config.get("text_config"), dict) and "hidden_size" not in config:
        config = config["text_config"]
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return value
    return None
