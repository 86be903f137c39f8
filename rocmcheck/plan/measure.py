"""find_max_micro_batch: the real batch finder, run in a child process (probe_child.py) with a timeout.
A child that hangs, crashes or speaks garbage becomes a verdict; so does a machine without a GPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.child import ChildRun, child_env, run_child
from rocmcheck.fixes import shell
from rocmcheck.plan.estimate import estimate_memory
from rocmcheck.plan.search import Trial
from rocmcheck.plan.shapes import ModelShape, load_model_shape
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.units import fmt_bytes

CHILD = "rocmcheck.plan.probe_child"
CHECK_ID = "plan.batch"
_REPRODUCE_INIT = shell("python -c 'import torch; print(torch.cuda.is_available(), torch.cuda.device_count())'",
                        "alone: the batch finder's child died before it could say whether there is a GPU")


@dataclass
class MeasuredBatch:
    model: ModelShape
    seq_len: int
    target_fraction: float
    available: bool = False
    reason: str = ""  # why there is no answer (no GPU, child died, ...), when there is none
    device: dict[str, Any] = field(default_factory=dict)
    best: int = 0
    stop: str = ""
    total_bytes: int = 0
    budget_bytes: int = 0
    outside_bytes: int = 0
    trials: list[Trial] = field(default_factory=list)
    running: int | None = None  # the micro-batch a dead or hung child was trying
    guess: int | None = None  # the planner's answer the search started from
    stderr_tail: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.available and bool(self.stop)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model.name, "seq_len": self.seq_len, "target_fraction": self.target_fraction,
                "available": self.available, "reason": self.reason, "device": self.device, "best": self.best,
                "stop": self.stop, "total_bytes": self.total_bytes, "budget_bytes": self.budget_bytes,
                "outside_bytes": self.outside_bytes, "running": self.running, "guess": self.guess,
                "settings": self.settings,
                "trials": [t.to_dict() for t in self.trials]}


def read_events(events: list[dict[str, Any]], result: MeasuredBatch) -> None:
    """Fill result from the child's events (rocmcheck.child.run_child read them; lines that were no event are
    left out, and the verdict names what is missing)."""
    started: list[int] = []
    for event in events:
        kind = event["event"]
        if kind == "device":
            result.device = event
            result.available = event.get("available") is True
            if not result.available:
                result.reason = str(event.get("reason") or "no GPU")
        elif kind == "guess" and isinstance(event.get("micro_batch"), int):
            result.guess = event["micro_batch"]
        elif kind == "start" and isinstance(event.get("micro_batch"), int):
            started.append(event["micro_batch"])
        elif kind == "trial" and isinstance(event.get("micro_batch"), int):
            result.trials.append(Trial.from_dict(event))
        elif kind == "result":
            result.best = int(event.get("best") or 0)
            result.stop = str(event.get("stop") or "")
            for key in ("total_bytes", "budget_bytes", "outside_bytes"):
                result.__setattr__(key, int(event.get(key) or 0))
    done = {t.micro_batch for t in result.trials}
    if started and started[-1] not in done:
        result.running = started[-1]


def find_max_micro_batch(model_dir_or_shape: ModelShape | str, seq_len: int, target_fraction: float = 0.95, *,
                         precision: str = "amp-bf16", gradient_checkpointing: bool = False, attention: str = "sdpa",
                         grad_accumulation_steps: int = 1, lora_rank: int | None = None,
                         lora_target: str = "all-linear", lora_dropout: float = 0.0, adapter_dtype: str = "fp32",
                         autocast: bool = True, steps: int = 2, start: int | None = None,
                         max_micro_batch: int = 1024, max_trials: int = 25, timeout_s: float = 600.0,
                         cpu_ceiling_bytes: int | None = None, python: str | None = None) -> MeasuredBatch:
    """Search the largest micro-batch that really trains within target_fraction of GPU 0's memory: the planner's
    answer for that GPU first, then around it (plan/search.py), or, given a start, doubling from there.
    lora_rank (and the LoRA settings) trains peft adapters over a bf16 base, as estimate_memory models it.
    cpu_ceiling_bytes runs the search on the CPU against that many bytes: a test mode, not a measurement."""
    model = (model_dir_or_shape if isinstance(model_dir_or_shape, ModelShape)
             else load_model_shape(model_dir_or_shape))
    settings = {"precision": precision, "gradient_checkpointing": gradient_checkpointing, "attention": attention,
                "grad_accumulation_steps": grad_accumulation_steps, "lora_rank": lora_rank, "lora_target": lora_target,
                "lora_dropout": lora_dropout, "adapter_dtype": adapter_dtype, "autocast": autocast}
    # Same settings rules as the estimate (raises ValueError on bad ones), before any process starts.
    estimate_memory(model, micro_batch=1, seq_len=seq_len, **settings)
    settings["steps"] = steps
    if not 0 < target_fraction <= 1:
        raise ValueError(f"target_fraction must be in (0, 1], got {target_fraction!r}")
    plan = {"config": model.to_config(), "seq_len": seq_len, "target_fraction": target_fraction, "start": start,
            "max_micro_batch": max_micro_batch, "max_trials": max_trials, "cpu_ceiling_bytes": cpu_ceiling_bytes,
            "init_timeout_s": max(1.0, min(180.0, timeout_s - 5)),
            "trial_timeout_s": max(1.0, min(300.0, timeout_s - 5)), **settings}
    run = run_child(CHILD, plan, timeout_s, python=python, env=child_env({"TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}))
    result = MeasuredBatch(model=model, seq_len=seq_len, target_fraction=target_fraction, settings=settings)
    read_events(run.events, result)
    result.stderr_tail = run.stderr_tail(6)
    if not result.device:
        result.reason = _why_dead(run, "before reporting the device")
    elif result.available and not result.stop:
        where = f"while trying micro-batch {result.running}" if result.running else "between tries"
        result.reason = _why_dead(run, where)
    return result


def _why_dead(run: ChildRun, where: str) -> str:
    cmd = run.command
    if run.hung:
        return f"the batch finder hung {where} (no answer within its time limit)"
    if cmd.returncode is not None and cmd.returncode < 0:
        return f"the batch finder crashed {where} (signal {-cmd.returncode})"
    return f"the batch finder stopped {where}: {cmd.describe_failure()}"


def measured_verdict(m: MeasuredBatch) -> CheckResult:
    """plan.batch from a real search."""
    data = m.to_dict()
    ev = [_trial_line(t) for t in m.trials]
    name = m.model.name
    if not m.device:  # the child died or hung before it could even say whether there is a GPU
        return failed(f"batch not measured: {m.reason}", _REPRODUCE_INIT, [f"stderr: {ln}" for ln in m.stderr_tail],
                      **data, id=CHECK_ID)
    if not m.available:
        return skipped(f"batch not measured: {m.reason or 'no GPU'}", ev, **data, id=CHECK_ID)
    if not m.finished:
        fix = shell("rocmcheck plan --model {model} --seq-len {seq} --measure --timeout 1200",
                    "more time; then check dmesg for a GPU reset", model=name, seq=m.seq_len)
        return failed(f"batch search incomplete: {m.reason}", fix, ev + [f"stderr: {ln}" for ln in m.stderr_tail],
                      **data, id=CHECK_ID)
    budget = f"{m.target_fraction:.0%} of {fmt_bytes(m.total_bytes)}"
    if m.best == 0:
        seq = max(1, m.seq_len // 2) if m.settings.get("gradient_checkpointing") else m.seq_len
        fix = shell("rocmcheck plan --model {model} --seq-len {seq} --gradient-checkpointing --measure",
                    "checkpointing first, then a shorter sequence", model=name, seq=seq)
        return failed(f"not even micro-batch 1 trains within {budget} ({m.stop})", fix, ev, **data, id=CHECK_ID)
    best = next(t for t in m.trials if t.micro_batch == m.best and t.outcome == "ok")
    summary = (f"largest micro-batch {m.best} at seq {m.seq_len}: peak {fmt_bytes(best.device_peak)} within "
               f"{budget} ({m.stop}; {len(m.trials)} tries"
               + (f", from the planner's {m.guess})" if m.guess is not None else ")"))
    if "cap" in m.stop or "stopped after" in m.stop:
        return warned(summary, shell("rocmcheck plan --model {model} --seq-len {seq} --measure --start-batch {best}",
                                     "search on from here", model=name, seq=m.seq_len, best=m.best),
                      ev, **data, id=CHECK_ID)
    return passed(summary, ev, **data, id=CHECK_ID)


def _trial_line(t: Trial) -> str:
    peak = (f"device peak {fmt_bytes(t.device_peak)} (allocated {fmt_bytes(t.peak_allocated or 0)})"
            if t.device_peak else "")
    what = {"ok": "fits", "over": "over budget", "oom": "out of memory", "error": "error"}.get(t.outcome, t.outcome)
    return f"micro-batch {t.micro_batch}: {what}" + (f", {peak}" if peak else "") + (f" — {t.error}" if t.error else "")
