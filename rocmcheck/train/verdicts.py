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
                 error: str | None = None, bound_label: str = "this device's run-to-run noise", *,
                 files: dict[str, Any] | None = None, not_loaded: list[str] | None = None) -> CheckResult:
    """Reloaded weights must be bit-identical, and its logits no further from the trained model's than
    two forwards of the trained model are from each other (0 where kernels are deterministic).

    not_loaded: names of tensors the model held (and saved) that the reload did not give back (a LoRA adapter's
    tensors a loader dropped).

    files: the checkpoint was read back from its files instead of being built again (saved_weights.py: its
    FilesComparison.to_dict(): tensors, bytes, config_equal, config_differences, first_difference); the logits
    are then compared only where another model than the trained one was saved (max_abs_diff None otherwise):
    the same config with the same weights computes the same logits."""
    if error:
        return failed(f"save -> reload failed: {error}",
                      fixes.step("df -h .", "free disk space; the --out folder must also be writable"), [error],
                      id="train.reload")
    data: dict[str, Any] = {"max_abs_diff": max_abs_diff, "forward_noise": noise, "weights_equal": weights_equal,
                            "method": "files" if files is not None else "from_pretrained"}
    config_equal = True
    if files is not None:
        data["files"] = files
        config_equal = bool(files.get("config_equal", False))
    logits_ok = max_abs_diff is not None and max_abs_diff <= noise
    if files is not None and max_abs_diff is None:
        logits_ok = True  # nothing else to compare: the trained model itself was saved
    if weights_equal and config_equal and logits_ok:
        if files is not None:
            how = (f"bit-identical weights ({files.get('tensors', 0)} tensors, {files.get('bytes', 0) / GiB:.2f} GiB "
                   "read back from the files) and the same config")
            if max_abs_diff is not None:
                how += ", logits " + ("identical" if max_abs_diff == 0 else f"within {bound_label} ({noise:.2g})")
        else:
            how = "identical logits" if max_abs_diff == 0 else f"logits within {bound_label} ({noise:.2g})"
        return passed(f"save -> reload gives {how}", **data, id="train.reload")
    if not_loaded:
        data["not_loaded"] = list(not_loaded)
        what = (f"{len(not_loaded)} saved tensor(s) did not load back (first: {not_loaded[0]}): the loader dropped "
                "them on the way through the checkpoint")
    elif not weights_equal:
        where = f" (first: {files['first_difference']})" if files and files.get("first_difference") else ""
        what = f"weights changed on the way through the checkpoint{where}"
    elif not config_equal:
        shown = "; ".join((files or {}).get("config_differences", [])[:3])
        what = f"the saved config.json differs from the trained model's ({shown})"
    else:
        what = f"reloaded model's logits differ (max |diff| {max_abs_diff:.3g}, allowed: {bound_label} {noise:.2g})"
    evidence = [f"max |logit diff| = {max_abs_diff}; forward noise = {noise}; weights equal: {weights_equal}"]
    if files is not None:
        evidence.append(f"read back from the files: {files.get('tensors', 0)} tensors; config equal: {config_equal}"
                        + "".join(f"; {d}" for d in files.get("config_differences", [])[:10]))
    if not_loaded:
        fix = fixes.step("python -m pip list | grep -i -E '^(peft|transformers) '", "the installed peft and "
                         "transformers drop these tensors when a saved adapter is loaded back: an adapter saved "
                         "with this stack does not load whole; try the peft release before or after this one")
    else:
        fix = fixes.step("pip install -U safetensors transformers", "a saved checkpoint does not reproduce the "
                         "trained model: newer savers and loaders")
    return failed(what, fix, evidence, **data, id="train.reload")


def check_reference_curve(losses: list[float], curve: dict[str, Any] | None, why_not: str, kind: str) -> CheckResult:
    """The run's loss curve against the reference curve found for its device kind (reference.find_reference); the
    verdict names the curve it compared against (a rocm run is judged against the cuda curve)."""
    if curve is None:
        return skipped(f"no reference to compare with: {why_not}", kind=kind, id="train.reference_curve")
    ref = curve["loss"]
    if len(losses) < len(ref):
        return skipped(f"run stopped after {len(losses)} of {len(ref)} steps", kind=kind, id="train.reference_curve")
    cmp = reference.compare(losses, ref)
    rec = curve.get("recorded_on", {})
    against = str(curve.get("kind") or kind)
    name = f"{against} reference ({rec.get('device', '?')})"
    evidence = [f"reference: the {against} curve, recorded on {rec.get('device', '?')}, torch {rec.get('torch', '?')}"]
    if against != kind:
        evidence.append(f"a {kind} run has no curve of its own: judged against the {against} curve (the same bundled "
                        "model, bf16 settings and seed), within the same tolerance")
    evidence += [f"steps {w['steps']}: run {w['run']:.3f} ref {w['reference']:.3f} (|diff| <= {w['tolerance']:.3f}: "
                 f"{'ok' if w['ok'] else 'OUT'})" for w in cmp["windows"]]
    data = {"kind": kind, "reference_kind": against, "windows": cmp["windows"]}
    if cmp["ok"]:
        return passed(f"loss curve matches the {name} within tolerance", evidence, **data,
                      id="train.reference_curve")
    w = cmp["worst"]
    return failed(f"loss curve departs from the {name} at steps {w['steps']} "
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
                     recompute_flops_per_token: float = 0.0, ranks: int = 1) -> CheckResult:
    """Tokens/s and step time; MFU (model FLOPs: checkpointing's recomputation not counted, as in PaLM's
    definition) against the datasheet bf16 peak, only for models large enough that it means something.
    recompute_flops_per_token: what checkpointing adds, shown as the hardware utilisation beside it.
    With several ranks, tokens_per_step and peak_tflops are the sums over them, and the summary says so."""
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
    data = {"tokens_per_s": tok_s, "ranks": ranks, "step_s_median": median, "step_s_p90": p90, "mfu": mfu, "hfu": hfu,
            "peak_bf16_tflops": peak_tflops, "peak_source": peak_source, "flops_per_token": flops_per_token}
    if mfu is not None:
        shared = f"{ranks} x {peak_tflops / ranks:g} = " if ranks > 1 else ""
        mfu_text = f", MFU {mfu:.1%} of {shared}{peak_tflops:g} TFLOP/s ({peak_source})"
        if hfu is not None:
            mfu_text += f" ({hfu:.1%} counting checkpointing's recomputation)"
    elif not on_gpu:
        mfu_text = ", MFU n/a on CPU"
    elif not meaningful:
        mfu_text = f", MFU not shown: {params / 1e6:.1f}M parameters cannot keep a GPU busy"
    else:
        mfu_text = ", MFU n/a (no datasheet bf16 peak for this device)"
    over = f" over {ranks} ranks ({tok_s / ranks:,.0f} per rank)" if ranks > 1 else ""
    summary = f"{tok_s:,.0f} tokens/s{over}, step {median * 1e3:.1f} ms median{mfu_text}"
    evidence = [f"{len(steady)} steady steps; median {median * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms; "
                f"{tokens_per_step} tokens/step"]
    # Stalls: a GPU step should take the same time every step; 3x spread means syncs, recompiles or
    # allocator thrash. CPU timing shares cores with everything else, so only gross stalls count.
    stall_ratio = 3.0 if on_gpu else 6.0
    if p90 > stall_ratio * median:
        return warned(summary + f"; unsteady steps (p90 {p90 / median:.1f}x median)",
                      fixes.step(None, "look for other processes on this device (amd-smi process, or nvidia-smi), "
                                       "then rerun" if on_gpu else
                                       "look for other processes taking this machine's CPU time (top), then rerun"),
                      evidence, **data, id="train.throughput")
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


# --- train.drift: the bf16 run against an fp32 run of the same steps (smoke-train --drift, train/drift.py) -----
# Both runs start from the same weights and read the same batches in the same order under the same lr schedule,
# so bf16 rounding is all that parts them: it moves the loss a little, and the gap grows slowly with the steps.
# Measured on this repository's 2-core CPU (oneDNN bf16 GEMMs with fp32 accumulation), per window of 10 steps: d =
# bf16's mean loss minus fp32's (the nearest within DRIFT_LOSS_SHIFT_STEPS), m = fp32's mean loss, and the ratio of
# the two median gradient norms (56 healthy runs, the curves of most in tests/fixtures/drift/curves.json):
#   healthy: the bundled model, 120 steps, seeds 0-9 (and 40 steps, gradient checkpointing, eager attention,
#     --grad-accum 2): |d| <= 0.028, at most 23% of the tolerance below (bf16 ends about 0.015 under fp32's 0.13);
#     --pure-bf16, seeds 0-2: 28%; --lora-rank 4, 8, 32 (seeds 0-7 of rank 8; the frozen base is fp32 rounded to
#     bf16, so these part first): |d| <= 0.055, 60% at most; random-init LLaMAs 48-256 wide, 30 and 120 steps on
#     their one batch (also LoRA and pure bf16), seeds 0-2: 44% at most. Gradient-norm ratios 0.52-1.65, 1.94x
#     apart at most either way (one step's alone 0.19-7.5: the windows' medians are compared, never single steps).
#   planted faults (tests/test_train_drift.py), bundled model: every gradient x1000 in the backward pass: ratio
#     820-1150 with the loss unchanged (clipping and Adam hide a gradient's scale; only its norm shows it); x10:
#     9.2-10; the weights corrupted at step 60: the next step's loss 6-24x its previous steps', then 0.1-1.6 above
#     fp32 to the end (10-44x the tolerance); noise on the final norm growing with the step (0.02 x step, 120
#     steps): out of the tolerance from step 80, 2.1x it at most; 0.05-0.065 x step over 40 steps: 1.35-2.45x;
#     0.08-0.1 x step: 3.7-5.7x.
DRIFT_WINDOW = reference.WINDOW
# d is taken against the nearest of fp32's window means over the same steps or up to 2 steps earlier or later: on
# the steep part of a curve a run a step behind differs by much while it learns at the same rate (a random-init
# LLaMA overfitting its batch, 3.2 -> 0.1 in 30 steps: d 0.128 at m 0.56 over the same steps, 0.039 within 2).
DRIFT_LOSS_SHIFT_STEPS = 2
# A window's |d| may be up to 0.05 + 15% of m: the healthy worst uses 60% of it (LoRA), the bundled model's full
# fine-tune 23%; the growing noise leaves it at 1.35-2.45x, the corrupted weights at 10-44x.
DRIFT_LOSS_ABS_TOL = 0.05
DRIFT_LOSS_REL_TOL = 0.15
# Beyond 3x the tolerance the curves have parted for good (diverged: fail); within it, drifting (warn).
DRIFT_LOSS_FAIL_FACTOR = 3.0
# Median gradient norms apart by 3x (either way) warn, by 8x fail: 1.5x and 4x the healthy worst (1.94x); a
# kernel whose gradients are wrong by orders of magnitude (bf16 norms in the thousands against fp32's single
# digits) is far beyond either.
DRIFT_NORM_WARN_FACTOR = 3.0
DRIFT_NORM_FAIL_FACTOR = 8.0
# Norms are compared only in windows where fp32's mean loss is at least this (nats per token; e^-0.1: 90% on every
# target token). Below it the model has all but memorized its batch (a --model run trains on one fixed batch), the
# gradient is the noise of what is left, and Adam on so small a gradient takes unsteady steps in fp32 and bf16
# alike: a random-init 256-wide LLaMA, 120 steps, fell to 0.003 with window norms 86x apart (fp32 0.005-17, bf16
# smoothly to 0.01); every window of any healthy run more than 3x apart had a loss under 0.05, and none at 0.066
# or more was 2.5x apart. The bundled model's windows stay at 0.13 and above (its data is new every step), so all
# of them are compared.
DRIFT_NORM_MIN_LOSS = 0.1
# A spike: a bf16 step's loss at least 2x the median of its previous 5 steps' while fp32's at that step is not (a
# hard batch lifts both), and above fp32's by more than the fail factor x the tolerance. Healthy runs: at most
# 1.33x, at the same step in both runs, above a loss of 0.1; below it a memorized batch's loss jumps 2.3x (0.07 ->
# 0.17, fp32 0.06: 0.11 above, under the 0.18 needed). It came back when the next 10 steps' mean is again within
# the tolerance of fp32's.
DRIFT_SPIKE_RATIO = 2.0
DRIFT_SPIKE_LOOKBACK = 5
DRIFT_SPIKE_RECOVERY_STEPS = 10
DRIFT_EVIDENCE_WINDOWS = 12  # windows shown in the evidence: evenly spaced, and each window where a finding starts


def drift_tolerance(fp32_mean: float) -> float:
    """How far a window's mean bf16 loss may lie from fp32's."""
    return DRIFT_LOSS_ABS_TOL + DRIFT_LOSS_REL_TOL * abs(fp32_mean)


def _ratio(low: float, high: float) -> float:
    if high > 0:
        return low / high
    return 1.0 if low == 0 else math.inf


def _factor(ratio: float) -> float:
    """How many times apart, either way: x0.1 and x10 are both 10."""
    return math.inf if ratio <= 0 else max(ratio, 1 / ratio)


def drift_windows(low: dict[str, list[float]], ref: dict[str, list[float]],
                  window: int = DRIFT_WINDOW) -> list[dict[str, Any]]:
    """Per window of steps: bf16's mean loss, fp32's over the same steps, fp32's it is compared with (the nearest
    of its windows shifted by up to DRIFT_LOSS_SHIFT_STEPS, the least shift among equals: `fp32_first`-`fp32_last`),
    the difference and its tolerance; both median gradient norms and whether they are compared."""
    n = min(len(low["loss"]), len(ref["loss"]))
    shifts = sorted(range(-DRIFT_LOSS_SHIFT_STEPS, DRIFT_LOSS_SHIFT_STEPS + 1), key=abs)
    rows = []
    for a in range(0, n, window):
        z = min(a + window, n)
        lb, lf = statistics.fmean(low["loss"][a:z]), statistics.fmean(ref["loss"][a:z])
        spans = [(max(0, a + s), min(n, z + s)) for s in shifts if max(0, a + s) < min(n, z + s)]
        f0, f1 = min(spans, key=lambda span: abs(lb - statistics.fmean(ref["loss"][span[0]:span[1]])))
        compared = statistics.fmean(ref["loss"][f0:f1])
        gb, gf = statistics.median(low["grad_norm"][a:z]), statistics.median(ref["grad_norm"][a:z])
        rows.append({"first": a, "last": z - 1, "loss_bf16": lb, "loss_fp32": lf, "loss_fp32_compared": compared,
                     "fp32_first": f0, "fp32_last": f1 - 1, "diff": lb - compared, "tolerance": drift_tolerance(lf),
                     "norm_bf16": gb, "norm_fp32": gf, "norm_ratio": _ratio(gb, gf),
                     "norms_compared": lf >= DRIFT_NORM_MIN_LOSS})
    return rows


def _compared_with(r: dict[str, Any]) -> str:
    """fp32's loss a window was compared with: "0.5984", or "0.5984 at fp32's steps 22-31" when shifted."""
    if (r["fp32_first"], r["fp32_last"]) == (r["first"], r["last"]):
        return f"{r['loss_fp32_compared']:.4f}"
    return f"{r['loss_fp32_compared']:.4f} at fp32's steps {r['fp32_first']}-{r['fp32_last']}"


def find_spike(low: list[float], ref: list[float]) -> dict[str, Any] | None:
    """The first bf16 loss spike that fp32 does not share (see DRIFT_SPIKE_RATIO), and whether it came back
    (None: it is the last step, so that is not known)."""
    n = min(len(low), len(ref))
    for i in range(1, n):
        before = statistics.median(low[max(0, i - DRIFT_SPIKE_LOOKBACK):i])
        ref_before = statistics.median(ref[max(0, i - DRIFT_SPIKE_LOOKBACK):i])
        if not (before > 0 and low[i] >= DRIFT_SPIKE_RATIO * before):
            continue
        if ref_before > 0 and ref[i] >= DRIFT_SPIKE_RATIO * ref_before:
            continue  # fp32 jumps at the same step: the batch, not bf16
        if low[i] - ref[i] <= DRIFT_LOSS_FAIL_FACTOR * drift_tolerance(ref[i]):
            continue
        after = slice(i + 1, min(n, i + 1 + DRIFT_SPIKE_RECOVERY_STEPS))
        spike = {"step": i, "before": before, "loss": low[i], "fp32": ref[i], "steps_after": len(low[after]),
                 "after_bf16": None, "after_fp32": None, "came_back": None}
        if low[after]:
            ab, af = statistics.fmean(low[after]), statistics.fmean(ref[after])
            spike.update(after_bf16=ab, after_fp32=af, came_back=ab - af <= drift_tolerance(af))
        return spike
    return None


def _first_step_apart(row: dict[str, Any], low: list[float], ref: list[float], factor: float) -> int:
    """The first step of a window whose own gradient norms are `factor` apart (else the window's first step)."""
    for i in range(row["first"], row["last"] + 1):
        if _factor(_ratio(low[i], ref[i])) > factor:
            return i
    return row["first"]


def _times(ratio: float) -> str:
    """x1,146 / x2.40 / x0.031: a ratio as the verdicts print it."""
    if not math.isfinite(ratio) or ratio >= 10:
        return f"x{ratio:,.0f}"
    return f"x{ratio:.2f}" if ratio >= 0.1 else f"x{ratio:.2g}"


def _sampled_windows(rows: list[dict[str, Any]], keep: list[int]) -> list[dict[str, Any]]:
    if len(rows) <= DRIFT_EVIDENCE_WINDOWS:
        return rows
    picks = {round(i * (len(rows) - 1) / (DRIFT_EVIDENCE_WINDOWS - 1)) for i in range(DRIFT_EVIDENCE_WINDOWS)}
    return [rows[i] for i in sorted(picks | set(keep))]


def _drift_fix(kind: str, on_gpu: bool, attn: str) -> fixes.Fix:
    other_attn = "sdpa" if attn == "eager" else "eager"
    if kind == "norm":
        return fixes.shell("rocmcheck smoke-train --drift --attn {attn}",
                           "if the gradient norms then match fp32's, this build's fused attention backward is at fault "
                           "in bf16; if not, the bf16 GEMMs or a fused RMSNorm are: where training code swaps "
                           "transformers' LlamaRMSNorm for a fused kernel (torch.nn.functional.rms_norm, Liger, apex), "
                           "compute RMSNorm in fp32 as LlamaRMSNorm does (upcast the input to float32, normalize, cast "
                           "back); report the torch/ROCm versions (rocmcheck doctor) with this evidence",
                           attn=other_attn)
    if on_gpu:
        return fixes.shell("rocmcheck smoke-train --drift --device cpu",
                           "the same comparison on the CPU (add this run's flags): if bf16 stays with fp32 there, this "
                           f"GPU's bf16 kernels are at fault, and --attn {other_attn} on the GPU tells the attention "
                           "kernel from the GEMMs")
    return fixes.shell("rocmcheck smoke-train --drift --attn {attn}",
                       "if bf16 then stays with fp32, the attention kernel is at fault; if not, the bf16 GEMMs or "
                       "the training settings (a learning rate at the edge of stability amplifies rounding)",
                       attn=other_attn)


def _finding(kind: str, severity: str, step: int, short: str, detail: str) -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "step": step, "short": short, "text": short + detail}


def _norm_finding(rows: list[dict[str, Any]], low: list[float], ref: list[float]) -> dict[str, Any] | None:
    compared = [r for r in rows if r["norms_compared"]]
    out = [r for r in compared if _factor(r["norm_ratio"]) > DRIFT_NORM_WARN_FACTOR]
    if not out:
        return None
    worst = max(compared, key=lambda r: _factor(r["norm_ratio"]))
    exploded = _factor(worst["norm_ratio"]) > DRIFT_NORM_FAIL_FACTOR
    step = _first_step_apart(out[0], low, ref, DRIFT_NORM_WARN_FACTOR)
    what = ("exploded" if worst["norm_ratio"] > 1 else "vanished") if exploded else "apart"
    return _finding("norm", "fail" if exploded else "warn", step,
                    f"bf16 gradient norms are {_times(worst['norm_ratio'])} fp32's from step {step}",
                    f" ({what}: {worst['norm_bf16']:.4g} vs {worst['norm_fp32']:.4g} at steps {worst['first']}-"
                    f"{worst['last']}; bf16 rounding keeps them within x{DRIFT_NORM_WARN_FACTOR:g})")


def _spike_finding(spike: dict[str, Any] | None) -> dict[str, Any] | None:
    if spike is None:
        return None
    s = spike["step"]
    jump = f" ({spike['before']:.4g} -> {spike['loss']:.4g}; fp32 {spike['fp32']:.4g})"
    if spike["came_back"] is None:
        return _finding("spike", "warn", s, f"bf16 loss spikes at the last step, {s}",
                        jump + ": whether it comes back is not known (add --steps)")
    back = "came back" if spike["came_back"] else "did not come back"
    return _finding("spike", "warn" if spike["came_back"] else "fail", s, f"bf16 loss spikes at step {s} and {back}",
                    f"{jump}: {spike['after_bf16']:.4g} vs fp32 {spike['after_fp32']:.4g} over the next "
                    f"{spike['steps_after']} steps")


def _loss_finding(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    out = [r for r in rows if not abs(r["diff"]) <= r["tolerance"]]
    if not out:
        return None
    worst = max(rows, key=lambda r: abs(r["diff"]) / r["tolerance"])
    diverged = abs(worst["diff"]) > DRIFT_LOSS_FAIL_FACTOR * worst["tolerance"]
    return _finding("loss", "fail" if diverged else "warn", out[0]["first"],
                    f"bf16 loss {'diverged' if diverged else 'drifts'} from fp32's from step {out[0]['first']}",
                    f": {worst['loss_bf16']:.4f} at steps {worst['first']}-{worst['last']} vs {_compared_with(worst)} "
                    f"({worst['diff']:+.3g}, tolerance {worst['tolerance']:.3g})")


def _json_number(v: Any) -> Any:
    """JSON has no inf or NaN: those become None (not known); floats rounded for the report."""
    if isinstance(v, float):
        return round(v, 6) if math.isfinite(v) else None
    return v


def _window_line(r: dict[str, Any]) -> str:
    out = "" if abs(r["diff"]) <= r["tolerance"] else ": OUT"
    return (f"steps {r['first']}-{r['last']}: loss {r['loss_bf16']:.4f} vs {_compared_with(r)} ({r['diff']:+.4f}, "
            f"tolerance {r['tolerance']:.3f}{out}); gradient norm {r['norm_bf16']:.4g} vs {r['norm_fp32']:.4g} "
            f"({_times(r['norm_ratio'])}{'' if r['norms_compared'] else ', not compared: a memorized batch'})")


def check_drift(low: dict[str, list[float]], ref: dict[str, list[float]] | None, why_not: str | None = None, *,
                precision: str = "bf16", on_gpu: bool = False, attn: str = "sdpa") -> CheckResult:
    """smoke-train --drift: the run's per-step loss and gradient norm (`low`: {"loss": [...], "grad_norm": [...]})
    against an fp32 run of the same steps (`ref`; None: there is none, and `why_not` says why). Fails on gradient
    norms more than DRIFT_NORM_FAIL_FACTOR apart, a loss further than DRIFT_LOSS_FAIL_FACTOR x the tolerance, or a
    spike that does not come back; warns on less (drifting). Each finding names the step it started at.
    precision: how the run computed (evidence only)."""
    if ref is None:
        return skipped(f"no fp32 reference: {why_not or 'not run'}", id="train.drift")
    n = len(low["loss"])
    if n < DRIFT_WINDOW:
        return skipped(f"only {n} steps ran; need {DRIFT_WINDOW} to compare curves", id="train.drift")
    ref_bad = [i for i in range(min(n, len(ref["loss"])))
               if not (math.isfinite(ref["loss"][i]) and math.isfinite(ref["grad_norm"][i]))]
    if ref_bad:
        return skipped(f"the fp32 reference became non-finite at step {ref_bad[0]}: these settings diverge in fp32 "
                       "too (the learning rate, not bf16)", id="train.drift")
    if len(ref["loss"]) < n:
        return skipped(f"the fp32 reference ran {len(ref['loss'])} of {n} steps", id="train.drift")
    data: dict[str, Any] = {
        "steps": n, "precision": precision, "window": DRIFT_WINDOW, "loss_abs_tol": DRIFT_LOSS_ABS_TOL,
        "loss_rel_tol": DRIFT_LOSS_REL_TOL, "loss_fail_factor": DRIFT_LOSS_FAIL_FACTOR,
        "norm_warn_factor": DRIFT_NORM_WARN_FACTOR, "norm_fail_factor": DRIFT_NORM_FAIL_FACTOR}
    evidence = [f"{precision} vs fp32 (fp32 weights, no autocast): the same {n} steps from the same weights, "
                f"batches and lr schedule; per {DRIFT_WINDOW}-step window the mean loss (against fp32's over the same "
                f"steps or up to {DRIFT_LOSS_SHIFT_STEPS} off, the nearest; tolerance {DRIFT_LOSS_ABS_TOL:g} + "
                f"{DRIFT_LOSS_REL_TOL:.0%} of fp32's, x{DRIFT_LOSS_FAIL_FACTOR:g} fails) and the median gradient norm "
                f"(x{DRIFT_NORM_WARN_FACTOR:g} apart warns, x{DRIFT_NORM_FAIL_FACTOR:g} fails; compared where fp32's "
                f"loss is {DRIFT_NORM_MIN_LOSS:g} or more)"]
    bad = [i for i in range(n) if not (math.isfinite(low["loss"][i]) and math.isfinite(low["grad_norm"][i]))]
    if bad:
        k = bad[0]
        found = _finding("nonfinite", "fail", k, f"bf16 loss or gradient norm became non-finite at step {k} while "
                         "fp32's stayed finite", f" (loss {ref['loss'][k]:.4f}, gradient norm "
                         f"{ref['grad_norm'][k]:.4g})")
        return failed(found["text"], _drift_fix("loss", on_gpu, attn), evidence + [found["text"]], **data,
                      started_at=k, findings=[found], id="train.drift")
    rows = drift_windows(low, ref)
    spike = find_spike(low["loss"], ref["loss"])
    findings = [f for f in (_norm_finding(rows, low["grad_norm"], ref["grad_norm"]), _spike_finding(spike),
                            _loss_finding(rows)) if f is not None]
    # The worst first; among equals the most specific: a norm or a spike names the cause, a window only the effect.
    findings.sort(key=lambda f: (f["severity"] != "fail", ("norm", "spike", "loss").index(f["kind"])))
    keep = [i for i, r in enumerate(rows) if any(r["first"] <= f["step"] <= r["last"] for f in findings)]
    shown = _sampled_windows(rows, keep)
    evidence += [f["text"] for f in findings] + [_window_line(r) for r in shown]
    worst_excess = max(abs(r["diff"]) / r["tolerance"] for r in rows)
    ratios = [r["norm_ratio"] for r in rows if r["norms_compared"]]
    data.update(windows=[{k: _json_number(v) for k, v in r.items()} for r in shown],
                worst_loss_excess=_json_number(worst_excess),
                norm_ratio_min=_json_number(min(ratios)) if ratios else None,
                norm_ratio_max=_json_number(max(ratios)) if ratios else None,
                norm_windows_compared=len(ratios), spike=spike, findings=findings,
                started_at=findings[0]["step"] if findings else None)
    if not findings:
        norms = (f"gradient norms {_times(min(ratios))}-{_times(max(ratios))} fp32's" if ratios else
                 f"gradient norms not compared (fp32's loss below {DRIFT_NORM_MIN_LOSS:g} throughout: a memorized "
                 "batch)")
        return passed(f"bf16 tracks fp32 over {n} steps: window losses within {worst_excess:.0%} of the tolerance, "
                      + norms, evidence, **data, id="train.drift")
    top = findings[0]
    summary = top["text"] + "".join(f"; {f['short']}" for f in findings[1:] if f["severity"] == top["severity"])
    fix = _drift_fix(top["kind"], on_gpu, attn)
    if top["severity"] == "fail":
        return failed(summary, fix, evidence, **data, id="train.drift")
    return warned(summary, fix, evidence, **data, id="train.drift")


# -- mixture of experts (measured by train/moe.py) -------------------------------------------------------------------
# train.moe_router. A router that sends no token to an expert, or nearly all of a layer's tokens to one, has
# collapsed: each token picks top_k distinct experts, so one expert's share of the assignments is at most 1/top_k,
# and a share of MOE_MAX_SHARE_OF_CEILING x 1/top_k means nearly every token chose it. Both are judged only where a
# healthy router cannot look like that by chance. A run that is not the bundled one trains on one fixed batch, so
# its steps repeat the same assignments; an expert is judged dead only where a uniform router would send it
# MOE_MIN_EXPECTED of one batch's assignments (the default batch of 1024 tokens: Mixtral's 8 experts, top-2, 256;
# GPT-OSS-20B's 32, top-4, 128; Qwen1.5-MoE's 60, top-4, 68; DeepSeek-V3's 256, top-8, 32: not judged, a batch of one
# kind of text leaves fine-grained experts idle). A collapse is judged only where the ceiling is at least
# MOE_MIN_CEILING_OVER_UNIFORM times the uniform share (experts >= 4 x top_k): with 4 experts, top-2 (ceiling 50%,
# uniform 25%) a random-init router skews there on a batch of repeated tokens. Measured on this repository's CPU over
# the tiny random-init MoE folders of the tests (4 experts, top-2, 64 tokens a step, 10-20 steps at lr 1e-2;
# Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3, GPT-OSS): shares 4%-43% in full fine-tunes, and 48% with Mixtral's
# router frozen under LoRA for 20 steps. An unbalanced router warns, not fails: on an H100 (benchmarks/RESULTS.md,
# section 26), random-init 8-16 expert folders trained 30 steps on one repeated batch collapsed without a
# load-balancing loss, and frozen random routers under LoRA left experts idle, with every numerics and expert verdict
# passing; balance alone cannot tell the data and the training from the gating kernels, the fix's CPU run can.
MOE_MAX_SHARE_OF_CEILING = 0.95
MOE_MIN_CEILING_OVER_UNIFORM = 4
MOE_MIN_EXPECTED = 64
# train.moe_experts: one expert's output in bf16 (weights and inputs) against float32 on the CPU, the relative
# Frobenius error. Measured on the same folders: 0.0023-0.0029 after the 10 steps, 0.0035-0.0056 at random init
# (bf16 keeps 8 significant bits, 2^-8 = 0.0039 per value); an expert GEMM that reads the wrong expert's weights,
# drops a scale or a bias gives errors of order 1.
MOE_EXPERT_REL_TOL = 0.02
MOE_ROUTER_FIX = fixes.step("rocmcheck smoke-train --device cpu",
                            "the same run on the CPU (add this run's flags): if its router spreads the tokens, this "
                            "device's gating kernels (softmax, top-k) are at fault; if not, the checkpoint's router is "
                            "(fine-tune it with output_router_logits=True, which adds the load-balancing loss)")
MOE_EXPERTS_FIX = fixes.step("rocmcheck probe gemm_blaslt", "this device's bf16 expert GEMMs (grouped or batched "
                             "matmul) compute wrongly: check the dense bf16 GEMMs, then report the torch/ROCm or CUDA "
                             "versions (rocmcheck doctor) with this evidence")
SKIP_DENSE = "a dense model: no experts to judge"


def check_moe_router(counts: dict[str, list[int]] | None, top_k: int | None, aux_loss: float | None,
                     aux_why: str | None = None, batch_tokens: int | None = None) -> CheckResult:
    """counts: per MoE layer, the tokens sent to each expert over the run (moe.RouterWatch); batch_tokens: the
    distinct tokens the run routes (one step's, where every step trains on the same batch; None: every assignment
    counted is distinct); aux_loss: the load-balancing loss the model reported on one batch (None: it reports none,
    aux_why says why)."""
    if counts is None:
        return skipped(SKIP_DENSE, id="train.moe_router")
    if not counts or not top_k:
        return skipped("no routing was seen during the run", id="train.moe_router")
    dead, hot, shares = [], [], {}
    ceiling = 1 / top_k
    n_experts = max((len(r) for r in counts.values()), default=0)
    judge_hot = n_experts >= MOE_MIN_CEILING_OVER_UNIFORM * top_k
    for layer, row in counts.items():
        total = sum(row)
        if total <= 0:
            continue
        share = [c / total for c in row]
        shares[layer] = [round(v, 4) for v in share]
        distinct = min(total, batch_tokens * top_k) if batch_tokens else total
        if distinct / len(row) >= MOE_MIN_EXPECTED:
            dead += [f"{layer} expert {i}" for i, c in enumerate(row) if c == 0]
        top = max(range(len(row)), key=row.__getitem__)
        if judge_hot and share[top] >= MOE_MAX_SHARE_OF_CEILING * ceiling:
            hot.append(f"{layer} expert {top} ({share[top]:.0%})")
    all_shares = [v for row in shares.values() for v in row]
    data = {"shares": shares, "top_k": top_k, "aux_loss": aux_loss, "min_share": min(all_shares, default=None),
            "max_share": max(all_shares, default=None), "max_share_limit": MOE_MAX_SHARE_OF_CEILING * ceiling,
            "collapse_judged": judge_hot, "min_expected_tokens": MOE_MIN_EXPECTED, "batch_tokens": batch_tokens}
    evidence = [f"{len(counts)} MoE layers x {n_experts} experts, top-{top_k}; token shares over the run "
                f"{data['min_share']:.1%}-{data['max_share']:.1%} (uniform {1 / max(1, n_experts):.1%}, at most "
                f"{ceiling:.0%})" if all_shares else "no token was routed",
                f"aux loss {aux_loss:.4g}" if aux_loss is not None else f"aux loss: {aux_why or 'not reported'}"]
    if aux_loss is not None and not math.isfinite(aux_loss):
        return failed(f"the router's aux loss is {aux_loss}", MOE_ROUTER_FIX, evidence, **data, id="train.moe_router")
    problems = []
    if dead:
        problems.append(f"{len(dead)} experts got no token in the whole run ({', '.join(dead[:3])})")
    if hot:
        problems.append(f"the router sends nearly every token to one expert ({', '.join(hot[:3])})")
    if problems:  # the run's data and training can do this too: a warning, and the run that tells them apart
        return warned("router is unbalanced: " + "; ".join(problems), MOE_ROUTER_FIX, evidence, **data,
                      id="train.moe_router")
    if not all_shares:
        return skipped("no token was routed during the run", id="train.moe_router")
    aux = f"; aux loss {aux_loss:.3g}" if aux_loss is not None else ""
    return passed(f"router spreads tokens over all {n_experts} experts (shares {data['min_share']:.0%}-"
                  f"{data['max_share']:.0%}, top-{top_k}){aux}", evidence, **data, id="train.moe_router")


def check_moe_experts(m: dict[str, Any] | None, layer: str | None = None) -> CheckResult:
    """m: moe.measure_experts's result for one expert of `layer`; None for a dense model."""
    if m is None:
        return skipped(SKIP_DENSE, id="train.moe_experts")
    if "skipped" in m:
        return skipped(m["skipped"], id="train.moe_experts")
    rel = m["rel_error"]
    data = {**m, "layer": layer, "tolerance": MOE_EXPERT_REL_TOL}
    evidence = [f"{layer} expert {m['expert']} ({m['module']}) on {m['rows']} of the batch's tokens: "
                f"{m['precision']} vs float32 (CPU), relative error {rel:.2e} (tolerance {MOE_EXPERT_REL_TOL:g})"]
    if not m["finite"] or not math.isfinite(rel) or rel > MOE_EXPERT_REL_TOL:
        what = "non-finite" if not m["finite"] else f"off by {rel:.1e} (relative)"
        return failed(f"expert GEMMs in bf16 are {what} against float32", MOE_EXPERTS_FIX, evidence, **data,
                      id="train.moe_experts")
    return passed(f"expert GEMMs in bf16 match float32 within {rel:.1e} (relative; tolerance {MOE_EXPERT_REL_TOL:g})",
                  evidence, **data, id="train.moe_experts")
