"""One profiled training step: the top kernels, and two findings that cost people days:
attention running on the math path (O(s^2) memory, several times slower) and hot ops on the CPU
during a GPU run."""

from __future__ import annotations

from typing import Any, Callable

from rocmcheck import fixes
from rocmcheck.result import CheckResult, passed, skipped, warned

FUSED_ATTENTION = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                   "_scaled_dot_product_cudnn_attention", "_flash_attention_forward", "_efficient_attention_forward",
                   "flash_attn", "aotriton", "fmha")
MATH_ATTENTION = ("_scaled_dot_product_attention_math",)
# Ops that must run on the accelerator in a GPU run; finding them with no device time means the CPU did them.
HOT_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_softmax", "aten::_log_softmax",
           "aten::embedding_dense_backward", "aten::_fused_adamw_", "aten::mul", "aten::add", "aten::silu")
TOP_N = 10


def profile_step(step: Callable[[], None], on_gpu: bool) -> list[dict[str, Any]]:
    """Run `step` once under torch.profiler; one row per op/kernel name (times in microseconds; on_device: a
    kernel or a copy, not a CPU op): what the profiler's key_averages() gives, read from its raw events
    (event_rows), or key_averages() itself where this torch keeps no raw events."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        step()
        if on_gpu:
            torch.cuda.synchronize()
    from torch.autograd import DeviceType

    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is not None:
        return event_rows(results.events(), on_gpu, DeviceType.CPU)
    rows = []
    for evt in prof.key_averages():
        rows.append({
            "name": evt.key,
            "count": evt.count,
            "self_cpu_us": float(evt.self_cpu_time_total),
            # torch < 2.4 named these *_cuda_time_total (also on ROCm).
            "self_device_us": float(_first_attr(evt, "self_device_time_total", "self_cuda_time_total")),
            "device_us": float(_first_attr(evt, "device_time_total", "cuda_time_total")),
            "on_device": evt.device_type != DeviceType.CPU,
        })
    return rows


# Names the profiler's own post-processing leaves out (torch/autograd/profiler_util.py, _filter_name).
FILTERED_EVENTS = ("[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                   "profiler::_record_function_enter_new", "profiler::_record_function_exit", "aten::is_leaf",
                   "aten::output_nr", "aten::_version")


class _Event:
    __slots__ = ("name", "cpu", "thread", "start", "end", "kernels_us", "parent", "children", "device_total")

    def __init__(self, name: str, cpu: bool | None, thread: int, start: int, end: int) -> None:
        self.name, self.cpu, self.thread, self.start, self.end = name, cpu, thread, start, end
        self.kernels_us = 0.0
        self.parent: _Event | None = None
        self.children: list[_Event] = []
        self.device_total: float | None = None

    @property
    def us(self) -> float:
        return (self.end - self.start) / 1e3


def event_rows(events: Any, use_device: bool, cpu_type: Any) -> list[dict[str, Any]]:
    """The rows of key_averages() from the profiler's raw events, without building its FunctionEvent objects
    (about 40 us an event in Python: 0.7 s for the 16,800 events of a 22-layer model's step on the 2-core CPU
    box; benchmarks/bench_profile_rows.py measures both). The rules of torch/autograd/profiler.py's
    _parse_kineto_results and profiler_util.py's EventList tree: a device event (a kernel, a copy) belongs to the
    CPU op whose correlation id it is linked to; CPU events nest by time on their thread (a runtime call on the
    thread of the op it is linked to); an event that is the only child of a parent of its own name is merged into
    it (its children and kernels go to the parent); self CPU time is an event's time less its children's; an op's
    device time is its kernels' and its children's; async events nest nowhere and count no time. Rows are keyed
    by name and by CPU or device, as key_averages keys them. cpu_type: DeviceType.CPU."""
    kept: list[_Event] = []
    by_corr: dict[int, list[_Event]] = {}  # several ops of one correlation id each get its kernels, as in torch
    linked: list[tuple[int, _Event]] = []
    for e in events:
        name = e.name()
        if name in FILTERED_EVENTS or (hasattr(e, "is_hidden_event") and e.is_hidden_event()):
            continue
        if name.startswith("ProfilerStep#"):
            name = "ProfilerStep*"
        cpu = e.device_type() == cpu_type
        asynchronous = e.is_async() or e.start_thread_id() != e.end_thread_id()
        ev = _Event(name, None if asynchronous else cpu, e.start_thread_id(), e.start_ns(), e.end_ns())
        kept.append(ev)
        corr = e.linked_correlation_id()
        if corr > 0:
            linked.append((corr, ev))
        elif cpu and not asynchronous:
            by_corr.setdefault(e.correlation_id(), []).append(ev)
    for corr, ev in linked:
        for op in by_corr.get(corr, ()):
            if ev.cpu is False:  # a device event of this op
                op.kernels_us += ev.us
            elif ev.cpu:
                ev.thread = op.thread
    kept.sort(key=lambda x: (x.start, -x.end))
    threads: dict[int, list[_Event]] = {}
    for ev in kept:
        if ev.cpu:
            threads.setdefault(ev.thread, []).append(ev)
    for evs in threads.values():
        _nest(evs)
    kept = _merge_same_name_only_children(kept)
    rows: dict[tuple[str, bool], dict[str, Any]] = {}
    for ev in kept:
        row = rows.setdefault((ev.name, ev.cpu is False), {"name": ev.name, "count": 0, "self_cpu_us": 0.0,
                                                            "self_device_us": 0.0, "device_us": 0.0,
                                                            "on_device": ev.cpu is False})
        row["count"] += 1
        if ev.cpu:
            row["self_cpu_us"] += ev.us - sum(ch.us for ch in ev.children)
            if use_device:
                row["self_device_us"] += ev.kernels_us
                row["device_us"] += _device_total(ev)
        elif ev.cpu is False and use_device:
            row["self_device_us"] += ev.us
            row["device_us"] += ev.us
    return list(rows.values())


def _nest(evs: list[_Event]) -> None:
    """One thread's CPU events, sorted by start (longest first): each one's parent and children."""
    stack: list[_Event] = []
    for ev in evs:
        while stack and (ev.start >= stack[-1].end or ev.end > stack[-1].end):
            stack.pop()
        if stack:
            ev.parent = stack[-1]
            stack[-1].children.append(ev)
        stack.append(ev)


def _merge_same_name_only_children(kept: list[_Event]) -> list[_Event]:
    """profiler_util.py's EventList._remove_dup_nodes, pass for pass."""
    while True:
        gone = set()
        for ev in kept:
            parent = ev.parent
            if parent is not None and parent.name == ev.name and len(parent.children) == 1:
                parent.children = ev.children
                parent.kernels_us = ev.kernels_us
                for ch in ev.children:
                    ch.parent = parent
                gone.add(id(ev))
        if not gone:
            return kept
        kept = [ev for ev in kept if id(ev) not in gone]


def _device_total(ev: _Event) -> float:
    """An op's kernels' time and its children's, down the tree (iterative: a deep tree needs no recursion)."""
    if ev.device_total is not None:
        return ev.device_total
    order, todo = [], [ev]
    while todo:
        node = todo.pop()
        order.append(node)
        todo.extend(ch for ch in node.children if ch.device_total is None)
    for node in reversed(order):
        node.device_total = node.kernels_us + sum(ch.device_total or 0.0 for ch in node.children)
    return ev.device_total


def _first_attr(obj, *names: str) -> float:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return 0.0


def attention_path(rows: list[dict[str, Any]]) -> str:
    names = [r["name"] for r in rows]
    if any(m in n for n in names for m in MATH_ATTENTION):
        return "math"
    if any(f in n for n in names for f in FUSED_ATTENTION):
        return "fused"
    if any(n in ("aten::_softmax", "aten::softmax") for n in names):
        return "eager"
    return "unknown"


def check_kernels(rows: list[dict[str, Any]], on_gpu: bool, attn_requested: str,
                  model_has_only_eager: str | None = None) -> CheckResult:
    """model_has_only_eager: why the run's attention is eager although SDPA was asked for (the model has no SDPA
    path: modeling.attention_for); eager attention is then the model's, not the stack's, and is not a problem."""
    if not rows:
        return skipped("no profile recorded", id="train.kernels")
    key = "self_device_us" if on_gpu else "self_cpu_us"
    # Device-side rows are kernels; on CPU, leave out the wrappers that only call other ops.
    candidates = [r for r in rows if r[key] > 0 and not r["name"].startswith("ProfilerStep")]
    top = sorted(candidates, key=lambda r: -r[key])[:TOP_N]
    total = sum(r[key] for r in candidates) or 1.0
    evidence = [f"{r[key] / 1e3:8.2f} ms {r[key] / total:5.1%}  x{r['count']:<4} {r['name'][:90]}" for r in top]
    path = attention_path(rows)
    cpu_hot = []
    if on_gpu:
        for r in rows:
            if r["name"] in HOT_OPS and r["device_us"] == 0 and r["self_cpu_us"] > 1000:
                cpu_hot.append(r["name"])
    data = {"attention_path": path, "top": top, "cpu_hot_ops": cpu_hot, "timed_on": "device" if on_gpu else "cpu"}
    problems = []
    if path == "math":
        problems.append("attention runs on the math path (SDPA fell back from flash/memory-efficient)")
    elif path == "eager" and model_has_only_eager:
        data["attention_why"] = model_has_only_eager
    elif path == "eager":
        problems.append("attention runs unfused (eager matmul + softmax)"
                        + (" as requested by --attn eager" if attn_requested == "eager" else ""))
    if cpu_hot:
        problems.append(f"hot ops ran on the CPU in a GPU run: {', '.join(cpu_hot)}")
    if not problems:
        why = f" ({model_has_only_eager})" if path == "eager" and model_has_only_eager else ""
        return passed(f"attention path: {path}{why}; top kernel {top[0]['name'][:60] if top else 'n/a'}", evidence,
                      **data, id="train.kernels")
    fix = fixes.step("rocmcheck smoke-train --attn sdpa", "on ROCm also check that this torch build has AOTriton flash "
                     "attention for this GPU (rocmcheck probe) and, for experimental archs, "
                     "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1")
    if cpu_hot and path not in ("math", "eager"):
        fix = fixes.step(None, "move the model and every batch to the GPU (model.to('cuda'), batch.to('cuda')) "
                               "before the step")
    return warned("; ".join(problems), fix, evidence, **data, id="train.kernels")
