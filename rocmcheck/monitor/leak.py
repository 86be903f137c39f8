"""Find the line that leaks, from inside the training process. One line to add:

    HF Trainer:   from rocmcheck.monitor.leak import LeakWatchCallback; trainer.add_callback(LeakWatchCallback())
    own loop:     from rocmcheck.monitor.leak import leak_watch
                  with leak_watch(optimizer):        # or: with leak_watch() as w: ... w.step() after each step
                      for batch in loader: ...

After every optimizer step it reads the allocator's post-step baseline (torch.cuda.memory_allocated: weights,
optimizer state and whatever survived; on CPU the process's resident memory after returning freed heap, as
smoke-train measures it). While that baseline stays put it does nothing else. When it rises step after step it
watches two steps closely:

- on a GPU (CUDA or ROCm, the same calls) it turns on the allocator's history
  (torch.cuda.memory._record_memory_history) and, from the trace, lists the allocations made during the first
  watched step that are still alive after the second, grouped by their Python stack, largest first, with
  file:line; the snapshot is written for PyTorch's memory visualizer (https://pytorch.org/memory_viz);
- everywhere (CPU too) it lists the tensors born in that step that are still reachable after the next one, finds
  what holds them (a list, a dict, an attribute) and the line that puts them there, and says what to keep
  instead -- "keep `loss.item()`" for a kept scalar loss with its autograd graph.

The pure parts (survivors in a snapshot trace, grouping by stack, the source-line search) take plain data and are
tested without a GPU. torch is imported only inside the training process, when a watch starts.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import gc
import inspect
import linecache
import os
import re
import sys
import time
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from rocmcheck.fixes import Fix, edit, note
from rocmcheck.units import MIB, fmt_bytes

if TYPE_CHECKING:
    from rocmcheck.result import CheckResult

# Steps left alone at the start: AdamW creates its state at step 1, allocators grow their caches once.
WARMUP_STEPS = 2
# The baseline must rise at each of this many consecutive steps before a watch starts.
TRIGGER_STEPS = 3
# ... by at least this much each time. GPU: the allocator counts exact bytes and a clean run is flat to the byte
# after step 1 (smoke-train's measurement), so 1 MiB is far above noise and far below a kept graph. CPU: resident
# memory moves with heap fragmentation by a few MiB (smoke-train's clean runs wander < 8 MiB over a run).
MIN_RISE_BYTES = {"gpu": 1 * MIB, "cpu": 4 * MIB}
# Allocator history entries kept while watching; a 7B model's step makes a few thousand allocations.
MAX_HISTORY_ENTRIES = 200_000
# Frames from these paths are PyTorch/library internals, not the line a person wrote.
# rocmcheck's own package folder: its frames are the finder's, not the person's (a path that merely contains a
# folder named rocmcheck, such as a checkout of this repository holding the person's script, is theirs).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
LIBRARY_MARKERS = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen", "/lib/python3", "/lib64/python3")
TORCH_MARKERS = ("/torch/",)


# ---- pure: the allocator trace --------------------------------------------------------------------------------

@dataclass
class AllocGroup:
    """Allocations with one stack that survived: count, sizes, where."""

    site: str  # "modeling.py:88 (`h = self.up(x)`)": the first frame outside torch
    caller: str | None  # the first frame in the person's own code, when it is not the site
    count: int = 0
    total_bytes: int = 0
    sizes: list[int] = field(default_factory=list)

    def describe(self) -> str:
        sizes = sorted(set(self.sizes))
        each = f"{_fmt(sizes[0])} each" if len(sizes) == 1 else f"{_fmt(min(sizes))}-{_fmt(max(sizes))}"
        where = f"allocated at {self.site}" + (f", called from {self.caller}" if self.caller else "")
        noun = "allocation" if self.count == 1 else "allocations"
        return f"{self.count} {noun} of {each} ({_fmt(self.total_bytes)}) survive the step, {where}"


def _fmt(n: float) -> str:
    """Allocation sizes go down to single bytes."""
    return fmt_bytes(n, smallest="B")


def _is_library(filename: str) -> bool:
    return any(m in filename for m in LIBRARY_MARKERS)


def frame_text(frame: dict[str, Any]) -> str:
    """"train.py:88 (`losses.append(loss)`)" from a snapshot frame {"filename", "line", "name"}."""
    filename, line = str(frame.get("filename", "?")), int(frame.get("line") or 0)
    source = linecache.getline(filename, line).strip() if line else ""
    short = os.path.basename(filename)
    return f"{short}:{line} (`{source}`)" if source else f"{short}:{line} in {frame.get('name', '?')}"


def python_frames(frames: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Python frames only (innermost first, as the snapshot lists them); C++ frames have no .py file."""
    return [f for f in frames or [] if str(f.get("filename", "")).endswith(".py")]


def surviving_allocations(trace: list[dict[str, Any]], born_before_index: int | None = None,
                          born_before_us: float | None = None) -> list[dict[str, Any]]:
    """Alloc events of the trace made before the mark (an index into the trace, or a time_us) that no later
    free_requested/free_completed of the same address undid: what was allocated in the first watched step and
    is still alive at the end of the trace."""
    live: dict[int, tuple[int, dict[str, Any]]] = {}
    for i, event in enumerate(trace):
        action = event.get("action")
        if action == "alloc":
            live[event.get("addr")] = (i, event)
        elif action in ("free_requested", "free_completed"):
            live.pop(event.get("addr"), None)
    out = []
    for i, event in live.values():
        if born_before_us is not None and event.get("time_us") is not None:
            if event["time_us"] <= born_before_us:
                out.append(event)
        elif born_before_index is not None and i < born_before_index:
            out.append(event)
    return out


def group_by_stack(events: Iterable[dict[str, Any]]) -> list[AllocGroup]:
    """Surviving allocations grouped by (site, caller), largest total first."""
    groups: dict[tuple[str, str | None], AllocGroup] = {}
    for event in events:
        frames = python_frames(event.get("frames", []))
        site_frame = next((f for f in frames if not any(m in f["filename"] for m in TORCH_MARKERS)), None)
        user_frame = next((f for f in frames if not _is_library(f["filename"])), None)
        site = frame_text(site_frame) if site_frame else (frame_text(frames[0]) if frames else "an unknown place")
        caller = frame_text(user_frame) if user_frame and user_frame is not site_frame else None
        group = groups.setdefault((site, caller), AllocGroup(site, caller))
        size = int(event.get("size") or 0)
        group.count += 1
        group.total_bytes += size
        group.sizes.append(size)
    return sorted(groups.values(), key=lambda g: g.total_bytes, reverse=True)


# ---- pure: from a holder to the line that fills it ----------------------------------------------------------

_FILLERS = r"\.\s*(append|extend|insert|add|update|setdefault|put)\s*\(|\[[^\]]*\]\s*=(?!=)|\s*\+=|\s*=\s*\[.*\]\s*\+"


def find_filling_line(lines: list[str], first_line: int, name: str) -> tuple[int, str] | None:
    """The first line among `lines` (numbered from `first_line`) that adds to the container `name`, directly or to
    a container inside it: `name.append(x)`, `name[k] = x`, `name += [x]`, `name.update(...)`,
    `name["loss"].append(x)`."""
    leaf = re.escape(name.split(".")[-1])
    owner = r"(?:\b\w+\.)?" if "." in name else r"(?<![\w.])"
    pattern = re.compile(owner + leaf + r"(?:\[[^\]]*\])*(?:" + _FILLERS + r")")
    for i, text in enumerate(lines):
        if pattern.search(text):
            return first_line + i, text.strip()
    return None


def code_of(line: str) -> str:
    """The code of one source line without its comment: `kept.append(x)  # LEAK` -> `kept.append(x)`. A `#`
    inside a string literal is code."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else ch
            i += len(quote) - 1
        elif ch == "#":
            return line[:i].rstrip()
        i += 1
    return line.rstrip()


_KEPT = (re.compile(r"\.\s*(?:append|add|put)\s*\(\s*(.+?)\s*\)\s*$"),  # kept.append(x)
         re.compile(r"\+=\s*\[\s*(.+?)\s*,?\s*\]\s*$"),  # kept += [x]
         re.compile(r"(?<![=!<>])=(?!=)\s*(.+?)\s*$"))  # cache[k] = x, self.last = x


@dataclass
class Advice:
    """What to keep instead of a tensor that survives: in words, and (when the line that stores it is known) the
    expression to store instead."""

    text: str  # "keep `loss.item()` instead"
    kept: str | None = None  # the expression the line stores: `loss`
    instead: str | None = None  # what to store instead: `loss.item()`
    why: str = ""


def keep_instead(source: str, numel: int, has_graph: bool, *, view: bool = False, on_gpu: bool = False) -> Advice:
    """What to keep instead of the tensor the line `source` stores. A copy of what is needed stops the leak;
    `.detach()` alone does not when the tensor is a view (a slice of the logits, one row of a batch): the view
    keeps its base's whole storage alive, graph or not. view: the tensor's storage is larger than its own
    elements. on_gpu: it lives on a GPU (`.cpu()` copies it to host memory and frees the GPU's)."""
    code = code_of(source)
    expr = next((m.group(1) for pattern in _KEPT if (m := pattern.search(code))), None)
    shown = expr or "the tensor"
    if expr and _is_tuple(expr):  # `kept.append((loss, logits))`: no one method fits every element
        why = "a number or a detached copy of each element: no graph, no view of a larger tensor"
        return Advice(f"keep `.item()` of a scalar and `.detach().clone()` (`.detach().cpu()` on a GPU) of each "
                      f"other element of `{expr}` instead", None, None, why)
    base = expr[:-len(".detach()")] if expr and expr.endswith(".detach()") else expr
    if numel == 1:
        instead, why = f"{base}.item()" if base else None, "a Python number: no tensor, no graph"
        text = f"keep `{instead}` instead" if instead else "keep `.item()` of it instead (a Python number)"
    elif view:
        copy = ".detach().cpu()" if on_gpu else ".detach().clone()"
        instead = f"{base}{copy}" if base else None
        why = ("a copy of the elements it shows: a view, even detached, keeps the whole storage it was cut from "
               "alive")
        text = (f"keep `{instead}` instead" if instead else f"keep a copy of it instead (`{copy}`)") + \
            f" ({why}{'; without the autograd graph' if has_graph else ''})"
    elif has_graph:
        instead, why = (f"{base}.detach()" if base else None), "its autograd graph stays alive otherwise"
        text = (f"keep `{instead}` instead" if instead else "keep `.detach()` of it instead") + f" ({why})"
    elif on_gpu:
        instead, why = (f"{base}.cpu()" if base else None), "a copy in host memory frees the GPU's"
        text = (f"keep `{instead}` or drop the reference after use" if instead else
                "move it off the GPU (`.cpu()`) or drop the reference after use")
    else:
        instead, why = None, ""
        text = f"drop the reference to `{shown}` after use, or keep fewer of them (a running sum, the last few)"
    return Advice(text, expr, instead, why)


def _is_tuple(expr: str) -> bool:
    try:
        return isinstance(ast.parse(expr, mode="eval").body, ast.Tuple)
    except SyntaxError:
        return False


def advice_fix(advice: Advice, path: str | None, line_no: int | None, source: str) -> Fix:
    """The advice as a fix: an edit of the named file and line when both and the expression are known (the
    line's code, never its comment), else the advice in words."""
    code = code_of(source)
    if path and line_no and advice.kept and advice.instead and advice.kept in code:
        at = code.rfind(advice.kept)
        changed = code[:at] + advice.instead + code[at + len(advice.kept):]
        return edit(path, f"line {line_no}: `{code.strip()}` -> `{changed.strip()}`", advice.why)
    return note(advice.text[0].upper() + advice.text[1:])


# ---- the holders of live tensors (gc) -----------------------------------------------------------------------

@dataclass
class HolderFinding:
    holder: str  # "list `losses`"
    line: str | None  # "train.py:88 (`losses.append(loss)`)"
    count: int
    total_bytes: int
    example: str  # "float32[] grad_fn=NllLossBackward0"
    advice: str
    has_graph: bool = False
    fix: Fix | None = None  # the advice as an edit of the line (or a note when the line is not known)
    view: bool = False  # a view: its storage is larger than its own elements
    kind: str = "born"  # born (a tensor born in one step that survives the next) | graph | container | view | tensor
    text: str = ""  # the whole sentence, for the kinds named from a census of the loop's names

    def describe(self) -> str:
        if self.text:
            return self.text
        where = f", put there at {self.line}" if self.line else ""
        noun, verb = ("tensor", "survives") if self.count == 1 else ("tensors", "survive")
        graph = " with its autograd graph" if self.has_graph else ""
        return (f"{self.count} {noun} ({self.example}) born in one step {verb} the next{graph}, held by "
                f"{self.holder}{where}: {self.advice}")


def _live_tensors(torch: Any) -> list[Any]:
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance on deprecated module attributes warns
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor) and not isinstance(obj, torch.nn.Parameter):
                    out.append(obj)
            except Exception:  # proxies that raise on isinstance
                continue
    return out


def _weak_ids(objs: Iterable[Any]) -> dict[int, Any]:
    """{id: weakref}: identity sets of tensors without keeping them alive (a WeakSet compares with ==)."""
    return {id(o): weakref.ref(o) for o in objs}


def _own_frame(obj: Any) -> bool:
    return inspect.isframe(obj) and obj.f_code.co_filename == __file__


# Python up to 3.12 hands a function's locals out as a dict cached on its frame, filled at each read of f_locals
# and kept until the next: left filled, it keeps the values of that moment (a step's batch, its loss and graph)
# alive for the rest of the run, and they come back as survivors "held by a dict". 3.13 hands out a live view.
LOCALS_ARE_A_SNAPSHOT = sys.version_info < (3, 13)


def frame_names(frame: Any) -> list[tuple[str, Any]]:
    """(name, value) of a running frame's locals, leaving no snapshot of them behind: a function frame's cached
    dict is emptied after the read (the next f_locals, locals() or debugger fills it anew from the frame). A
    module's or a class body's locals are its namespace itself, never emptied."""
    names = frame.f_locals
    items = list(names.items())
    if LOCALS_ARE_A_SNAPSHOT and frame.f_code.co_flags & inspect.CO_OPTIMIZED and type(names) is dict \
            and names is not frame.f_globals:
        names.clear()
    return items


def _name_in(container: Any) -> tuple[str, str | None, list[str], int]:
    """(holder description, file, source lines, first line) for a container: which variable or attribute holds it."""
    kind = type(container).__name__
    frame = sys._getframe(1)
    while frame is not None:  # running functions' locals are not gc objects: walk the stack first
        if frame.f_code.co_filename != __file__:
            for var, value in frame_names(frame):
                if value is container:
                    lines, first = _code_lines(frame.f_code)
                    where = "" if frame.f_code.co_name == "<module>" else f" in {frame.f_code.co_name}()"
                    return f"{kind} `{var}`{where}", frame.f_code.co_filename, lines, max(first, 1)
        frame = frame.f_back
    for ref in gc.get_referrers(container):
        if _own_frame(ref):
            continue
        if inspect.isframe(ref):
            for var, value in frame_names(ref):
                if value is container:
                    lines, first = _code_lines(ref.f_code)
                    return f"{kind} `{var}` in {ref.f_code.co_name}()", ref.f_code.co_filename, lines, max(first, 1)
        elif isinstance(ref, dict):
            for var, value in ref.items():
                if value is not container or not isinstance(var, str):
                    continue
                module = next((m for m in list(sys.modules.values()) if getattr(m, "__dict__", None) is ref), None)
                if module is not None:
                    path = getattr(module, "__file__", None) or ""
                    return f"{kind} `{var}` (module {module.__name__})", path, _file_lines(path), 1
                owner = next((o for o in gc.get_referrers(ref) if getattr(o, "__dict__", None) is ref), None)
                if owner is not None:
                    return _attr_holder(kind, owner, var)
        elif hasattr(ref, "__dict__") and not inspect.ismodule(ref) and not isinstance(ref, type):
            for var, value in list(vars(ref).items()):
                if value is container:
                    return _attr_holder(kind, ref, var)
    return f"a {kind}", None, [], 1


def _code_lines(code: Any) -> tuple[list[str], int]:
    """Source of a function, or the whole file for module-level code (getsourcelines gives only its first block)."""
    if code.co_name == "<module>":
        return linecache.getlines(code.co_filename), 1
    try:
        return inspect.getsourcelines(code)
    except (OSError, TypeError):
        return [], 1


def _attr_holder(kind: str, owner: Any, attr: str) -> tuple[str, str | None, list[str], int]:
    cls = type(owner)
    try:
        path = inspect.getsourcefile(cls) or ""
    except TypeError:
        path = ""
    return f"{kind} `self.{attr}` of {cls.__name__}", path, _file_lines(path), 1


def _file_lines(path: str | None) -> list[str]:
    return linecache.getlines(path) if path else []


def find_holders(tensors: list[Any], exclude: Iterable[Any] = ()) -> list[HolderFinding]:
    """Group surviving tensors by what holds them, with the line that put them there. Bookkeeping objects of the
    caller (`exclude`) are not holders. One gc scan for all of them. A module's namespace is no container: each
    of its globals that holds a survivor is a holder of its own, with the line that last assigned it. Named
    holders come first."""
    if not tensors:
        return []
    wanted = {id(t): t for t in tensors}
    skip = {id(x) for x in exclude} | {id(wanted), id(tensors)}
    by_holder: dict[tuple[int, str | None], tuple[Any, list[Any], str | None]] = {}
    claimed: set[int] = set()
    for ref in gc.get_referrers(*tensors):
        if id(ref) in skip or inspect.isframe(ref):
            continue
        if isinstance(ref, dict) and _module_of(ref) is not None:
            for name, value in list(ref.items()):
                if isinstance(name, str) and id(value) in wanted and id(value) not in claimed:
                    claimed.add(id(value))
                    by_holder[(id(ref), name)] = (ref, [value], name)
            continue
        if isinstance(ref, dict):
            members = list(ref.values())
        elif isinstance(ref, (list, tuple, set, frozenset)):
            members = list(ref)
        elif hasattr(ref, "__dict__") and not inspect.ismodule(ref):
            members = list(vars(ref).values())
        else:
            continue
        held = [m for m in members if id(m) in wanted and id(m) not in claimed]
        if held:
            claimed.update(id(m) for m in held)
            by_holder[(id(ref), None)] = (ref, held, None)
    findings = []
    for container, held, global_name in by_holder.values():
        if global_name is not None:
            description, path, found = _global_holder(container, global_name)
            findings.append(_holder_finding(description, path, found, held))
            continue
        if isinstance(container, dict) and any(getattr(o, "__dict__", None) is container for o in
                                               gc.get_referrers(container)):
            owner = next(o for o in gc.get_referrers(container) if getattr(o, "__dict__", None) is container)
            attr = next((k for k, v in container.items() if v is held[0]), "?")
            description, path, lines, first = _attr_holder("tensor", owner, attr)
        elif hasattr(container, "__dict__") and not isinstance(container, (list, dict, tuple, set, frozenset)):
            attr = next((k for k, v in vars(container).items() if v is held[0]), "?")
            description, path, lines, first = _attr_holder("tensor", container, attr)
        else:
            description, path, lines, first = _name_in(container)
        var = re.search(r"`(?:self\.)?([\w.]+)`", description)
        found = find_filling_line(lines, first, var.group(1)) if var and lines else None
        findings.append(_holder_finding(description, path, found, held))
    return sorted(findings, key=lambda f: ("`" not in f.holder, -f.count, -f.total_bytes))


def _holder_finding(description: str, path: str | None, found: tuple[int, str] | None,
                    held: list[Any]) -> HolderFinding:
    """The finding for tensors one holder keeps: what they are, the line that put them there, what to keep."""
    line = f"{os.path.basename(path or '?')}:{found[0]} (`{code_of(found[1])}`)" if found else None
    sample = held[0]
    has_graph = any(getattr(t, "grad_fn", None) is not None for t in held)
    view = any(_storage_bytes(t) > _own_bytes(t) for t in held)
    grad = f" grad_fn={type(sample.grad_fn).__name__}" if getattr(sample, "grad_fn", None) is not None else ""
    example = f"{str(sample.dtype).replace('torch.', '')}{list(sample.shape)}{grad}"
    on_gpu = getattr(getattr(sample, "device", None), "type", "cpu") != "cpu"
    advice = keep_instead(found[1] if found else "", int(sample.numel()), has_graph, view=view, on_gpu=on_gpu)
    fix = advice_fix(advice, path if found else None, found[0] if found else None, found[1] if found else "")
    size = sum(_storage_bytes(t) for t in held)
    return HolderFinding(description, line, len(held), size, example, advice.text, has_graph, fix, view)


def _module_of(namespace: dict) -> Any:
    """The module whose globals `namespace` is, or None."""
    return next((m for m in list(sys.modules.values()) if getattr(m, "__dict__", None) is namespace), None)


def _global_holder(namespace: dict, name: str) -> tuple[str, str | None, tuple[int, str] | None]:
    """(description, file, (line, source) of its last assignment) for a global of a module: the stores of its
    running module-level frame when the loop runs there, else of the module's source."""
    module = _module_of(namespace)
    path = getattr(module, "__file__", None)
    frame = next((f for f in user_frames() if f.f_globals is namespace and f.f_code.co_name == "<module>"), None)
    code = frame.f_code if frame is not None else _compiled(path)
    label = f"`{name}` (module {getattr(module, '__name__', '?')})"
    place = Place(label, name, "global", [code, *_nested_codes(code)] if code else [], frame)
    assigned = last_assignment(place)
    return f"tensor {label}", path, (assigned[1], assigned[2]) if assigned else None


def _compiled(path: str | None) -> Any:
    source = "".join(linecache.getlines(path)) if path else ""
    try:
        return compile(source, path, "exec") if source else None
    except (SyntaxError, ValueError):
        return None


def _storage_bytes(t: Any) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:
        return 0


def _own_bytes(t: Any) -> int:
    """The bytes of the tensor's own elements (less than its storage's for a view)."""
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:
        return 0


# ---- the names that hold a step's memory: frames, modules, closures, attributes ---------------------------------

# An autograd graph is walked (its grad_fn nodes, through next_functions) up to this many nodes: a kept graph of
# a 7B model's step is a few thousand nodes, so a chain of steps shows its growth long before this bound, and a
# held graph that reaches it is reported as it stands.
MAX_GRAPH_NODES = 200_000
# Attributes of objects held by the loop's names (self, the model and its submodules, a Trainer) are looked at this
# many objects deep at most: a model's modules are a few thousand.
MAX_ATTRIBUTE_OWNERS = 20_000
_STORES = {"STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF"}


def graph_nodes(tensors: Iterable[Any], limit: int = MAX_GRAPH_NODES) -> int:
    """Distinct autograd nodes reachable from the tensors' grad_fn (what their graph keeps alive: every node's
    saved tensors until backward frees them), at most `limit`. Each node's Python wrapper is kept until the walk
    ends: torch 2.11 (the H100 runs of benchmarks/RESULTS.md 23 and 26) points a node to its wrapper weakly, so a
    wrapper let go of is freed and the next one made can take its address; by id alone a node not yet seen then
    passed for one seen and the walk stopped after a few nodes (a graph chained over every step counted the same
    at each step, so no kept graph was named). Newer torch keeps the wrapper while the node lives."""
    seen: dict[int, Any] = {}
    todo = [t.grad_fn for t in tensors if getattr(t, "grad_fn", None) is not None]
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        try:
            todo.extend(n for n, _ in node.next_functions)
        except Exception:  # a custom node without next_functions
            continue
    return len(seen)


@dataclass
class Place:
    """A Python name that holds tensors: a local or global of a running frame, an attribute, a closure cell."""

    label: str  # "`total` in train()", "`self.cache` of Block", "closure variable `total` of step()"
    name: str  # the variable or attribute
    kind: str  # local | global | attribute | closure
    codes: list[Any]  # code objects whose stores to `name` may have assigned it
    frame: Any = None  # the running frame (local, global)
    container: str | None = None  # "list", "dict": the name holds a container of tensors


@dataclass
class Held:
    """What one place holds at one moment: numbers only (no reference to the tensors survives the census)."""

    place: Place
    count: int
    nodes: int
    nbytes: int
    view: bool
    numel: int
    example: str
    on_gpu: bool


def _tensors_in(value: Any, tensor_type: type, param_type: type) -> tuple[list[Any], str | None]:
    """The tensors a value holds: itself, or the elements of a list/tuple/set/dict (and of lists inside it)."""
    if isinstance(value, tensor_type):
        return ([] if isinstance(value, param_type) else [value]), None
    if isinstance(value, dict):
        items, kind = list(value.values()), "dict"
    elif isinstance(value, (list, tuple, set, frozenset)) or type(value).__name__ == "deque":
        items, kind = list(value), type(value).__name__
    else:
        return [], None
    out = []
    for item in items:
        if isinstance(item, tensor_type) and not isinstance(item, param_type):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.extend(x for x in item if isinstance(x, tensor_type) and not isinstance(x, param_type))
    return out, kind


def user_frames(start: Any = None) -> list[Any]:
    """The running frames of the person's own code (not this module, torch, or installed libraries), innermost
    first."""
    frame = start or sys._getframe(1)
    out = []
    while frame is not None:
        name = frame.f_code.co_filename
        if name != __file__ and not _is_library(name) and not os.path.abspath(name).startswith(PACKAGE_DIR):
            out.append(frame)
        frame = frame.f_back
    return out


def _class_codes(cls: type) -> list[Any]:
    codes = []
    for klass in cls.__mro__:
        for value in vars(klass).values():
            func = getattr(value, "__func__", value)
            code = getattr(func, "__code__", None)
            if code is not None and not _is_library(code.co_filename):
                codes.append(code)
    return codes


def places(frames: list[Any], torch: Any) -> list[tuple[Place, Any]]:
    """(place, value) for every name of the running frames, the attributes of the objects they hold (a module's
    submodules too) and the cells of the functions they hold."""
    out: list[tuple[Place, Any]] = []
    owners: list[tuple[Any, list[Any]]] = []
    seen_owner: set[int] = set()
    seen_cell: set[int] = set()

    def owner(obj: Any, codes: list[Any]) -> None:
        if id(obj) in seen_owner or len(seen_owner) >= MAX_ATTRIBUTE_OWNERS:
            return
        if isinstance(obj, torch.nn.Module):
            for module in obj.modules():
                if id(module) not in seen_owner:
                    seen_owner.add(id(module))
                    owners.append((module, codes))
        elif hasattr(obj, "__dict__") and not inspect.ismodule(obj) and not isinstance(obj, type) \
                and not callable(obj) and not isinstance(obj, torch.Tensor):
            seen_owner.add(id(obj))
            owners.append((obj, codes))

    def cells(func: Any, label_of: str) -> None:
        code = getattr(func, "__code__", None)
        for var, cell in zip(getattr(code, "co_freevars", ()), getattr(func, "__closure__", None) or ()):
            if id(cell) in seen_cell:
                continue
            seen_cell.add(id(cell))
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            out.append((Place(f"closure variable `{var}` of {label_of}()", var, "closure",
                              [code, *_nested_codes(code)]), value))

    for frame in frames:
        code = frame.f_code
        module_level = code.co_name == "<module>"
        where = f" (module {frame.f_globals.get('__name__', '?')})" if module_level else f" in {code.co_name}()"
        for var, value in frame_names(frame):
            if var.startswith("__"):
                continue
            label = f"closure variable `{var}` of {code.co_name}()" if var in code.co_freevars else f"`{var}`{where}"
            # A global may be stored by any function of its module (`global total`); a cell by a nested function.
            codes = [code, *_nested_codes(code)] if module_level or var in code.co_cellvars else [code]
            out.append((Place(label, var, "global" if module_level else "local", codes, frame), value))
            if inspect.isfunction(value) and not _is_library(value.__code__.co_filename):
                cells(value, value.__name__)
            elif not isinstance(value, (list, tuple, dict, set, frozenset, str, bytes, int, float)):
                owner(value, [code])
    for obj, codes in owners:
        cls = type(obj)
        try:
            attrs = list(vars(obj).items())
        except TypeError:
            continue
        for attr, value in attrs:
            if attr.startswith("_") and isinstance(obj, torch.nn.Module) and attr in ("_parameters", "_buffers",
                                                                                        "_modules"):
                continue
            out.append((Place(f"`self.{attr}` of {cls.__name__}", attr, "attribute",
                              [*_class_codes(cls), *codes]), value))
    return out


def _nested_codes(code: Any) -> list[Any]:
    out = []
    for const in getattr(code, "co_consts", ()):
        if inspect.iscode(const):
            out.append(const)
            out.extend(_nested_codes(const))
    return out


def census(frames: list[Any], torch: Any) -> dict[str, Held]:
    """What every place holds now: how many tensors, their autograd graph's nodes, their storage bytes."""
    out: dict[str, Held] = {}
    for place, value in places(frames, torch):
        tensors, container = _tensors_in(value, torch.Tensor, torch.nn.Parameter)
        if not tensors:
            continue
        place.container = container
        sample = tensors[0]
        grad = f" grad_fn={type(sample.grad_fn).__name__}" if sample.grad_fn is not None else ""
        storages = {}
        for t in tensors:
            try:
                storages[t.untyped_storage().data_ptr() or id(t)] = _storage_bytes(t)
            except Exception:
                continue
        out[place.label] = Held(place, len(tensors), graph_nodes(tensors), sum(storages.values()),
                                any(_storage_bytes(t) > _own_bytes(t) for t in tensors), int(sample.numel()),
                                f"{str(sample.dtype).replace('torch.', '')}{list(sample.shape)}{grad}",
                                sample.device.type != "cpu")
    return out


def store_lines(codes: list[Any], name: str, attribute: bool) -> list[tuple[Any, int, int]]:
    """(code, offset, line) of every instruction in `codes` that stores to `name` (STORE_ATTR for an attribute).
    In codes after the first (the functions of a module, nested functions) only a store to the global or to the
    cell counts: there a STORE_FAST of the same name is another variable."""
    out = []
    for i, code in enumerate(codes):
        stores = _STORES if i == 0 else {"STORE_GLOBAL", "STORE_DEREF"}
        try:
            for inst in dis.get_instructions(code):
                wanted = inst.opname == "STORE_ATTR" if attribute else inst.opname in stores
                line = inst.positions.lineno if inst.positions else None
                if wanted and inst.argval == name and line:
                    out.append((code, inst.offset, line))
        except Exception:
            continue
    return out


def _self_referencing(source: str, name: str) -> bool:
    """`total = total + loss`, `total += loss`, `self.total = self.total + x`: the new value is built on the old."""
    try:
        node = ast.parse(code_of(source).strip()).body[0]
    except (SyntaxError, IndexError):
        return False
    if isinstance(node, ast.AugAssign):
        return True
    if isinstance(node, ast.Assign):
        return any(isinstance(n, (ast.Name, ast.Attribute)) and (getattr(n, "id", None) == name or
                                                                   getattr(n, "attr", None) == name)
                   for n in ast.walk(node.value))
    return False


def last_assignment(place: Place) -> tuple[str, int, str] | None:
    """(file, line, source) of the line that last assigned the place. Lines that build the new value on the old
    (`total = total + loss`: what chains the steps' graphs) first, when there are any; among them, for a running
    frame, the store its own code passed last: the last before its current instruction within the innermost loop
    around it, else the last in that loop (the previous iteration), else the last before it; else the last found
    (a function of the module, a method of the owner's class)."""
    found = store_lines(place.codes, place.name, place.kind == "attribute")
    if not found:
        return None
    chained = [x for x in found if _self_referencing(linecache.getline(x[0].co_filename, x[2]), place.name)]
    candidates = chained or found
    frame = place.frame
    mine = [(offset, line) for code, offset, line in candidates if frame is not None and code is frame.f_code]
    if mine:
        here = frame.f_lasti
        loops = [(inst.argval, inst.offset) for inst in dis.get_instructions(frame.f_code)
                 if "JUMP" in inst.opname and isinstance(inst.argval, int) and inst.argval < inst.offset
                 and inst.argval <= here <= inst.offset]
        if loops:
            lo, hi = max(loops)  # the innermost loop: the latest start
            inside = [x for x in mine if lo <= x[0] <= hi]
            before = [x for x in inside if x[0] < here] or inside
            if before:
                return _source_at(frame.f_code.co_filename, max(before)[1])
        before = [x for x in mine if x[0] < here] or mine
        return _source_at(frame.f_code.co_filename, max(before)[1])
    code, _, line = candidates[-1]
    return _source_at(code.co_filename, line)


def _source_at(path: str, line: int) -> tuple[str, int, str]:
    return path, line, code_of(linecache.getline(path, line)).strip()


def _assigned_expr(source: str, name: str) -> str | None:
    """The expression a line adds to or stores in `name`: `loss` of `total = total + loss` / `total += loss`,
    `out.logits[:, -1]` of `self.last = out.logits[:, -1]`."""
    try:
        node = ast.parse(source).body[0]
    except (SyntaxError, IndexError):
        return None
    if isinstance(node, ast.AugAssign):
        return ast.get_source_segment(source, node.value)
    if isinstance(node, ast.Assign):
        value = node.value
        if isinstance(value, ast.BinOp):
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if getattr(side, "id", None) == name or getattr(side, "attr", None) == name:
                    return ast.get_source_segment(source, other)
        return ast.get_source_segment(source, value)
    return None


def _wrapped(expr: str) -> str:
    """The expression ready for a method call: `(a * b)` for an operation, `loss` / `out.logits[:, -1]` as is."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return f"({expr})"
    return expr if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({expr})"


def graph_advice(source: str, name: str, numel: int, *, view: bool, on_gpu: bool, chained: bool) -> Advice:
    """What to keep instead of a graph (or a view) held by a name: `.item()` of a scalar, `.detach()` of a
    tensor, a copy (`.detach().clone()`, `.detach().cpu()` on a GPU) of a view."""
    expr = _assigned_expr(source, name)
    base = _wrapped(expr) if expr else None
    if view and numel != 1:
        copy = ".detach().cpu()" if on_gpu else ".detach().clone()"
        why = "a copy of the elements it shows: a view, even detached, keeps the whole storage it was cut from alive"
        instead = f"{base}{copy}" if base else None
    elif numel == 1:
        instead, copy = (f"{base}.item()" if base else None), ".item()"
        why = ("a Python number: the running value no longer chains every step's autograd graph" if chained
               else "a Python number: no tensor, no graph")
    else:
        instead, copy = (f"{base}.detach()" if base else None), ".detach()"
        why = ("the running value no longer chains every step's autograd graph" if chained
               else "its autograd graph and saved activations stay alive otherwise")
    text = (f"keep `{instead}` instead" if instead else f"keep `{copy}` of it instead") + f" ({why})"
    return Advice(text, expr, instead, why)


def named_findings(before: dict[str, Held], after: dict[str, Held]) -> list[HolderFinding]:
    """The places whose hold grew from one census to the next: a graph with more nodes (a running value chained
    across steps), a container with more tensors, more storage bytes (a tensor grown by cat). Each named with
    the line that last assigned it (for a container: the line that fills it) and the advice for its kind."""
    out = []
    for label, now in after.items():
        was = before.get(label)
        if was is None:
            continue
        place = now.place
        grew_graph = now.nodes > was.nodes or now.nodes >= MAX_GRAPH_NODES
        grew_count = now.count > was.count
        grew_bytes = now.nbytes > was.nbytes
        if not (grew_graph or grew_count or grew_bytes):
            continue
        if place.container:
            kind = "container"
            holder = f"{place.container} {label}"
        else:
            kind = "graph" if grew_graph else "view" if now.view else "tensor"
            holder = label
        fill = None
        if place.container:
            for code in place.codes:
                lines, first = _code_lines(code)
                fill = find_filling_line(lines, first, place.name)
                if fill:
                    fill = (code.co_filename, fill[0], fill[1])
                    break
        assigned = fill or last_assignment(place)
        path, line_no, source = assigned if assigned else (None, None, "")
        line = f"{os.path.basename(path)}:{line_no} (`{code_of(source).strip()}`)" if assigned else None
        if kind == "container":
            advice = keep_instead(source, now.numel, now.nodes > 0, view=now.view, on_gpu=now.on_gpu)
            advice.text += f", or clear `{place.name}` after each step"
        elif kind == "tensor":  # grows without a graph (a torch.cat of each step's outputs): its size is the leak
            where = "in host memory (`.cpu()` of what each step adds), " if now.on_gpu else ""
            advice = Advice(f"keep what each step adds {where}in a list written out or cleared every few steps, "
                            f"not in one tensor `{place.name}` that grows for the whole run")
        else:
            advice = graph_advice(code_of(source).strip(), place.name, now.numel, view=now.view, on_gpu=now.on_gpu,
                                  chained=grew_graph)
        fix = advice_fix(advice, path, line_no, source)
        if kind == "graph":
            what = (f"an autograd graph that grows every step ({was.nodes:,} -> {now.nodes:,} nodes): every step's "
                    "graph stays alive")
        elif kind == "container":
            what = (f"{now.count} tensors ({was.count} a step before)"
                    + (" with their autograd graph" if now.nodes else ""))
        else:
            what = f"a tensor that grows ({_fmt(was.nbytes)} -> {_fmt(now.nbytes)})"
        text = (f"{holder} holds {what}; last assigned at {line}" if line and kind != "container" else
                f"{holder} holds {what}; filled at {line}" if line else f"{holder} holds {what}") + f": {advice.text}"
        out.append(HolderFinding(holder, line, now.count, now.nbytes, now.example, advice.text, now.nodes > 0, fix,
                                 now.view, kind=kind, text=text))
    order = {"graph": 0, "container": 1, "view": 2, "tensor": 3}
    return sorted(out, key=lambda f: (order.get(f.kind, 9), -f.total_bytes))


# ---- the watcher --------------------------------------------------------------------------------------------

@dataclass
class LeakReport:
    steps: list[int]  # the steps watched
    rise_per_step: float  # baseline bytes per step before the watch
    baseline_kind: str
    groups: list[AllocGroup] = field(default_factory=list)
    holders: list[HolderFinding] = field(default_factory=list)
    snapshot_path: str | None = None

    def lines(self) -> list[str]:
        out = [f"baseline ({self.baseline_kind}) rose {_fmt(self.rise_per_step)} per step; watched steps "
               f"{self.steps[0]}-{self.steps[-1]}"]
        out += [h.describe() for h in self.holders]
        out += [g.describe() for g in self.groups[:8]]
        if self.snapshot_path:
            out.append(f"allocator snapshot: {self.snapshot_path} (open it at https://pytorch.org/memory_viz)")
        return out

    def result(self) -> "CheckResult":
        from rocmcheck.result import failed, warned

        data = {"rise_per_step_bytes": self.rise_per_step, "snapshot": self.snapshot_path,
                "groups": [g.__dict__ for g in self.groups[:20]],
                "holders": [{k: v for k, v in h.__dict__.items() if k != "fix"} for h in self.holders]}
        if self.holders:
            top = self.holders[0]
            return failed(top.describe(), top.fix or note(top.advice), self.lines(), id="monitor.leak", **data)
        if self.groups:
            return failed(self.groups[0].describe(), GROUPS_FIX, self.lines(), id="monitor.leak", **data)
        return warned("the baseline rose, but nothing born in one step survived the next: growth is in the "
                      "allocator's cache or outside PyTorch", CACHE_FIX, self.lines(), id="monitor.leak", **data)


GROUPS_FIX = note("Look at the allocation sites above: something keeps what they allocate from one step to the next "
                  "(a list, a cache, a tensor kept with its graph); keep `.item()` of a scalar, or a copy "
                  "(`.detach().clone()`, `.cpu()`) of what you need: `.detach()` of a slice keeps the whole tensor.")
CACHE_FIX = note("Run the training under `rocmcheck monitor -- <your command>` to see whether the driver's memory "
                 "keeps rising.")


class LeakWatch:
    """Call step() after every optimizer step (the HF callback and leak_watch(optimizer) do it for you)."""

    def __init__(self, out_dir: str | os.PathLike = ".", *, always: bool = False, warmup: int = WARMUP_STEPS,
                 trigger_steps: int = TRIGGER_STEPS, min_rise: int | None = None, device: Any = None,
                 stream: Any = None) -> None:
        self.out_dir = Path(out_dir)
        self.always, self.warmup, self.trigger_steps = always, warmup, trigger_steps
        self._min_rise, self._device = min_rise, device
        self.stream = stream if stream is not None else sys.stderr
        self.baselines: list[int] = []
        self.report: LeakReport | None = None
        self._phase = "idle"  # idle -> b0 (history on, census) -> b1 (mark) -> done
        self._torch: Any = None
        self._old: Any = None  # tensors alive at B0 (weak)
        self._born: Any = None  # tensors born between B0 and B1 (weak)
        self._mark_index: int | None = None
        self._mark_us: float | None = None
        self._watch_steps: list[int] = []
        self._census: dict[str, Held] | None = None  # what the loop's names held at B1

    # -- measurement -------------------------------------------------------------------------------------------
    def _setup(self) -> None:
        if self._torch is not None:
            return
        import torch

        self._torch = torch
        if self._device is None:
            self._device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
                else torch.device("cpu")
        self.on_gpu = self._device.type == "cuda"
        if not self.on_gpu:
            from rocmcheck.monitor.step_memory import MemorySampler

            self._cpu = MemorySampler(self._device, trim=True)
        default_rise = MIN_RISE_BYTES["gpu" if self.on_gpu else "cpu"]
        self.min_rise = self._min_rise if self._min_rise is not None else default_rise

    def baseline(self) -> int:
        self._setup()
        if self.on_gpu:
            return int(self._torch.cuda.memory_allocated(self._device))
        return int(self._cpu.sample().allocated)

    @property
    def baseline_kind(self) -> str:
        return "allocator, memory_allocated" if self.on_gpu else "CPU resident memory after malloc_trim"

    def _rising(self) -> bool:
        b = self.baselines[self.warmup:]
        if len(b) < self.trigger_steps + 1:
            return False
        recent = b[-(self.trigger_steps + 1):]
        return all(later - earlier >= self.min_rise for earlier, later in zip(recent, recent[1:]))

    # -- the step -------------------------------------------------------------------------------------------------
    def step(self) -> None:
        self.baselines.append(self.baseline())
        n = len(self.baselines)
        if self._phase == "done":
            return
        if self._phase == "idle":
            if (self.always and n > self.warmup) or self._rising():
                self._begin(n)
        elif self._phase == "b0":
            self._mark(n)
        elif self._phase == "b1":
            self._finish(n)

    def _begin(self, n: int) -> None:
        torch = self._torch
        self._watch_steps = [n]
        if self.on_gpu:
            torch.cuda.memory._record_memory_history(max_entries=MAX_HISTORY_ENTRIES)
        self._old = _weak_ids(_live_tensors(torch))
        self._phase = "b0"

    def _mark(self, n: int) -> None:
        torch = self._torch
        self._watch_steps.append(n)
        if self.on_gpu:
            trace = self._trace(torch.cuda.memory._snapshot())
            self._mark_index = len(trace)
            times = [e.get("time_us") for e in trace if e.get("time_us") is not None]
            self._mark_us = max(times) if times else None
        old = self._old
        self._born = _weak_ids(t for t in _live_tensors(torch) if not (id(t) in old and old[id(t)]() is t))
        self._old = None
        self._census = census(user_frames(), torch)
        self._phase = "b1"

    def _finish(self, n: int) -> None:
        torch = self._torch
        self._watch_steps.append(n)
        groups, snapshot_path = [], None
        if self.on_gpu:
            snapshot = torch.cuda.memory._snapshot()
            survivors = surviving_allocations(self._trace(snapshot), self._mark_index, self._mark_us)
            groups = group_by_stack(survivors)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            path = self.out_dir / f"leak-snapshot-{os.getpid()}-{int(time.time())}.pickle"
            torch.cuda.memory._dump_snapshot(str(path))
            torch.cuda.memory._record_memory_history(enabled=None)
            snapshot_path = str(path)
        survivors_t = [t for t in (ref() for ref in self._born.values()) if t is not None]
        self._born = None
        holders = find_holders(survivors_t, exclude=[survivors_t])
        del survivors_t
        named = named_findings(self._census or {}, census(user_frames(), torch))
        self._census = None
        names = {re.search(r"`(?:self\.)?([\w.]+)`", f.holder).group(1) for f in named if "`" in f.holder}
        holders = named + [h for h in holders if not any(f"`{n}`" in h.holder or f"`self.{n}`" in h.holder
                                                          for n in names)]
        b = self.baselines[self.warmup:] or self.baselines
        steps_before = max(1, len(b) - 1)
        rise = (b[-1] - b[0]) / steps_before
        self.report = LeakReport(self._watch_steps, rise, self.baseline_kind, groups, holders, snapshot_path)
        self._phase = "done"
        self._print()

    def _trace(self, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
        traces = snapshot.get("device_traces") or []
        index = self._device.index if self._device.index is not None else self._torch.cuda.current_device()
        return traces[index] if index < len(traces) else []

    def _print(self) -> None:
        if self.report is None or self.stream is None:
            return
        result = self.report.result()
        print(f"[rocmcheck leak] {result.summary}", file=self.stream)
        for line in self.report.lines():
            print(f"  · {line}", file=self.stream)
        self.stream.flush()

    def close(self) -> None:
        if self._phase in ("b0", "b1") and self.on_gpu:
            self._torch.cuda.memory._record_memory_history(enabled=None)
        self._old = self._born = self._census = None


@contextlib.contextmanager
def leak_watch(optimizer: Any = None, out_dir: str | os.PathLike = ".", **kwargs: Any) -> Iterator[LeakWatch]:
    """Watch a hand-written loop. With `optimizer`, every optimizer.step() is a step (a post-step hook);
    without, call .step() on the yielded watcher after each step."""
    watch = LeakWatch(out_dir, **kwargs)
    handle = optimizer.register_step_post_hook(lambda *_: watch.step()) if optimizer is not None else None
    try:
        yield watch
    finally:
        if handle is not None:
            handle.remove()
        watch.close()


def _make_callback() -> type:
    from transformers import TrainerCallback

    class LeakWatchCallback(TrainerCallback):
        """HF Trainer: on_step_end comes after optimizer.step(), the scheduler and zero_grad: the post-step point."""

        def __init__(self, out_dir: str | os.PathLike | None = None, all_ranks: bool = False, **kwargs: Any) -> None:
            self._out_dir, self._kwargs, self._all_ranks = out_dir, kwargs, all_ranks
            self.watch: LeakWatch | None = None

        def on_train_begin(self, args, state, control, **kw):
            if self.watch is None:
                self.watch = LeakWatch(self._out_dir or args.output_dir, **self._kwargs)

        def on_step_end(self, args, state, control, **kw):
            if self.watch is not None and (state.is_world_process_zero or self._all_ranks):
                self.watch.step()

        def on_train_end(self, args, state, control, **kw):
            if self.watch is not None:
                self.watch.close()

    return LeakWatchCallback


def __getattr__(name: str) -> Any:  # the callback class needs transformers: built on first use only
    if name == "LeakWatchCallback":
        cls = _make_callback()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
