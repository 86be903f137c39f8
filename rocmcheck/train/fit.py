"""Fit first: the planner's estimate (rocmcheck/plan, the one `rocmcheck plan` prints) for this run's model
and settings, judged before any weight is loaded, so a model that cannot fit stops with numbers and the
settings that would fit instead of an out-of-memory error after minutes of loading. No torch here.

The same estimate is later set beside the run's measured peak (verdicts.check_memory_headroom)."""

from __future__ import annotations

from typing import Any

from rocmcheck import fixes
from rocmcheck.fixes import Fix
from rocmcheck.plan.advice import FIT_FRACTION, cheapest_changes
from rocmcheck.plan.estimate import PLAN_ATTENTION, MemoryEstimate, estimate_memory
from rocmcheck.plan.shapes import shape_from_config
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.ds_config import DeepSpeedPlan
from rocmcheck.units import fmt_bytes

# The planner's attention names for --attn.
# Stop before loading when the estimate exceeds the device's memory by more than this factor. The planner
# lands within 6% of measured H200 peaks (tests/test_plan_estimate.py); 15% over is out of reach of that
# error, while a run estimated just above the memory is still tried (and its peak reported).
STOP_RATIO = 1.15
# A peak this far from the estimate is a finding (fragmentation, a leak, or the planner missing something):
# four times the planner's measured error, and never less than the floor (kernels' workspaces, the
# allocator's rounding and the CUDA context's allocations are hundreds of MiB on any model).
GAP_RATIO = 0.25
GAP_FLOOR_BYTES = 512 << 20


def run_settings(cfg: TrainConfig, plan: DeepSpeedPlan | None, world_size: int, fused_adamw: bool) -> dict[str, Any]:
    """The planner's settings for this run (what `rocmcheck plan` takes as options)."""
    offload = plan.offload if plan is not None else {}
    return {"micro_batch": cfg.micro_batch, "seq_len": cfg.seq_len,
            "precision": "pure-bf16" if cfg.pure_bf16 else "amp-bf16", "zero_stage": plan.stage if plan else 0,
            "world_size": world_size, "offload_optimizer": offload.get("offload_optimizer", "none") != "none",
            "offload_params": offload.get("offload_param", "none") != "none",
            "gradient_checkpointing": cfg.gradient_checkpointing, "attention": PLAN_ATTENTION.get(cfg.attn, "sdpa"),
            "lora_rank": cfg.lora_rank, "grad_accumulation_steps": cfg.grad_accum,
            "optimizer": "fused" if fused_adamw else "foreach"}


def estimate_run(model_config: dict[str, Any], settings: dict[str, Any]) -> tuple[MemoryEstimate | None, str]:
    """(the estimate, "") or (None, why the planner cannot estimate this model or these settings)."""
    try:
        return estimate_memory(shape_from_config(model_config), **settings), ""
    except ValueError as exc:
        return None, str(exc)


def smoke_train_flags(plan_flags: list[str]) -> str:
    """`rocmcheck plan` options of a suggested change, as smoke-train options (one string, for the report)."""
    return " ".join(smoke_train_args(plan_flags))


def smoke_train_fix(model: str, args: list[str], why: str) -> Fix:
    """`rocmcheck smoke-train --model MODEL ARGS...`, each word a quoted field."""
    words = {f"arg{i}": arg for i, arg in enumerate(args)}
    template = "rocmcheck smoke-train --model {model}" + "".join(" {%s}" % name for name in words)
    return fixes.shell(template, why, model=model, **words)


def smoke_train_args(plan_flags: list[str]) -> list[str]:
    """`rocmcheck plan` options of a suggested change, as smoke-train options."""
    out: list[str] = []
    zero, offload = 0, False
    i = 0
    while i < len(plan_flags):
        flag = plan_flags[i]
        if flag == "--zero":
            zero = int(plan_flags[i + 1])
            i += 2
            continue
        if flag in ("--offload-optimizer", "--offload-params"):
            offload = True
        elif flag == "--gpus":
            out += ["--gpus", plan_flags[i + 1]]
            i += 2
            continue
        else:
            out.append(flag)
        i += 1
    if zero:
        recipe = "zero3-offload.json" if offload else f"zero{zero}.json"
        out += ["--deepspeed", f"recipes/{recipe}"]
    return out


def check_fit(est: MemoryEstimate | None, why_not: str, device_bytes: int | None, device_label: str,
              model: str, on_gpu: bool = True) -> tuple[CheckResult, bool]:
    """(train.fit, whether to stop before loading). No estimate stops the run: a model the planner cannot size is
    one whose config.json lacks its sizes, and transformers would build it from LlamaConfig's defaults (a 6.7B
    model, 25 GiB in fp32) or from absurd ones, whatever the device holds."""
    if est is None:
        if why_not.startswith("config.json"):
            fix = fixes.note("config.json must give the model's sizes (hidden_size, num_hidden_layers, "
                             "num_attention_heads, intermediate_size, vocab_size), as every Hugging Face "
                             "checkpoint's does: use the checkpoint's own")
        else:
            fix = fixes.shell("rocmcheck plan --model {model}", "the planner says what it cannot model", model=model)
        return failed(f"no memory estimate ({why_not or 'the planner gave none'}); stopped before loading: a model "
                      "that cannot be sized is never built", fix, id="train.fit"), True
    if not device_bytes:
        return skipped(f"the device's memory is not known; the plan estimate is {fmt_bytes(est.total_bytes)}",
                       estimate_bytes=int(est.total_bytes), id="train.fit"), False
    s = est.settings
    weights = max((ln.largest for ln in est.lines if ln.name == "weights"), default=0.0)
    total, share = est.total_bytes, est.total_bytes / device_bytes
    what = (f"plan estimate {fmt_bytes(total)} per {'GPU' if on_gpu else 'process'} "
            f"({est.peak_phase.replace('_', ' ')} peak) of {fmt_bytes(device_bytes)} on {device_label} ({share:.0%})")
    evidence = ["estimate lines at the peak: " + ", ".join(f"{ln.name} {fmt_bytes(est.at_peak(ln))}" for ln in est.lines
                                                           if est.at_peak(ln)),
                f"settings: micro-batch {s['micro_batch']}, seq-len {s['seq_len']}, {s['precision']}, checkpointing "
                f"{'on' if s['gradient_checkpointing'] else 'off'}, ZeRO-{s['zero_stage']}, "
                f"LoRA {s['lora_rank'] or 'off'}, {s['world_size']} rank(s)"]
    data = {"estimate_bytes": int(total), "allocated_peak_bytes": int(est.allocated_peak_bytes),
            "device_bytes": int(device_bytes), "share": round(share, 4), "weights_bytes": int(weights),
            "settings": dict(s)}
    if share <= FIT_FRACTION:
        return passed(f"fits: {what}", evidence, **data, id="train.fit"), False
    changes = cheapest_changes(est.model, s, device_bytes)
    options = [smoke_train_fix(model, smoke_train_args(c.flags),
                               f"{c.label}: {fmt_bytes(c.estimate.total_bytes)} "
                               f"({c.estimate.total_bytes / device_bytes:.0%})")
               for c in changes]
    data["changes"] = [{"label": c.label, "flags": smoke_train_flags(c.flags),
                        "estimate_bytes": int(c.estimate.total_bytes)} for c in changes]
    fix = options[0] if options else fixes.shell("rocmcheck plan --model {model}",
                                                 f"no setting rocmcheck tries fits on {device_label}: a shorter "
                                                 "--seq-len, or a device with more memory", model=model)
    evidence += [f"would fit: {o.line()}" for o in options[1:]]
    if weights > device_bytes:
        return failed(f"does not fit: the weights alone ({fmt_bytes(weights)}) are larger than {device_label}'s "
                      f"{fmt_bytes(device_bytes)}; stopped before loading ({what})", fix, evidence, **data,
                      id="train.fit"), True
    if share > STOP_RATIO:
        return failed(f"does not fit: {what}; stopped before loading", fix, evidence, **data, id="train.fit"), True
    return warned(f"tight: {what}; running anyway (train.memory has the real peak)", fix, evidence, **data,
                  id="train.fit"), False
