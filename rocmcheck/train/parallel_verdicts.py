"""Verdicts only a DeepSpeed or multi-rank smoke-train has: pure functions over measured numbers.

train.deepspeed_parity: the engine's loss curve against the plain run's (same seed, same data, same
  lr schedule), window by window, with reference.py's tolerance (see PARITY_* below for why that one).
train.offload_cost: median step time with ZeRO offload vs the same config without it.
train.rank_agreement: every rank saw the same global loss (and gradient norm) at every step, the
  ranks trained on different data, and the data-parallel copies of the weights are identical.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.train import reference

# Parity tolerance: reference.py's per-window |diff| <= 0.15 + 15% of the plain run's window mean.
# Measured here (benchmarks/RESULTS.md, tests/test_train_deepspeed.py): the bundled fine-tune through
# ZeRO-2, ZeRO-3 and ZeRO-3 + CPU offload on this CPU stays within about a tenth of that, although
# DeepSpeed's bf16 differs from the plain run's more than in reduction order (bf16 weights in the
# forward pass instead of fp32 weights under autocast). A ZeRO bug that drops or double-counts a
# gradient shard changes the curve by far more. So no looser tolerance is needed.
PARITY_ABS_TOL = reference.ABS_TOL
PARITY_REL_TOL = reference.REL_TOL
# Step-time cost of offload that is not believable for a working setup (the seed reports 15-20% on
# MI300X): more than 3x the time of the same config without offload.
OFFLOAD_ABSURD_RATIO = 3.0
STEADY_FROM = 3  # the first steps pay for allocator growth, JIT kernels, optimizer-state creation


def check_deepspeed_parity(ds_losses: list[float], plain_losses: list[float], label: str,
                           why_not: str | None = None) -> CheckResult:
    if why_not:
        return skipped("train.deepspeed_parity", why_not)
    if not ds_losses or len(ds_losses) < len(plain_losses):
        return skipped("train.deepspeed_parity", f"the {label} run stopped after {len(ds_losses)} of {len(plain_losses)} steps")
    cmp = reference.compare(ds_losses, plain_losses)
    worst_step = max(range(len(plain_losses)), key=lambda i: abs(ds_losses[i] - plain_losses[i]))
    evidence = [f"steps {w['steps']}: {label} {w['run']:.3f} plain {w['reference']:.3f} (|diff| <= {w['tolerance']:.3f}: "
                f"{'ok' if w['ok'] else 'OUT'})" for w in cmp["windows"]]
    evidence.append(f"largest single-step difference: step {worst_step}, {label} {ds_losses[worst_step]:.4f} "
                    f"vs plain {plain_losses[worst_step]:.4f}")
    data = {"windows": cmp["windows"], "max_step_diff": abs(ds_losses[worst_step] - plain_losses[worst_step]),
            "max_window_diff": max(abs(w["diff"]) for w in cmp["windows"]), "label": label}
    if cmp["ok"]:
        return passed("train.deepspeed_parity", f"{label} loss curve matches the plain run (largest window "
                      f"difference {data['max_window_diff']:.3f})", evidence, **data)
    w = cmp["worst"]
    return failed("train.deepspeed_parity", f"{label} loss curve departs from the plain run at steps {w['steps']} "
                  f"({w['run']:.3f} vs {w['reference']:.3f})",
                  "rerun with recipes/zero2.json: if ZeRO-2 matches and ZeRO-3 does not, report the DeepSpeed version and "
                  "this evidence (gradient partitioning at fault); if neither matches, compare --nproc 1 with the plain run",
                  evidence, **data)


def steady_median(step_times: list[float]) -> float | None:
    steady = step_times[STEADY_FROM:] if len(step_times) > 2 * STEADY_FROM else step_times
    return statistics.median(steady) if steady else None


def check_offload_cost(offload_step_s: list[float], no_offload_step_s: list[float], label: str, on_gpu: bool) -> CheckResult:
    with_off, without = steady_median(offload_step_s), steady_median(no_offload_step_s)
    if not with_off or not without:
        return skipped("train.offload_cost", "a run stopped before its step times could be compared")
    ratio = with_off / without
    cost = (ratio - 1) * 100
    data = {"offload_step_s": with_off, "no_offload_step_s": without, "ratio": ratio, "cost_percent": cost,
            "label": label, "on_gpu": on_gpu}
    evidence = [f"median step {with_off * 1e3:.1f} ms with offload, {without * 1e3:.1f} ms with the same config "
                f"without offload ({len(offload_step_s)} and {len(no_offload_step_s)} steps, first {STEADY_FROM} left out)"]
    if not on_gpu:
        evidence.append("on CPU both live in host memory: this measures DeepSpeedCPUAdam and the offload bookkeeping, "
                        "not host-device transfers")
    summary = f"{label}: step time {cost:+.0f}% vs no offload ({with_off * 1e3:.1f} ms vs {without * 1e3:.1f} ms)"
    if ratio > OFFLOAD_ABSURD_RATIO:
        return warned("train.offload_cost", summary + f": more than {OFFLOAD_ABSURD_RATIO:g}x",
                      "check that pin_memory is true in offload_optimizer/offload_param and that the CPU side is not starved "
                      "(numactl --hardware; set OMP_NUM_THREADS to the cores per rank)", evidence, **data)
    return passed("train.offload_cost", summary, evidence, **data)


def check_rank_agreement(per_rank: list[dict[str, Any]], weights_checked: bool) -> CheckResult:
    """per_rank[i]: {"global_loss": [...], "local_loss": [...], "grad_norm": [...], "weights": float|None}."""
    n = len(per_rank)
    if n < 2:
        return skipped("train.rank_agreement", "one rank: nothing to compare")
    steps = len(per_rank[0]["global_loss"])
    evidence: list[str] = []
    problems: list[str] = []
    if any(len(r["global_loss"]) != steps for r in per_rank):
        problems.append("ranks ran different numbers of steps: " + ", ".join(str(len(r["global_loss"])) for r in per_rank))
    disagree = [i for i in range(steps) if len({r["global_loss"][i] for r in per_rank if i < len(r["global_loss"])}) > 1]
    if disagree:
        i = disagree[0]
        problems.append(f"global loss differs between ranks at {len(disagree)} of {steps} steps (first: step {i}: "
                        + ", ".join(f"{r['global_loss'][i]:.6f}" for r in per_rank) + ")")
    norm_off = [i for i in range(steps) if not _close([r["grad_norm"][i] for r in per_rank])]
    if norm_off:
        i = norm_off[0]
        problems.append(f"gradient norm differs between ranks at {len(norm_off)} steps (first: step {i}: "
                        + ", ".join(f"{r['grad_norm'][i]:.6g}" for r in per_rank) + "): gradients are not synchronised")
    same_data = steps > 0 and all(len({r["local_loss"][i] for r in per_rank}) == 1 for i in range(steps))
    if same_data:
        problems.append("every rank had the same local loss at every step: all ranks trained on the same batch "
                        "(the data is not sharded)")
    if weights_checked:
        sums = [r["weights"] for r in per_rank]
        if len(set(sums)) > 1:
            problems.append("weights differ between ranks after training (sums " + ", ".join(f"{s:.6f}" for s in sums) + ")")
        else:
            evidence.append(f"weights identical on all ranks after training (sum {sums[0]:.6f})")
    evidence.insert(0, f"{n} ranks x {steps} steps; global loss (all-reduced mean) compared exactly, gradient norm to 1e-6")
    if steps:
        evidence.append("last step local losses: " + ", ".join(f"rank {k} {r['local_loss'][-1]:.4f}" for k, r in enumerate(per_rank)))
    data = {"ranks": n, "steps": steps, "loss_disagree_steps": disagree[:20], "grad_norm_disagree_steps": norm_off[:20],
            "same_data": same_data, "weights_checked": weights_checked}
    if problems:
        return failed("train.rank_agreement", "; ".join(problems)[:400],
                      "rerun with --nproc 2 --device cpu: if that agrees, the GPU collective library is at fault "
                      "(NCCL_DEBUG=INFO shows it; on MI300X check iommu=pt, see docs/distributed.md)",
                      evidence + problems, **data)
    return passed("train.rank_agreement", f"all {n} ranks agree on the loss at every one of {steps} steps", evidence, **data)


def _close(values: list[float], rel: float = 1e-6) -> bool:
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) != len(values):
        return len(finite) == 0  # all NaN (e.g. no norm reported) counts as agreeing; a mix does not
    lo, hi = min(finite), max(finite)
    return hi - lo <= rel * max(abs(hi), 1e-12)
