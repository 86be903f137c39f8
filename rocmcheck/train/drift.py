"""smoke-train --drift: the run's steps again in fp32, and the two curves set side by side.

train.numerics compares bf16 with fp32 on the first batch only. What costs people days shows over steps: a bf16
gradient norm in the thousands from the first step (an fp32 run of the same model: single digits), a loss spike
that never comes back, a bf16 loss that slowly walks away from fp32's. So after the run (the bf16 one: autocast
over fp32 weights, or --pure-bf16), the same model trains again from the same initial weights, on the same
batches in the same order, with the same steps and learning-rate schedule, in fp32: the plain strategy
(plain_strategy.py, fp32=True: fp32 weights, a LoRA base too, no autocast) through the one training loop
(run.train_steps, by way of the run's own phase: seeded, built and freed as every run is). Each step's loss and
gradient norm of both go to verdicts.check_drift.

The bf16 model is gone before the fp32 one is built, so the reference needs no more memory than the run itself
holds with fp32 master weights (its activations are fp32: twice bf16's). A reference that runs out of memory, or
stops at a non-finite step, is said so in the verdict rather than judged.

Imports torch only inside compare_with_fp32 (the run's side); the rest is plain numbers.
"""

from __future__ import annotations

import gc
import math
from typing import Any

from rocmcheck.result import CheckResult, skipped
from rocmcheck.train import verdicts

# Steps of each curve written into the report (info.drift): every step up to this many, else this many evenly
# spaced; the verdict's evidence samples fewer windows (verdicts.DRIFT_EVIDENCE_WINDOWS).
INFO_MAX_STEPS = 400


def curves(metrics: list[dict[str, Any]]) -> dict[str, list[float]]:
    """{"loss": [...], "grad_norm": [...]} from a phase's metrics rows (one per step)."""
    return {"loss": [float(m["loss"]) for m in metrics], "grad_norm": [float(m["grad_norm"]) for m in metrics]}


def sampled(values: list[float], limit: int = INFO_MAX_STEPS) -> list[list[float]]:
    """[[step, value], ...]: every step, or `limit` evenly spaced ones (the first and the last among them)."""
    if len(values) <= limit:
        return [[i, v] for i, v in enumerate(values)]
    picks = sorted({round(i * (len(values) - 1) / (limit - 1)) for i in range(limit)})
    return [[i, values[i]] for i in picks]


def _finite_or_none(values: list[list[float]]) -> list[list[float | None]]:
    return [[s, v if math.isfinite(v) else None] for s, v in values]  # JSON has no NaN/inf


def compare_with_fp32(run: Any, bf16_phase: Any) -> CheckResult:
    """Train the fp32 reference through `run` (run.py's _Run: its phase, seeded, built, trained and freed like the
    bf16 one) and judge the bf16 phase's curves against it. Every rank trains the reference (DDP's collectives);
    rank 0's verdict is the one that counts. The curves go to run.info["drift"]."""
    from rocmcheck.train import modeling
    from rocmcheck.train.plain_strategy import PlainStrategy

    strategy = PlainStrategy(run.cfg, run.device, run.world, fp32=True)
    try:
        ref = run._phase(strategy, main=False)
    except Exception as exc:  # noqa: BLE001 - only out of memory while building is a finding; else a bug, raised
        if not modeling.is_oom(exc):
            raise
        strategy.close()
        gc.collect()
        if run.device.type == "cuda":
            import torch

            torch.cuda.empty_cache()
        return verdicts.check_drift(curves(bf16_phase.metrics), None,
                                    f"the fp32 reference ran out of memory while loading ({type(exc).__name__})")
    if not run.world.is_main:
        return skipped("rank 0 judges the drift", id="train.drift")
    low, high = curves(bf16_phase.metrics), curves(ref.metrics)
    precision = "bf16 weights" if run.cfg.pure_bf16 else "bf16 autocast over fp32 weights"
    why_not = None
    if ref.oom is not None:
        why_not = (f"the fp32 reference ran out of memory at step {ref.oom['step']} (its activations are fp32, twice "
                   "bf16's)")
    elif ref.stopped and "non-finite" not in ref.stopped:  # a non-finite fp32 step is the judge's to name
        why_not = f"the fp32 reference stopped: {ref.stopped}"
    run.info["drift"] = {"steps": len(low["loss"]), "precision": precision,
                         "reference": "plain strategy, fp32 weights (a LoRA base too), no autocast",
                         "reference_stopped": ref.stopped, "reference_loop_s": ref.info.get("loop_s"),
                         "bf16": {k: _finite_or_none(sampled(v)) for k, v in low.items()},
                         "fp32": {k: _finite_or_none(sampled(v)) for k, v in high.items()}}
    return verdicts.check_drift(low, high if why_not is None else None, why_not, precision=precision,
                                on_gpu=run.device.type == "cuda", attn=run.cfg.attn)
