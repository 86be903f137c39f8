"""Verdicts of a smoke-train run: pure functions from measured numbers to CheckResults.

Kept apart from the loop so each decision can be tested on recorded numbers, and so the thresholds
and their reasons sit in one place.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from rocmcheck import fixes
from rocmcheck.monitor.step_memory import GiB, LeakDecision, MiB
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.train import reference

CKPT_FIX = fixes.step("rocmcheck smoke-train --gradient-checkpointing --micro-batch 1 --grad-accum 8",
                      "recompute activations and take one row at a time: the same global batch in less memory")
DEFAULTS_RUN = "rocmcheck smoke-train --lr 1e-3 --steps 120"
SEE_FINITE = fixes.step(None, "see train.finite's fix: a loss that is not finite cannot fall")


def _learning_fix(numerics_ok: bool | None, command: str | None, note: str) -> fixes.Fix:
    """What to do when a run does not learn, naming the likely cause from train.numerics: one pasteable line."""
    if numerics_ok is False:
        return fixes.step(None, "train.numerics failed: this device's bf16 kernels compute wrongly, which explains a "
                                "run that does not learn; fix that first (see its fix)")
    if numerics_ok:
        return fixes.step(command, "train.numerics passed, so this device computes the loss and gradients as fp32 "
                                   f"does: the training settings are the likely cause; {note}")
    return fixes.step("rocmcheck smoke-train --device cpu", "the same settings on the CPU (add this run's flags): if "
                      f"the CPU run learns, this device is at fault; else {note}")


def check_loss_decrease(losses: list[float], min_drop: float, numerics_ok: bool | None = None) -> CheckResult:
    """The last steps' mean loss must be at most (1 - min_drop) x the first step's loss."""
    if len(losses) < 10:
        return skipped(f"only {len(losses)} steps ran; need 10 to judge the loss curve", id="train.loss_decrease")
    first = losses[0]
    tail = losses[-max(3, len(losses) // 10):]
    last = statistics.fmean(tail)
    target = (1 - min_drop) * first
    data = {"first": first, "last_mean": last, "target": target, "min_drop": min_drop}
    evidence = [f"step 0 loss {first:.4f}; mean of last {len(tail)} steps {last:.4f}; needed <= {target:.4f}"]
    if not (math.isfinite(first) and math.isfinite(last)):
        return failed("loss is not finite, so it cannot fall", SEE_FINITE, evidence, **data, id="train.loss_decrease")
    if last <= target:
        return passed(f"loss fell {first:.3f} -> {last:.3f} ({1 - last / first:.0%} drop, needed {min_drop:.0%})",
                      evidence, **data, id="train.loss_decrease")
    return failed(f"loss fell only {first:.3f} -> {last:.3f} (needed a {min_drop:.0%} drop)",
                  _learning_fix(numerics_ok, DEFAULTS_RUN, "rerun with the defaults, which this threshold was set "
                                "for"), evidence, **data, id="train.loss_decrease")


def check_finite(losses: list[float], grad_norms: list[float], stopped_at: int | None) -> CheckResult:
    bad_loss = [i for i, v in enumerate(losses) if not math.isfinite(v)]
    bad_grad = [i for i, v in enumerate(grad_norms) if not math.isfinite(v)]
    data = {"nonfinite_loss_steps": bad_loss[:20], "nonfinite_grad_steps": bad_grad[:20]}
    if not bad_loss and not bad_grad:
        return passed(f"loss and gradient norm finite at all {len(losses)} steps", **data, id="train.finite")
    first = min(bad_loss[:1] + bad_grad[:1])
    what = " and ".join(w for w, b in (("loss", bad_loss), ("gradient norm", bad_grad)) if b)
    evidence = [f"first non-finite {what} at step {first}"]
    if first < len(losses):
        evidence.append(f"loss {losses[first]} grad-norm {grad_norms[first] if first < len(grad_norms) else 'n/a'}")
    if stopped_at is not None:
        evidence.append(f"run stopped at step {stopped_at}")
    return failed(f"{what} became NaN/inf at step {first}",
                  fixes.step("rocmcheck smoke-train --attn eager", "without --pure-bf16: if that stays finite, the "
                             "fused attention or bf16 kernels of this build are at fault; report the torch/ROCm "
                             "versions (rocmcheck doctor) with the evidence"), evidence, **data, id="train.finite")


def check_accuracy(before: float | None, after: float | None, threshold: float, n_prompts: int,
                   numerics_ok: bool | None = None) -> CheckResult:
    data = {"accuracy_before": before, "accuracy": after, "threshold": threshold, "prompts": n_prompts}
    if after is None:
        return skipped("no evaluation (the run stopped early)", **data, id="train.task_accuracy")
    ev = [f"exact match on {n_prompts} held-out prompts: before fine-tune {before:.0%}, after {after:.0%}"]
    if after >= threshold:
        learned = "" if before is None or after > before else " (the model could already do the task)"
        return passed(f"held-out exact match {after:.0%} (needed {threshold:.0%}){learned}", ev, **data,
                      id="train.task_accuracy")
    return failed(f"held-out exact match only {after:.0%} (needed {threshold:.0%})",
                  _learning_fix(numerics_ok, DEFAULTS_RUN, "rerun with the defaults: the threshold is set for "
                                "them"), ev, **data, id="train.task_accuracy")


def check_reload(max_abs_diff: float | None, noise: float = 0.0, weights_equal: bool = True,
                 error: str | None = None, bound_label: str = "this device's run-to-run noise") -> CheckResult:
    """Reloaded weights must be bit-identical, and its logits no further from the trained model's than
    two forwards of the trained model are from each other (0 where kernels are deterministic)."""
    if error:
        return failed(f"save -> reload failed: {error}",
                      fixes.step("df -h .", "free disk space; the --out folder must also be writable"), [error],
                      id="train.reload")
    data = {"max_abs_diff": max_abs_diff, "forward_noise": noise, "weights_equal": weights_equal}
    if weights_equal and max_abs_diff is not None and max_abs_diff <= noise:
        how = "identical logits" if max_abs_diff == 0 else f"logits within {bound_label} ({noise:.2g})"
        return passed(f"save -> reload gives {how}", **data, id="train.reload")
    what = "weights changed on the way through the checkpoint" if not weights_equal else \
        f"reloaded model's logits differ (max |diff| {max_abs_diff:.3g}, allowed: {bound_label} {noise:.2g})"
    return failed(what, fixes.step("pip install -U safetensors transformers", "a saved checkpoint does not "
                                   "reproduce the trained model: newer savers and loaders"),
                  [f"max |logit diff| = {max_abs_diff}; forward noise = {noise}; weights equal: {weights_equal}"],
                  **data, id="train.reload")


def check_reference_curve(losses: list[float], curve: dict[str, Any] | None, why_not: str, kind: str) -> CheckResult:
    if curve is None:
        return skipped(f"no reference to compare with: {why_not}", kind=kind, id="train.reference_curve")
    ref = curve["loss"]
    if len(losses) < len(ref):
        return skipped(f"run stopped after {len(losses)} of {len(ref)} steps", kind=kind, id="train.reference_curve")
    cmp = reference.compare(losses, ref)
    rec = curve.get("recorded_on", {})
    evidence = [f"reference: {rec.get('device', '?')}, torch {rec.get('torch', '?')}"]
    evidence += [f"steps {w['steps']}: run {w['run']:.3f} ref {w['reference']:.3f} (|diff| <= {w['tolerance']:.3f}: "
                 f"{'ok' if w['ok'] else 'OUT'})" for w in cmp["windows"]]
    data = {"kind": kind, "windows": cmp["windows"]}
    if cmp["ok"]:
        return passed(f"loss curve matches the {kind} reference within tolerance", evidence, **data,
                      id="train.reference_curve")
    w = cmp["worst"]
    return failed(f"loss curve departs from the {kind} reference at steps {w['steps']} "
                  f"({w['run']:.3f} vs {w['reference']:.3f})",
                  fixes.step("rocmcheck smoke-train --attn eager; rocmcheck smoke-train --device cpu", "the first run "
                             "that matches points at the faulty kernel (fused attention, bf16 GEMM)"), evidence, **data,
                  id="train.reference_curve")


def check_memory_leak(decision: LeakDecision, kind: str, baselines: list[int]) -> CheckResult:
    shown = ", ".join(f"{b / MiB:.0f}" for b in baselines[:12]) + (" ..." if len(baselines) > 12 else "")
    evidence = [f"post-step baseline ({kind}, MiB): {shown}", decision.reason]
    data = {"kind": kind, "growth_bytes": decision.growth_bytes, "per_step_bytes": decision.per_step_bytes,
            "tolerance_bytes": decision.tolerance_bytes, "rising_fraction": decision.rising_fraction}
    if not decision.judged:  # fewer steps than the one leak rule needs (monitor/staircase.py)
        return skipped(decision.reason, evidence, **data, id="train.memory_leak")
    if not decision.leaking:
        return passed(f"memory after each step is flat ({decision.growth_bytes / MiB:+.1f} MiB over "
                      f"{decision.steps_judged} steps)", evidence, **data, id="train.memory_leak")
    return failed(f"memory after each step keeps rising: {decision.per_step_bytes / MiB:.1f} MiB/step "
                  f"({decision.growth_bytes / MiB:.0f} MiB over {decision.steps_judged} steps)",
                  fixes.step(None, "something keeps tensors (and their graphs) alive between steps: log loss.item(), "
                             "never the loss tensor; run evaluation under torch.no_grad(); do not keep model outputs "
                             "in lists"), evidence, **data, id="train.memory_leak")


def check_memory_headroom(peak_bytes: int, total_bytes: int | None, kind: str, estimate: dict[str, Any] | None = None,
                          gap_ratio: float = 0.25, gap_floor_bytes: int = 512 * MiB) -> CheckResult:
    """The run's peak against the device, and (on a GPU) against the planner's estimate of the same run:
    estimate {"allocated_peak_bytes": ..., "phase": ...} from rocmcheck/plan (train/fit.py)."""
    data: dict[str, Any] = {"peak_bytes": peak_bytes, "total_bytes": total_bytes, "kind": kind}
    evidence: list[str] = []
    gap_finding = None
    if estimate:
        planned = estimate["allocated_peak_bytes"]
        data["estimate_bytes"] = planned
        if kind == "gpu-allocator":
            gap = peak_bytes - planned
            data["estimate_gap"] = gap / planned if planned else None
            evidence.append(f"measured peak {peak_bytes / GiB:.2f} GiB vs rocmcheck plan's {planned / GiB:.2f} GiB for "
                            f"these settings ({gap / GiB:+.2f} GiB); a gap over {gap_ratio:.0%} and "
                            f"{gap_floor_bytes / MiB:.0f} MiB is a finding")
            if abs(gap) > max(gap_ratio * planned, gap_floor_bytes):
                gap_finding = (("above" if gap > 0 else "below") + f" rocmcheck plan's estimate ({planned / GiB:.2f} "
                               f"GiB) by {abs(gap) / GiB:.2f} GiB")
        else:
            evidence.append(f"rocmcheck plan estimates {planned / GiB:.2f} GiB for the step; not compared with the "
                            f"CPU's resident memory, which also holds the interpreter, libraries and data")
    summary = f"peak memory {peak_bytes / GiB:.2f} GiB"
    if total_bytes:
        summary += f" of {total_bytes / GiB:.0f} GiB ({peak_bytes / total_bytes:.0%})"
    if total_bytes and peak_bytes / total_bytes > 0.9:
        return warned(summary + ": a longer batch will run out of memory", CKPT_FIX, evidence, **data,
                      id="train.memory")
    if gap_finding:
        fix = (fixes.step("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True rocmcheck smoke-train",
                          "above the estimate: with this run's flags; a lower peak means fragmentation; check "
                          "train.memory_leak too; if neither explains it, report the settings and both numbers (a "
                          "planner gap)")
               if peak_bytes > estimate["allocated_peak_bytes"] else
               fixes.step(None, "below the estimate: the planner counts more than this stack keeps; report the "
                                "settings and both numbers"))
        return warned(f"{summary}, {gap_finding}", fix, evidence, **data, id="train.memory")
    return passed(summary, evidence, **data, id="train.memory")


# Below this many parameters a GPU step is bound by kernel launches and the optimizer's small tensors,
# not by matmul throughput (the bundled 0.8M-parameter model: 32 ms a step on an H200, MFU 0.0%), so an
# MFU says nothing about the stack there. 100M: GPT-2 small scale, where a step's matmuls take milliseconds.
MFU_MIN_PARAMS = 100_000_000


def check_throughput(step_times: list[float], tokens_per_step: int, flops_per_token: float, peak_tflops: float | None,
                     peak_source: str | None, on_gpu: bool, params: int | None = None,
                     recompute_flops_per_token: float = 0.0) -> CheckResult:
    """Tokens/s and step time; MFU (model FLOPs: checkpointing's recomputation not counted, as in PaLM's
    definition) against the datasheet bf16 peak, only for models large enough that it means something.
    recompute_flops_per_token: what checkpointing adds, shown as the hardware utilisation beside it."""
    steady = step_times[3:] if len(step_times) > 6 else step_times
    if not steady:
        return skipped("no steps timed", id="train.throughput")
    median = statistics.median(steady)
    p90 = sorted(steady)[int(0.9 * (len(steady) - 1))]
    tok_s = tokens_per_step / median
    meaningful = params is None or params >= MFU_MIN_PARAMS
    mfu = flops_per_token * tok_s / (peak_tflops * 1e12) if peak_tflops and meaningful else None
    hfu = (flops_per_token + recompute_flops_per_token) * tok_s / (peak_tflops * 1e12) \
        if mfu is not None and recompute_flops_per_token else None
    data = {"tokens_per_s": tok_s, "step_s_median": median, "step_s_p90": p90, "mfu": mfu, "hfu": hfu,
            "peak_bf16_tflops": peak_tflops, "peak_source": peak_source, "flops_per_token": flops_per_token}
    if mfu is not None:
        mfu_text = f", MFU {mfu:.1%} of {peak_tflops:g} TFLOP/s ({peak_source})"
        if hfu is not None:
            mfu_text += f" ({hfu:.1%} counting checkpointing's recomputation)"
    elif not on_gpu:
        mfu_text = ", MFU n/a on CPU"
    elif not meaningful:
        mfu_text = f", MFU not shown: {params / 1e6:.1f}M parameters cannot keep a GPU busy"
    else:
        mfu_text = ", MFU n/a (no datasheet bf16 peak for this device)"
    summary = f"{tok_s:,.0f} tokens/s, step {median * 1e3:.1f} ms median{mfu_text}"
    evidence = [f"{len(steady)} steady steps; median {median * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms; "
                f"{tokens_per_step} tokens/step"]
    # Stalls: a GPU step should take the same time every step; 3x spread means syncs, recompiles or
    # allocator thrash. CPU timing shares cores with everything else, so only gross stalls count.
    stall_ratio = 3.0 if on_gpu else 6.0
    if p90 > stall_ratio * median:
        return warned(summary + f"; unsteady steps (p90 {p90 / median:.1f}x median)",
                      fixes.step(None, "look for other processes on this device (amd-smi process, or nvidia-smi), "
                                       "then rerun"), evidence, **data, id="train.throughput")
    return passed(summary, evidence, **data, id="train.throughput")


# --- what the run proves about the stack, for any model -------------------------------------------------
# bf16 against fp32, the same batch and weights (train/numerics.py). Measured on this repository's CPU
# (oneDNN bf16 GEMMs with fp32 accumulation, as on GPUs), 4-16 rows of the run's data, the bundled model
# (pretrained) and random-init LLaMA shapes from 48 to 512 wide, 2-8 layers, autocast and pure bf16:
#   healthy:  loss differs by <= 1.1e-3 (relative), a block's gradient norm by <= 7%;
#   attention that drops its 1/sqrt(head_dim) scale in bf16 only (the planted fault of
#   tests/test_train_numerics.py), bundled model: loss 2.5-4.7e-2, a block's gradient norm 42-76%.
# The tolerances sit ~9x and ~3x above the healthy worst and below the fault. (A random-init model's
# attention is nearly uniform, so it barely depends on that scale: a fault there shows only in a model
# that has learned to attend, which is why the bundled model is the test.)
NUMERICS_LOSS_REL_TOL = 1e-2
NUMERICS_BLOCK_REL_TOL = 0.2
# Blocks whose fp32 gradient norm is below this share of the whole gradient norm are not compared
# (a LoRA A matrix has no gradient at step 0, its B being zero; tiny norms are all rounding).
NUMERICS_BLOCK_FLOOR = 0.01


def check_numerics(m: dict[str, Any] | None, on_gpu: bool) -> CheckResult:
    """m: train/numerics.measure's result."""
    if not m:
        return skipped("no numerics measurement (the run stopped before it)", id="train.numerics")
    if "skipped" in m:
        return skipped(f"no fp32 reference: {m['skipped']}", id="train.numerics")
    low, ref = m["bf16"], m["fp32"]
    loss_rel = abs(low["loss"] - ref["loss"]) / max(abs(ref["loss"]), 1e-12)
    floor = NUMERICS_BLOCK_FLOOR * ref["grad_norm"]
    blocks = {}
    for name, r in ref["blocks"].items():
        if r > floor and math.isfinite(r):
            lo = low["blocks"].get(name, float("nan"))
            blocks[name] = abs(lo - r) / r if math.isfinite(lo) else math.inf
    worst = max(blocks, key=blocks.__getitem__) if blocks else None
    worst_rel = blocks[worst] if worst else 0.0
    finite = math.isfinite(low["loss"]) and math.isfinite(low["grad_norm"])
    data = {"loss_bf16": low["loss"], "loss_fp32": ref["loss"], "loss_rel_diff": loss_rel,
            "grad_norm_bf16": low["grad_norm"], "grad_norm_fp32": ref["grad_norm"], "worst_block": worst,
            "worst_block_rel_diff": worst_rel, "blocks_compared": len(blocks),
            "reference_device": m.get("reference_device"), "precision": m.get("precision"),
            "loss_tolerance": NUMERICS_LOSS_REL_TOL, "block_tolerance": NUMERICS_BLOCK_REL_TOL}
    evidence = [f"{m.get('precision', 'bf16')} vs fp32 ({m.get('reference_device')}), the same {m.get('rows', '?')} "
                f"rows ({m.get('tokens', '?')} tokens) and weights, forward and backward",
                f"loss {low['loss']:.5f} vs {ref['loss']:.5f} (relative {loss_rel:.1e}, tolerance "
                f"{NUMERICS_LOSS_REL_TOL:g})",
                f"gradient norm {low['grad_norm']:.4g} vs {ref['grad_norm']:.4g}; largest block difference "
                f"{worst_rel:.1%} ({worst or 'none'}) over {len(blocks)} blocks (tolerance "
                f"{NUMERICS_BLOCK_REL_TOL:.0%})"]
    bad = []
    if not finite:
        bad.append("the bf16 pass gave a non-finite loss or gradient")
    if loss_rel > NUMERICS_LOSS_REL_TOL:
        bad.append(f"bf16 loss differs from fp32 by {loss_rel:.1e} (relative)")
    if worst_rel > NUMERICS_BLOCK_REL_TOL:
        bad.append(f"{worst}'s bf16 gradient norm differs from fp32 by {worst_rel:.0%}")
    if bad:
        return failed(("GPU" if on_gpu else "bf16") + " numerics are suspect: " + "; ".join(bad),
                      fixes.step("rocmcheck smoke-train --attn eager", "if that passes, the fused attention kernel "
                                 "of this build computes wrongly in bf16; otherwise the bf16 GEMMs do; report the "
                                 "torch/ROCm or CUDA versions (rocmcheck doctor) with this evidence"), evidence, **data,
                      id="train.numerics")
    return passed(f"bf16 matches fp32 on the same batch: loss within {loss_rel:.1e}, block gradient norms within "
                  f"{worst_rel:.1%}", evidence, **data, id="train.numerics")


# Overfitting one fixed batch (a model that is not the bundled one trains on its first batch, repeated).
# Measured on this repository's CPU, 30 steps at the default lr (config.default_lr), loss of the last 3
# steps against step 0: the bundled (pretrained) model 97% down (7.34 -> 0.24); random-init LLaMAs 96 wide
# x 3 layers 46%, 48 wide x 2 layers 29% (the smallest shape anyone brings; larger ones and real 32k+
# vocabularies fall faster: their first loss, ln(vocab), is far above what the batch's tokens need); at a
# tenth of that lr the bundled model still fell 41%. A run that does not learn (no gradient reaching the
# weights, lr 0) stays within a few % of its first loss. 20% sits below every healthy run and far above that.
LEARNS_MIN_DROP = 0.2
# LoRA trains rank-r adapters over a frozen base, so a small random-init base cannot be overfitted far: a 96 wide x
# 3 layers LLaMA with rank-8 adapters fell 10.5% in 30 steps (4.650 -> 4.159; 12% even at lr 1e-2), while the 7B
# shape with rank 16 on an H200 fell 100% (benchmarks/RESULTS.md section 12). The batch is fixed and there is no
# dropout, so a run whose adapters get no gradient keeps exactly its first loss: 5% is below every healthy run.
LORA_LEARNS_MIN_DROP = 0.05


def check_learns(losses: list[float], numerics_ok: bool | None, min_drop: float = LEARNS_MIN_DROP) -> CheckResult:
    """The run trains on one fixed batch; the mean loss of the last steps must fall below (1 - min_drop) x the first."""
    if len(losses) < 10:
        return skipped(f"only {len(losses)} steps ran; need 10 to judge", id="train.learns")
    first = losses[0]
    tail = losses[-3:]
    last = statistics.fmean(tail)
    target = (1 - min_drop) * first
    data = {"first": first, "last_mean": last, "target": target, "min_drop": min_drop, "steps": len(losses)}
    evidence = [f"one fixed batch, {len(losses)} steps: step 0 loss {first:.4f}; mean of the last 3 steps {last:.4f}; "
                f"needed <= {target:.4f}"]
    if not (math.isfinite(first) and math.isfinite(last)):
        return failed("loss is not finite, so it cannot fall", SEE_FINITE, evidence, **data, id="train.learns")
    if last <= target:
        return passed(f"overfits one batch: loss {first:.3f} -> {last:.3f} ({1 - last / first:.0%} drop, needed "
                      f"{min_drop:.0%})", evidence, **data, id="train.learns")
    return failed(f"does not overfit one batch: loss {first:.3f} -> {last:.3f} (needed a {min_drop:.0%} drop)",
                  _learning_fix(numerics_ok, None, "a learning rate too low or too high for this model: rerun with "
                                "--lr 10x higher and 10x lower, and with more --steps"), evidence, **data,
                  id="train.learns")


def oom_result(step: int, error_type: str, first_line: str, peak_bytes: int, total_bytes: int | None, kind: str,
               settings: str) -> CheckResult:
    evidence = [f"{error_type} at step {step}: {first_line}",
                f"peak memory {peak_bytes / GiB:.2f} GiB" + (f" of {total_bytes / GiB:.0f} GiB" if total_bytes else "")
                + f" ({kind})",
                f"settings: {settings}"]
    return failed(f"out of memory at step {step} (peak {peak_bytes / GiB:.2f} GiB)", CKPT_FIX, evidence,
                  step=step, peak_bytes=peak_bytes, total_bytes=total_bytes, error=first_line, id="train.oom")


def stopped_results(reason: str, ids: tuple[str, ...] | list[str]) -> list[CheckResult]:
    return [skipped(f"not judged: {reason}", id=i) for i in ids]


def check_memory_snapshot(report: dict | None, survivors: bool, held: bool) -> CheckResult:
    """smoke-train --memory-snapshot: the leak finder watched two steps of the loop. A tensor born in one step
    and kept by a Python object (a list, a dict) fails; allocations that survive without a Python holder warn
    (they may be a cache); none passes. report: the leak finder's own verdict (monitor.leak), as a dict."""
    if report is None:
        return skipped("the run ended before the leak finder could watch two steps", id="train.memory_snapshot")
    data = dict(report.get("data") or {})
    evidence = list(report.get("evidence") or [])
    if held:
        return failed(report["summary"], fixes.Fix.from_dict(report.get("fix"))
                      or fixes.step(None, "keep .item() of what you store"),
                      evidence, **data, id="train.memory_snapshot")
    if survivors:
        return warned(report["summary"], fixes.step(None, "look at the allocation sites in the evidence: something "
                                                          "keeps what they allocate from one step to the next"),
                      evidence, **data, id="train.memory_snapshot")
    where = f"; allocator snapshot {data['snapshot']}" if data.get("snapshot") else ""
    return passed(f"nothing born in one watched step survived the next{where}", evidence, **data,
                  id="train.memory_snapshot")
