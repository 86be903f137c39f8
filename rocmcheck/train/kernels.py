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
    """Run `step` once under torch.profiler; one row per op/kernel name (times in microseconds)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        step()
        if on_gpu:
            torch.cuda.synchronize()
    rows = []
    for evt in prof.key_averages():
        rows.append({
            "name": evt.key,
            "count": evt.count,
            "self_cpu_us": float(evt.self_cpu_time_total),
            # torch < 2.4 named these *_cuda_time_total (also on ROCm).
            "self_device_us": float(_first_attr(evt, "self_device_time_total", "self_cuda_time_total")),
            "device_us": float(_first_attr(evt, "device_time_total", "cuda_time_total")),
        })
    return rows


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


def check_kernels(rows: list[dict[str, Any]], on_gpu: bool, attn_requested: str) -> CheckResult:
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
    elif path == "eager":
        problems.append("attention runs unfused (eager matmul + softmax)"
                        + (" as requested by --attn eager" if attn_requested == "eager" else ""))
    if cpu_hot:
        problems.append(f"hot ops ran on the CPU in a GPU run: {', '.join(cpu_hot)}")
    if not problems:
        return passed(f"attention path: {path}; top kernel {top[0]['name'][:60] if top else 'n/a'}", evidence, **data,
                      id="train.kernels")
    fix = fixes.step("rocmcheck smoke-train --attn sdpa", "on ROCm also check that this torch build has AOTriton flash "
                     "attention for this GPU (rocmcheck probe) and, for experimental archs, "
                     "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1")
    if cpu_hot and path not in ("math", "eager"):
        fix = fixes.step(None, "move the model and every batch to the GPU (model.to('cuda'), batch.to('cuda')) "
                               "before the step")
    return warned("; ".join(problems), fix, evidence, **data, id="train.kernels")
