"""The leak finder on the GPU's path, on CPU. On an H100 (benchmarks/RESULTS.md, sections 23 and 26) four
held-back leaks were missed or misnamed that the CPU tests named: a kept graph was called a growing tensor
(`cat_graph`), a running loss was reported as "held by a dict" (`accumulation`, and a kept validation loss at
scale), and an attribute that chains every step's graph was not found at all (`stats`, the Trainer subclass).

Both parts of the H100's run are made here with real torch on CPU:
- the GPU's watch: LeakWatch on a cuda device, its allocator calls (memory_allocated, the memory history, the
  snapshot) answered by a fake torch.cuda that records a trace as the allocator would;
- torch 2.11's autograd nodes (the H100's torch; this box has a newer one): a node held only a weak pointer to its
  Python wrapper, so a wrapper Python let go of was freed and the next one made could take its address, and its
  id(). Newer torch keeps the wrapper while the node lives. OLD_NODES hands grad_fn and next_functions out the
  older way.
The watch alone changes nothing that is named; the nodes made anew hid every kept graph, and the census's own read
of a function's locals (Python <= 3.12) showed up as "held by a dict".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import weakref

import pytest
from test_monitor_leak_heldback import HEAD, TAIL, VARIANTS

# The allocator's side of a GPU run, answered on CPU: a baseline that rises 2 MiB a step, a memory history that
# records one allocation made in the first watched step and still alive at the end (by the batch's line), and a
# snapshot file. The tensors themselves are real CPU tensors.
FAKE_CUDA = '''
import os
import torch

_state = {"allocated": 0, "recording": False, "trace": []}


def _memory_allocated(device=None):
    _state["allocated"] += 2 * 2**20
    return _state["allocated"]


def _record_memory_history(enabled="all", **kwargs):
    _state["recording"] = enabled is not None
    if _state["recording"]:  # what the first watched step allocates, as the trace records it
        script = os.path.abspath("loop.py")
        lines = open(script).read().splitlines()
        made = next(i for i, text in enumerate(lines, 1) if "return torch.randn" in text)
        called = next(i for i, text in enumerate(lines, 1) if "= batch()" in text)
        frames = [{"filename": script, "line": made, "name": "batch"},
                  {"filename": script, "line": called, "name": "<module>"}]
        _state["trace"] = [{"action": "alloc", "addr": 0x7F0000000000, "size": 2048, "stream": 0, "time_us": 1,
                            "frames": frames}]


def _snapshot():
    return {"segments": [], "device_traces": [list(_state["trace"])]}


def _dump_snapshot(path):
    open(path, "wb").close()


torch.cuda.memory_allocated = _memory_allocated
torch.cuda.current_device = lambda: 0
torch.cuda.memory._record_memory_history = _record_memory_history
torch.cuda.memory._snapshot = _snapshot
torch.cuda.memory._dump_snapshot = _dump_snapshot
'''

# torch 2.11's autograd nodes as Python sees them: a wrapper the node points to weakly, made anew once no Python
# reference is left (so a freed wrapper's address, and id(), goes to the next one made).
OLD_NODES = '''
import weakref
import torch


class Node:
    __slots__ = ("node", "__weakref__")

    def __init__(self, node):
        self.node = node

    @property
    def next_functions(self):
        return tuple((wrap(n), i) for n, i in self.node.next_functions)

    def __getattr__(self, name):
        return getattr(self.node, name)


_types, _wrappers = {}, {}


def wrap(node):
    if node is None:
        return None
    ref = _wrappers.get(id(node))
    wrapper = ref() if ref is not None else None
    if wrapper is None or wrapper.node is not node:
        cls = _types.get(type(node))
        if cls is None:
            cls = _types[type(node)] = type(type(node).__name__, (Node,), {"__slots__": ()})
        wrapper = cls(node)
        _wrappers[id(node)] = weakref.ref(wrapper)
    return wrapper


_grad_fn = torch.Tensor.grad_fn
torch.Tensor.grad_fn = property(lambda t: wrap(_grad_fn.__get__(t)))
'''

GPU_HEAD = "import fake_cuda, old_nodes\n" + textwrap.dedent(HEAD)

ON_CUDA = 'always=True, device=torch.device("cuda", 0)'


def run_on_gpu_path(tmp_path, body: str) -> tuple[str, str]:
    """Run a training loop (HEAD + body + TAIL) with the GPU's watch and torch 2.11's nodes; (RESULT line,
    the report's lines on stderr)."""
    work = tmp_path / "rocmcheck" / "job"
    work.mkdir(parents=True)
    (work / "fake_cuda.py").write_text(FAKE_CUDA)
    (work / "old_nodes.py").write_text(OLD_NODES)
    script = GPU_HEAD + textwrap.dedent(body).replace("always=True", ON_CUDA) + \
        textwrap.dedent(TAIL)
    (work / "loop.py").write_text(script)
    proc = subprocess.run([sys.executable, "loop.py"], capture_output=True, text=True, timeout=300, cwd=work)
    result = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT")), None)
    assert result is not None, proc.stderr[-3000:]
    return result, proc.stderr


@pytest.mark.parametrize("name", ["stats", "accumulation", "cat_graph"])
def test_a_held_back_leak_on_the_gpu_path_is_named_by_its_holder_line(tmp_path, name):
    """On the H100: `stats` found nothing, `accumulation` was "held by a dict", `cat_graph` a growing tensor."""
    body, holder, line, advice = VARIANTS[name]
    result, report = run_on_gpu_path(tmp_path, body)
    assert result.startswith("RESULT fail") and holder in result, result
    assert f"(`{line}`)" in result and advice in result, result
    assert "a tensor that grows" not in result, result
    assert "held by a dict" not in report, report  # the census's own read of the loop's locals kept nothing
    assert "allocation of 2.0 KiB each (2.0 KiB) survive the step" in report, report  # the trace adds its site


KEPT_VALIDATION_LOSS = """
    total = 0

    def train():
        global total
        for step in range(8):
            x, y = batch()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            val_loss = model(torch.randn(256, 32)).pow(2).mean()  # with its graph, never backpropagated
            total = total + val_loss

    with leak_watch(opt, out_dir=".", always=True) as watch:
        train()
"""


def test_a_kept_validation_loss_is_named_not_held_by_a_dict(tmp_path):
    """The H100's part 2 at small scale: a running validation loss whose graph keeps every step's activations."""
    result, report = run_on_gpu_path(tmp_path, KEPT_VALIDATION_LOSS)
    assert result.startswith("RESULT fail") and "`total` (module __main__) holds an autograd graph" in result, result
    assert "(`total = total + val_loss`)" in result and "val_loss.item()" in result, result
    assert "held by a dict" not in report, report


# ---- pure: the graph walk with nodes whose Python wrappers are made anew -------------------------------------

class _CppNode:
    def __init__(self, *inputs: "_CppNode") -> None:
        self.inputs, self.wrapper = inputs, None


class _Wrapper:
    """A node's Python wrapper as torch 2.11 makes it: the node points to it weakly."""

    __slots__ = ("node", "__weakref__")

    def __init__(self, node: _CppNode) -> None:
        self.node = node

    @property
    def next_functions(self) -> tuple:
        return tuple((_wrap(n), 0) for n in self.node.inputs)


def _wrap(node: _CppNode) -> _Wrapper:
    wrapper = node.wrapper() if node.wrapper is not None else None
    if wrapper is None:
        wrapper = _Wrapper(node)
        node.wrapper = weakref.ref(wrapper)
    return wrapper


class _Tensor:
    def __init__(self, node: _CppNode) -> None:
        self.node = node

    @property
    def grad_fn(self) -> _Wrapper:
        return _wrap(self.node)


def test_graph_nodes_counts_every_node_of_a_chain_whose_wrappers_are_made_anew():
    from rocmcheck.monitor.leak import graph_nodes

    running = None
    counts = []
    for step in range(1, 9):
        loss = _CppNode(_CppNode(_CppNode(_CppNode())))  # a step's graph: four nodes
        running = loss if running is None else _CppNode(running, loss)  # total = total + loss: one more
        counts.append(graph_nodes([_Tensor(running)]))
    assert counts == [4 + 5 * (step - 1) for step in range(1, 9)], counts


def test_reading_a_functions_locals_keeps_no_tensor_alive():
    """The census reads a running function's names through frame.f_locals: on Python <= 3.12 a dict cached on the
    frame, which kept that step's tensors alive (and showed them as "held by a dict") until the next read."""
    torch = pytest.importorskip("torch")
    from rocmcheck.monitor.leak import census, user_frames

    def loop() -> bool:
        x = torch.randn(64, 64)
        census(user_frames(), torch)
        seen = weakref.ref(x)
        x = torch.randn(64, 64)  # the next step's batch, in the frame that still runs
        return seen() is None

    assert loop()


def test_a_survivor_kept_by_a_global_is_named_with_its_line(tmp_path):
    """A module's namespace is where its globals live: the holder is the global, with the line that assigned it,
    never "held by a dict" or an attribute of the module."""
    torch = pytest.importorskip("torch")
    import importlib.util

    from rocmcheck.monitor.leak import find_holders

    path = tmp_path / "keeps_best.py"
    path.write_text("import torch\n\nbest = None\nout = torch.randn(8, 8, requires_grad=True) * 2\nbest = out\n")
    spec = importlib.util.spec_from_file_location("keeps_best", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["keeps_best"] = module
    try:
        spec.loader.exec_module(module)
        found = find_holders([module.best, torch.randn(2)])
    finally:
        del sys.modules["keeps_best"]
    assert found[0].holder == "tensor `best` (module keeps_best)", found[0]
    assert found[0].line == "keeps_best.py:5 (`best = out`)" and "`out.detach()`" in found[0].advice, found[0]
