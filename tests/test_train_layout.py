"""The training package's layout: the cheap modules import on a machine without torch (the CLI validates
input, the launcher of several ranks builds reports and the doctor reads them before torch is paid for),
and nothing in the package trains or changes the environment at import time."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "rocmcheck" / "train"
TORCH_FREE = ("config", "report", "task", "ds_config", "reference", "verdicts", "comparisons", "kernels", "fit",
              "outputs", "launch", "runner", "request", "model_files", "doctor_stage", "child")


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory) -> Path:
    """A sys.path entry whose `torch` package raises on import, as on a machine without torch."""
    stub = tmp_path_factory.mktemp("no-torch")
    (stub / "torch").mkdir()
    (stub / "torch" / "__init__.py").write_text('raise ImportError("No module named torch (hidden by the test)")\n')
    return stub


@pytest.mark.parametrize("module", TORCH_FREE)
def test_torch_free_module_imports_without_torch(no_torch, module):
    code = (f"import sys; sys.path[:0] = [{str(no_torch)!r}, {str(REPO)!r}]\n"
            f"import rocmcheck.train.{module}\n"
            "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_stub_really_hides_torch(no_torch):
    code = f"import sys; sys.path[:0] = [{str(no_torch)!r}, {str(REPO)!r}]\nimport rocmcheck.train.run\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "hidden by the test" in proc.stderr


def test_launch_builds_an_empty_report_without_torch(no_torch):
    code = (f"import sys, json; sys.path[:0] = [{str(no_torch)!r}, {str(REPO)!r}]\n"
            "from rocmcheck.train import launch\n"
            "from rocmcheck.train.report import RunReport\n"
            "print(json.dumps(RunReport([]).to_dict()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == '{"schema": 1, "results": [], "metrics": [], "info": {}}'


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rocmcheck.train"):
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("rocmcheck.train"))
    return {n for n in names if (TRAIN / (n.rsplit(".", 1)[-1] + ".py")).is_file()}


def test_no_import_cycle_in_the_package():
    graph = {f"rocmcheck.train.{p.stem}": {f"rocmcheck.train.{n.rsplit('.', 1)[-1]}" for n in _imports(p)}
             for p in TRAIN.glob("*.py")}
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            assert node != start, f"import cycle through {start}"
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))


def test_no_module_sets_environment_variables_at_import():
    for path in TRAIN.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only: functions may set them when called
            text = ast.unparse(node)
            inside = isinstance(node, (ast.FunctionDef, ast.ClassDef))
            assert "os.environ" not in text or inside, f"{path.name}: {text[:80]}"
