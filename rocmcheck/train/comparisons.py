"""Verdicts that compare two training runs, or the ranks of one: pure functions over measured numbers.

train.deepspeed_parity: the engine's loss curve against the plain run's (same seed, same data, same
  lr schedule), step by step (see PARITY_STEP_TOL for the tolerance and why).
train.offload_cost: median step time with ZeRO offload vs the same config without it.
train.rank_agreement: every rank saw the same global loss (and gradient norm) at every step, the
  ranks trained on different data, and the data-parallel copies of the weights are identical.
train.bench_*: `smoke-train --bench`, the loop against HF Trainer and against itself under torch.compile.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from rocmcheck import fixes
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.train import reference

# Parity tolerance for two runs on the same data from the same weights (the loop vs HF Trainer, eager vs
# compiled, plain vs DeepSpeed): every step's |loss difference| <= 0.05 x max(1, first loss), i.e. 0.37
# nats for the bundled model. DeepSpeed's bf16 differs from the plain run by more than
# reduction order (bf16 weights in the forward pass, not fp32 weights under autocast), so it was
# measured rather than assumed: the default 120-step run on a 2-core CPU, ZeRO-3 and ZeRO-3 + CPU offload
# vs plain, differ by at most 0.085 at one step and 0.046 over any 10-step window (docs/distributed.md);
# ZeRO-2 likewise. No looser tolerance is needed. A run that trains differently fails it: a config with
# another optimizer (Adagrad, tests/test_train_deepspeed.py) is 0.6 nats off within 10 steps.
PARITY_STEP_TOL = 0.05
# Step-time cost of offload that is not believable for a working setup (ZeRO-3 offload typically costs
# 15-20% on MI300X): more than 3x the time of the same config without offload.
OFFLOAD_ABSURD_RATIO = 3.0
STEADY_FROM = 3  # the first steps pay for allocator growth, JIT kernels, optimizer-state creation


def parity_tolerance(plain_losses: list[float]) -> float:
    return PARITY_STEP_TOL * max(1.0, abs(plain_losses[0])) if plain_losses else float("nan")


def check_deepspeed_parity(ds_losses: list[float], plain_losses: list[float], label: str,
                           why_not: str | None = None) -> CheckResult:
    if why_not:
        return skipped(why_not, id="train.deepspeed_parity")
    if not plain_losses or len(ds_losses) < len(plain_losses):
        return skipped(f"the {label} run stopped after {len(ds_losses)} of {len(plain_losses)} steps",
                       id="train.deepspeed_parity")
    tol = parity_tolerance(plain_losses)
    diffs = [abs(a - b) if math.isfinite(a) and math.isfinite(b) else math.inf for a, b in zip(ds_losses, plain_losses)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    out = [i for i, d in enumerate(diffs) if d > tol]
    ds_w, plain_w = reference.window_means(ds_losses), reference.window_means(plain_losses)
    window = reference.WINDOW
    evidence = [f"steps {i * window}-{min((i + 1) * window, len(plain_losses)) - 1}: {label} {a:.3f} "
                f"plain {b:.3f} (window mean)" for i, (a, b) in enumerate(zip(ds_w, plain_w))]
    evidence.append(f"largest step difference {diffs[worst]:.4f} at step {worst} ({label} {ds_losses[worst]:.4f}, "
                    f"plain {plain_losses[worst]:.4f}); tolerance {tol:.3f} per step")
    data = {"max_step_diff": diffs[worst], "worst_step": worst, "tolerance": tol, "steps_out": out[:20],
            "max_window_diff": max(abs(a - b) for a, b in zip(ds_w, plain_w)), "label": label}
    if not out:
        return passed(f"{label} loss curve matches the plain run (largest step difference "
                      f"{diffs[worst]:.3f}, tolerance {tol:.3f})", evidence, **data, id="train.deepspeed_parity")
    return failed(f"{label} loss curve departs from the plain run at {len(out)} of "
                  f"{len(diffs)} steps (step {worst}: {ds_losses[worst]:.3f} vs {plain_losses[worst]:.3f}, "
                  f"tolerance {tol:.3f})",
                  fixes.step("rocmcheck smoke-train --deepspeed recipes/zero2.json", "first remove any \"optimizer\" "
                             "section from your config (the run then uses the plain run's AdamW); if ZeRO-2 matches "
                             "and this stage does not, report the DeepSpeed version with this evidence"),
                  evidence, **data, id="train.deepspeed_parity")


def steady_median(step_times: list[float]) -> float | None:
    steady = step_times[STEADY_FROM:] if len(step_times) > 2 * STEADY_FROM else step_times
    return statistics.median(steady) if steady else None


def check_offload_cost(offload_step_s: list[float], no_offload_step_s: list[float], label: str,
                       on_gpu: bool) -> CheckResult:
    with_off, without = steady_median(offload_step_s), steady_median(no_offload_step_s)
    if not with_off or not without:
        return skipped("a run stopped before its step times could be compared", id="train.offload_cost")
    ratio = with_off / without
    cost = (ratio - 1) * 100
    data = {"offload_step_s": with_off, "no_offload_step_s": without, "ratio": ratio, "cost_percent": cost,
            "label": label, "on_gpu": on_gpu}
    evidence = [f"median step {with_off * 1e3:.1f} ms with offload, {without * 1e3:.1f} ms with the same config "
                f"without offload ({len(offload_step_s)} and {len(no_offload_step_s)} steps, first {STEADY_FROM} "
                "left out)"]
    if not on_gpu:
        evidence.append("on CPU both live in host memory: this measures DeepSpeedCPUAdam and the offload bookkeeping, "
                        "not host-device transfers")
    summary = f"{label}: step time {cost:+.0f}% vs no offload ({with_off * 1e3:.1f} ms vs {without * 1e3:.1f} ms)"
    if ratio > OFFLOAD_ABSURD_RATIO:
        return warned(summary + f": more than {OFFLOAD_ABSURD_RATIO:g}x",
                      fixes.step("numactl --hardware", "the CPU side must not be starved: OMP_NUM_THREADS = cores per "
                                 "rank, and pin_memory true in offload_optimizer/offload_param"),
                      evidence, **data, id="train.offload_cost")
    return passed(summary, evidence, **data, id="train.offload_cost")


def check_rank_agreement(per_rank: list[dict[str, Any]], weights_checked: bool) -> CheckResult:
    """per_rank[i]: {"global_loss": [...], "local_loss": [...], "grad_norm": [...], "weights": float|None}."""
    n = len(per_rank)
    if n < 2:
        return skipped("one rank: nothing to compare", id="train.rank_agreement")
    steps = len(per_rank[0]["global_loss"])
    evidence: list[str] = []
    problems: list[str] = []
    if any(len(r["global_loss"]) != steps for r in per_rank):
        problems.append("ranks ran different numbers of steps: "
                        + ", ".join(str(len(r["global_loss"])) for r in per_rank))
        steps = min(len(r["global_loss"]) for r in per_rank)  # compare the steps all ranks ran
    disagree = [i for i in range(steps) if len({r["global_loss"][i] for r in per_rank}) > 1]
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
            problems.append("weights differ between ranks after training (sums "
                            + ", ".join(f"{s:.6f}" for s in sums) + ")")
        else:
            evidence.append(f"weights identical on all ranks after training (sum {sums[0]:.6f})")
    evidence.insert(0, f"{n} ranks x {steps} steps; global loss (all-reduced mean) compared exactly, gradient norm "
                       "to 1e-6")
    if steps:
        evidence.append("last step local losses: "
                        + ", ".join(f"rank {k} {r['local_loss'][-1]:.4f}" for k, r in enumerate(per_rank)))
    data = {"ranks": n, "steps": steps, "loss_disagree_steps": disagree[:20], "grad_norm_disagree_steps": norm_off[:20],
            "same_data": same_data, "weights_checked": weights_checked}
    if problems:
        return failed("; ".join(problems)[:400],
                      fixes.step("rocmcheck smoke-train --gpus 2 --device cpu", "if that agrees, the GPU collective "
                                 "library is at fault: NCCL_DEBUG=INFO shows it; on MI300X check iommu=pt "
                                 "(docs/distributed.md)"),
                      evidence + problems, **data, id="train.rank_agreement")
    return passed(f"all {n} ranks agree on the loss at every one of {steps} steps", evidence, **data,
                  id="train.rank_agreement")


def _close(values: list[float], rel: float = 1e-6) -> bool:
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) != len(values):
        return len(finite) == 0  # all NaN (e.g. no norm reported) counts as agreeing; a mix does not
    lo, hi = min(finite), max(finite)
    return hi - lo <= rel * max(abs(hi), 1e-12)


# --- smoke-train --bench ----------------------------------------------------------------------------------
TARGET_VS_TRAINER = 1.0
TARGET_COMPILE = 1.3


def loss_parity(check_id: str, name: str, baseline: str, losses: list[float], reference_losses: list[float],
                table: list[str]) -> CheckResult:
    """Same init, same data, same order: the curves may differ only by kernel and reduction-order noise."""
    diffs = [abs(a - b) for a, b in zip(losses, reference_losses)]
    worst = max(diffs) if diffs else float("nan")
    if diffs and worst <= parity_tolerance(reference_losses):
        return passed(f"{name} and {baseline} loss curves agree (max |diff| {worst:.3f})", table, max_diff=worst,
                      id=check_id)
    return failed(f"{name} and {baseline} loss curves differ (max |diff| {worst:.3f})",
                  fixes.note("the two runs did not train the same way: compare their settings in the JSON"), table,
                  max_diff=worst, id=check_id)


def bench_verdicts(rows: list[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> list[CheckResult]:
    by = {r["mode"]: r for r in rows}
    table = [f"{r['mode']:<13} " + (f"{r['tokens_per_s']:>10,.0f} tok/s  step {r['step_s'] * 1e3:7.1f} ms  "
             + (f"MFU {r['mfu']:.1%}" if r.get("mfu") is not None else "MFU n/a")
             + (f"  peak {r['peak_gib']:.1f} GiB" if r.get("peak_gib") else "") if "error" not in r else r["error"])
             for r in rows]
    results = []
    for r in (r for r in rows if "error" in r):
        results.append(failed(f"{r['mode']} failed: {r['error']}",
                              fixes.step("rocmcheck smoke-train --bench", "without --compile; then read train.kernels"),
                              table, id=f"train.bench_{r['mode']}"))
    ok = {name for name, r in by.items() if "error" not in r}
    if {"loop", "hf_trainer"} <= ok:
        ratio = by["loop"]["tokens_per_s"] / by["hf_trainer"]["tokens_per_s"]
        summary = f"loop {ratio:.2f}x HF Trainer tokens/s (target >= {TARGET_VS_TRAINER:.1f}x)"
        if ratio >= TARGET_VS_TRAINER:
            results.append(passed(summary, table, ratio=ratio, id="train.bench_vs_trainer"))
        else:
            results.append(warned(summary, fixes.step(None, "rerun once the GPU is idle; if it persists, compare "
                                                            "train.kernels of both runs"),
                                  table, ratio=ratio, id="train.bench_vs_trainer"))
        results.append(loss_parity("train.bench_loss_parity", "loop", "HF Trainer", runs["loop"]["losses"],
                                   runs["hf_trainer"]["losses"], table))
    if {"loop_compile", "loop"} <= ok:
        ratio = by["loop_compile"]["tokens_per_s"] / by["loop"]["tokens_per_s"]
        trainer = by.get("hf_trainer", {}).get("tokens_per_s")
        vs_trainer = by["loop_compile"]["tokens_per_s"] / trainer if trainer else None
        summary = (f"--compile {vs_trainer:.2f}x HF Trainer, {ratio:.2f}x the eager loop (target >= "
                   f"{TARGET_COMPILE:.1f}x Trainer)"
                   if vs_trainer else f"--compile {ratio:.2f}x the eager loop")
        good = vs_trainer is not None and vs_trainer >= TARGET_COMPILE
        results.append(passed(summary, table, ratio=ratio, vs_trainer=vs_trainer, id="train.bench_compile") if good else
                       warned(summary, fixes.step("rocmcheck doctor", "check the torch and triton versions"), table,
                              ratio=ratio, vs_trainer=vs_trainer, id="train.bench_compile"))
        results.append(loss_parity("train.bench_compile_loss_parity", "--compile", "the eager loop",
                                   runs["loop_compile"]["losses"], runs["loop"]["losses"], table))
    return results or [skipped("no benchmark mode ran", id="train.bench")]
