"""Verdicts from the estimate: plan.fit (does this step fit on this GPU?) and plan.batch (the largest micro-batch),
and, when it does not fit, the cheapest changes that make it fit: each found by re-running the estimate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rocmcheck.fixes import Fix, note
from rocmcheck.plan.estimate import MemoryEstimate, estimate_memory, largest_micro_batch
from rocmcheck.plan.shapes import ModelShape
from rocmcheck.result import CheckResult, failed, passed, warned
from rocmcheck.units import fmt_bytes

FIT_FRACTION = 0.9  # above this, allocator fragmentation and spikes can tip a step over: "tight"
MORE_GPUS = (2, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class Change:
    label: str  # what changes, in words
    how: str  # what to set in the training code or DeepSpeed config
    flags: list[str]  # the same change as `rocmcheck plan` options
    estimate: MemoryEstimate

    def line(self, gpu_memory_bytes: float) -> str:
        total = self.estimate.total_bytes
        return (f"{self.label}: {self.how} -> {fmt_bytes(total)} ({total / gpu_memory_bytes:.0%}) "
                f"[rocmcheck plan ... {' '.join(self.flags)}]")

    def fix(self, gpu_memory_bytes: float) -> Fix:
        """The change as the fix: a setting in the person's training code or DeepSpeed config, in words (the same
        change as `rocmcheck plan` flags is in the verdict's data)."""
        return note(self.line(gpu_memory_bytes))


CKPT_HOW = "model.gradient_checkpointing_enable() (HF Trainer: gradient_checkpointing=True)"


def _zero_how(stage: int, offload_optimizer: bool = False, offload_params: bool = False) -> str:
    parts = [f'"stage": {stage}']
    if offload_optimizer:
        parts.append('"offload_optimizer": {"device": "cpu", "pin_memory": true}')
    if offload_params:
        parts.append('"offload_param": {"device": "cpu", "pin_memory": true}')
    return 'DeepSpeed config "zero_optimization": {' + ", ".join(parts) + "}"


def _candidates(model: ModelShape, s: dict[str, Any], mem: float) -> list[tuple[str, str, list[str], dict[str, Any]]]:
    """(label, how, flags, new settings) in order of cost: same math first, then recomputation, then
    communication, then host offload, then a different fine-tune."""
    out: list[tuple[str, str, list[str], dict[str, Any]]] = []
    b, accum, ckpt = s["micro_batch"], s["grad_accumulation_steps"], s["gradient_checkpointing"]

    def smaller_batch(extra: dict[str, Any], prefix: str, how_prefix: str, flags: list[str]) -> None:
        trial = {**s, **extra}
        best = largest_micro_batch(model, gpu_memory_bytes=mem, target_fraction=FIT_FRACTION, **trial)
        if not 1 <= best < b:
            return
        new_accum = accum * math.ceil(b / best)
        # more accumulation steps keep the gradients through the forward: estimate again with them
        trial.update(micro_batch=best, grad_accumulation_steps=new_accum)
        while trial["micro_batch"] > 1 and _total(model, trial) > FIT_FRACTION * mem:
            trial["micro_batch"] -= 1
        best = trial["micro_batch"]
        trial["grad_accumulation_steps"] = accum * math.ceil(b / best)
        how = (f"{how_prefix}per_device_train_batch_size={best}, gradient_accumulation_steps="
               f"{trial['grad_accumulation_steps']} (keeps the global batch)")
        out.append((f"{prefix}micro-batch {best}", how,
                    flags + ["--micro-batch", str(best), "--grad-accum", str(trial["grad_accumulation_steps"])], trial))

    smaller_batch({}, "", "", [])
    if out and 2 * out[0][3]["micro_batch"] < b:
        late = [out.pop()]  # more than halving the micro-batch costs throughput: after checkpointing
    else:
        late = []
    if not ckpt:
        out.append(("gradient checkpointing", CKPT_HOW, ["--gradient-checkpointing"],
                    {**s, "gradient_checkpointing": True}))
        smaller_batch({"gradient_checkpointing": True}, "gradient checkpointing + ", "gradient checkpointing, ",
                      ["--gradient-checkpointing"])
    out.extend(late)
    with_ckpt = [False] if ckpt else [False, True]
    ckpt_flag = {True: ["--gradient-checkpointing"], False: []}
    if s["world_size"] > 1:
        for stage in range(s["zero_stage"] + 1, 4):
            for add_ckpt in with_ckpt:
                label = f"ZeRO-{stage} over {s['world_size']} GPUs" + (" + gradient checkpointing" if add_ckpt else "")
                how = _zero_how(stage) + (f"; {CKPT_HOW}" if add_ckpt else "")
                out.append((label, how, ["--zero", str(stage)] + ckpt_flag[add_ckpt],
                            {**s, "zero_stage": stage, "gradient_checkpointing": ckpt or add_ckpt}))
    stage = max(s["zero_stage"], 2)
    for add_ckpt in with_ckpt:
        label = (f"ZeRO-{stage} with the optimizer offloaded to the CPU"
                 + (" + gradient checkpointing" if add_ckpt else ""))
        out.append((label, _zero_how(stage, True) + (f"; {CKPT_HOW}" if add_ckpt else ""),
                    ["--zero", str(stage), "--offload-optimizer"] + ckpt_flag[add_ckpt],
                    {**s, "zero_stage": stage, "offload_optimizer": True, "gradient_checkpointing": ckpt or add_ckpt}))
    for add_ckpt in with_ckpt:
        label = "ZeRO-3 with optimizer and parameters offloaded" + (" + gradient checkpointing" if add_ckpt else "")
        out.append((label, _zero_how(3, True, True) + (f"; {CKPT_HOW}" if add_ckpt else ""),
                    ["--zero", "3", "--offload-optimizer", "--offload-params"] + ckpt_flag[add_ckpt],
                    {**s, "zero_stage": 3, "offload_optimizer": True, "offload_params": True,
                     "gradient_checkpointing": ckpt or add_ckpt}))
    for n in MORE_GPUS:
        if n > s["world_size"]:
            out.append((f"ZeRO-3 over {n} GPUs + gradient checkpointing", _zero_how(3) + f"; {CKPT_HOW}; {n} GPUs",
                        ["--gpus", str(n), "--zero", "3", "--gradient-checkpointing"],
                        {**s, "world_size": n, "zero_stage": 3, "offload_params": False,
                         "gradient_checkpointing": True}))
    if s["lora_rank"] is None:
        for add_ckpt in with_ckpt:
            out.append(("LoRA r=16 instead of a full fine-tune" + (" + gradient checkpointing" if add_ckpt else ""),
                        'peft.LoraConfig(r=16, target_modules="all-linear")' + (f"; {CKPT_HOW}" if add_ckpt else ""),
                        ["--lora-rank", "16"] + ckpt_flag[add_ckpt],
                        {**s, "lora_rank": 16, "zero_stage": 0, "offload_optimizer": False, "offload_params": False,
                         "gradient_checkpointing": ckpt or add_ckpt}))
    return out


def _total(model: ModelShape, settings: dict[str, Any]) -> float:
    return estimate_memory(model, **settings).total_bytes


def cheapest_changes(model: ModelShape, settings: dict[str, Any], gpu_memory_bytes: float,
                     limit: int = 3) -> list[Change]:
    """Up to `limit` changes, cheapest first, after which the estimate is within FIT_FRACTION of the GPU."""
    found: list[Change] = []
    for label, how, flags, new in _candidates(model, settings, gpu_memory_bytes):
        est = estimate_memory(model, **new)
        if est.total_bytes <= FIT_FRACTION * gpu_memory_bytes:
            found.append(Change(label, how, flags, est))
            if len(found) >= limit:
                break
    return found


def fit_verdict(est: MemoryEstimate, gpu_memory_bytes: float, gpu_label: str) -> CheckResult:
    """plan.fit: fits (<= 90% of the GPU), tight (90-100%), does not fit (> 100%)."""
    s = est.settings
    total, frac = est.total_bytes, est.total_bytes / gpu_memory_bytes
    what = (f"{est.model.name}, micro-batch {s['micro_batch']} x seq {s['seq_len']}: {fmt_bytes(total)} per GPU at the "
            f"peak ({est.peak_phase.replace('_', ' ')}) of {fmt_bytes(gpu_memory_bytes)} on {gpu_label} ({frac:.0%})")
    totals = est.phase_totals()
    evidence = ["step moments (allocated): " + ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(v)}"
                                                          for k, v in totals.items()),
                f"+ runtime context {fmt_bytes(est.context_bytes)}"] + est.notes
    if est.host_bytes:
        evidence.append(f"host memory for offloaded states: {fmt_bytes(est.host_bytes)} per GPU")
    data = {"estimate": est.to_dict(), "gpu_memory_bytes": int(gpu_memory_bytes), "fraction": round(frac, 4)}
    if frac <= FIT_FRACTION:
        return passed(f"fits: {what}", evidence, **data, id="plan.fit")
    changes = cheapest_changes(est.model, s, gpu_memory_bytes)
    data["changes"] = [{"label": c.label, "how": c.how, "flags": c.flags, "total_bytes": int(c.estimate.total_bytes)}
                       for c in changes]
    evidence += [f"option: {c.line(gpu_memory_bytes)}" for c in changes[1:]]
    if changes:
        fix = changes[0].fix(gpu_memory_bytes)
    else:
        fix = note(f"no change rocmcheck tries brings it under {FIT_FRACTION:.0%}: shorten the sequence "
                   f"(rocmcheck plan --seq-len {max(1, s['seq_len'] // 2)} ...) or use GPUs with more memory")
    if frac <= 1.0:
        return warned(f"tight: {what}; fragmentation or a longer batch can run out of memory", fix,
                      evidence, **data, id="plan.fit")
    return failed(f"does not fit: {what}", fix, evidence, **data, id="plan.fit")


def batch_verdict(model: ModelShape, settings: dict[str, Any], gpu_memory_bytes: float, gpu_label: str,
                  target_fraction: float = FIT_FRACTION) -> CheckResult:
    """plan.batch (analytic): the largest micro-batch within target_fraction of the GPU."""
    best = largest_micro_batch(model, gpu_memory_bytes=gpu_memory_bytes, target_fraction=target_fraction, **settings)
    seq = settings["seq_len"]
    budget = f"{target_fraction:.0%} of {fmt_bytes(gpu_memory_bytes)} on {gpu_label}"
    within = f"within {budget}"
    if best == 0:
        one = {**settings, "micro_batch": 1}
        changes = cheapest_changes(model, one, gpu_memory_bytes, limit=2)
        fix = changes[0].fix(gpu_memory_bytes) if changes else note(
            f"no change rocmcheck tries fits at seq {seq}: shorten the sequence "
            f"(rocmcheck plan --seq-len {max(1, seq // 2)} ...) or use GPUs with more memory")
        est = estimate_memory(model, **one)
        return failed(f"not even micro-batch 1 at seq {seq} fits in {budget} "
                      f"(needs {fmt_bytes(est.total_bytes)})", fix, best=0, target_fraction=target_fraction,
                      id="plan.batch")
    est = estimate_memory(model, **{**settings, "micro_batch": best})
    nxt = estimate_memory(model, **{**settings, "micro_batch": best + 1})
    return passed(f"largest micro-batch {best} at seq {seq}: {fmt_bytes(est.total_bytes)}, {within} "
                  "(estimate; --measure runs the real search on a GPU)",
                  [f"micro-batch {best + 1} would need {fmt_bytes(nxt.total_bytes)}"],
                  best=best, target_fraction=target_fraction, total_bytes=int(est.total_bytes), id="plan.batch")
