"""The package's layers, read from its own imports (those inside functions too): a module imports only from its
own unit or from a lower one, and no two modules import each other, directly or round a longer loop. The order,
lowest first, is LAYERS; units of one rank are peers and never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rocmcheck"

LAYERS: list[tuple[str, ...]] = [
    # "rocmcheck": the __init__
    ("rocmcheck", "units", "record", "heap", "errors", "package_data", "versions"),
    ("safe", "outliers"),  # the one reader/writer/loader/sanitiser; the outlier maths
    ("fixes",),  # the fix type and every fix text
    ("result",),  # CheckResult and the one exit rule
    ("runner",),  # the one command runner
    ("child",),  # the one child protocol
    ("knowledge",),
    ("facts",),  # collection, parsers, locations, launch topology, torch device facts
    ("checks",),
    ("report",),
    ("monitor", "plan", "lint", "probes", "buildenv", "recipes"),
    ("train",),
    ("doctor",),
    ("compare", "triage"),
    ("commands",),
    ("cli",),
    ("__main__",),
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rocmcheck"


def _imports() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                candidates = [f"{base}.{a.name}" for a in node.names] + [base]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            for cand in candidates:
                if cand.split(".")[0] != "rocmcheck":
                    continue
                while cand and cand not in modules:  # `import rocmcheck.x.y` of a name inside a module
                    cand = cand.rpartition(".")[0]
                if cand and cand != name:
                    targets.add(cand)
                    break
        found[name] = targets
    return found


def test_every_unit_has_a_layer():
    units = {_unit(m) for m in _imports()}
    assert units <= set(RANK), f"units without a layer: {sorted(units - set(RANK))}"


def test_no_import_runs_up_or_across_the_layers():
    bad = []
    for module, targets in _imports().items():
        for target in targets:
            a, b = _unit(module), _unit(target)
            if a != b and RANK[b] >= RANK[a]:
                bad.append(f"{module} imports {target} ({a} is layer {RANK[a]}, {b} is layer {RANK[b]})")
    assert not bad, "\n".join(sorted(bad))


def test_no_module_import_loop():
    graph = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not loops, f"import loops: {loops}"
