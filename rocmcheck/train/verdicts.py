"""Verdicts of a smoke-train run: pure functions from measured numbers to CheckResults.

Kept apart from the loop so each decision can be tested on recorded numbers, and so the thresholds
and their reasons sit in one place.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.train import reference
from rocmcheck.train.memory import GiB, MiB, LeakDecision

CKPT_FIX = "rocmcheck smoke-train --gradient-checkpointing --micro-batch 1 --grad-accum 8"


def check_loss_decrease(losses: list[float], min_drop: float) -> CheckResult:
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
        return failed("loss is not finite, so it cannot fall", "see train.finite", evidence, **data, id="train.loss_decrease")
    if last <= target:
        return passed(f"loss fell {first:.3f} -> {last:.3f} ({1 - last / first:.0%} drop, needed {min_drop:.0%})", evidence, **data, id="train.loss_decrease")
    return failed(f"loss fell only {first:.3f} -> {last:.3f} (needed a {min_drop:.0%} drop)",
                  "rerun with --device cpu: if the CPU run learns and this device does not, the GPU stack computes wrong "
                  "gradients; if neither learns, try --lr 1e-3 --steps 120", evidence, **data, id="train.loss_decrease")


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
                  "rerun with --pure-bf16 off (default) and --attn eager: if that is finite, the fused attention or bf16 "
                  "kernels of this build are at fault; report torch/ROCm versions with the evidence", evidence, **data, id="train.finite")


def check_accuracy(before: float | None, after: float | None, threshold: float, n_prompts: int) -> CheckResult:
    data = {"accuracy_before": before, "accuracy": after, "threshold": threshold, "prompts": n_prompts}
    if after is None:
        return skipped("no evaluation (the run stopped early)", **data, id="train.task_accuracy")
    ev = [f"exact match on {n_prompts} held-out prompts: before fine-tune {before:.0%}, after {after:.0%}"]
    if after >= threshold:
        learned = "" if before is None or after > before else " (the model could already do the task)"
        return passed(f"held-out exact match {after:.0%} (needed {threshold:.0%}){learned}", ev, **data, id="train.task_accuracy")
    return failed(f"held-out exact match only {after:.0%} (needed {threshold:.0%})",
                  "rerun with --device cpu to compare; if the CPU run reaches the threshold, the GPU numerics are suspect "
                  "(check train.reference_curve); otherwise rerun with more --steps", ev, **data, id="train.task_accuracy")


def check_reload(max_abs_diff: float | None, noise: float = 0.0, weights_equal: bool = True,
                 error: str | None = None, bound_label: str = "this device's run-to-run noise") -> CheckResult:
    """Reloaded weights must be bit-identical, and its logits no further from the trained model's than
    two forwards of the trained model are from each other (0 where kernels are deterministic)."""
    if error:
        return failed(f"save -> reload failed: {error}",
                      "check free disk space and write permission for --out", [error], id="train.reload")
    data = {"max_abs_diff": max_abs_diff, "forward_noise": noise, "weights_equal": weights_equal}
    if weights_equal and max_abs_diff is not None and max_abs_diff <= noise:
        how = "identical logits" if max_abs_diff == 0 else f"logits within {bound_label} ({noise:.2g})"
        return passed(f"save -> reload gives {how}", **data, id="train.reload")
    what = "weights changed on the way through the checkpoint" if not weights_equal else \
        f"reloaded model's logits differ (max |diff| {max_abs_diff:.3g}, allowed: {bound_label} {noise:.2g})"
    return failed(what, "a saved checkpoint does not reproduce the trained model: check the "
                  "safetensors/transformers versions (pip install -U safetensors transformers)",
                  [f"max |logit diff| = {max_abs_diff}; forward noise = {noise}; weights equal: {weights_equal}"], **data, id="train.reload")


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
        return passed(f"loss curve matches the {kind} reference within tolerance", evidence, **data, id="train.reference_curve")
    w = cmp["worst"]
    return failed(f"loss curve departs from the {kind} reference at steps {w['steps']} "
                  f"({w['run']:.3f} vs {w['reference']:.3f})",
                  "rerun with --attn eager and then --device cpu: the first setting that matches points at the faulty "
                  "kernel (fused attention, bf16 GEMM)", evidence, **data, id="train.reference_curve")


def check_memory_leak(decision: LeakDecision, kind: str, baselines: list[int]) -> CheckResult:
    shown = ", ".join(f"{b / MiB:.0f}" for b in baselines[:12]) + (" ..." if len(baselines) > 12 else "")
    evidence = [f"post-step baseline ({kind}, MiB): {shown}", decision.reason]
    data = {"kind": kind, "growth_bytes": decision.growth_bytes, "per_step_bytes": decision.per_step_bytes,
            "tolerance_bytes": decision.tolerance_bytes, "rising_fraction": decision.rising_fraction}
    if decision.steps_judged < 6:
        return skipped(decision.reason, evidence, **data, id="train.memory_leak")
    if not decision.leaking:
        return passed(f"memory after each step is flat ({decision.growth_bytes / MiB:+.1f} MiB over "
                      f"{decision.steps_judged} steps)", evidence, **data, id="train.memory_leak")
    return failed(f"memory after each step keeps rising: {decision.per_step_bytes / MiB:.1f} MiB/step "
                  f"({decision.growth_bytes / MiB:.0f} MiB over {decision.steps_judged} steps)",
                  "something keeps tensors (and their graphs) alive between steps: log loss.item(), never the loss "
                  "tensor; run evaluation under torch.no_grad(); do not keep model outputs in lists", evidence, **data, id="train.memory_leak")


def check_memory_headroom(peak_bytes: int, total_bytes: int | None, kind: str) -> CheckResult:
    data = {"peak_bytes": peak_bytes, "total_bytes": total_bytes, "kind": kind}
    if not total_bytes:
        return passed(f"peak memory {peak_bytes / GiB:.2f} GiB", **data, id="train.memory")
    share = peak_bytes / total_bytes
    summary = f"peak memory {peak_bytes / GiB:.2f} GiB of {total_bytes / GiB:.0f} GiB ({share:.0%})"
    if share <= 0.9:
        return passed(summary, **data, id="train.memory")
    return warned(summary + ": a longer batch will run out of memory", CKPT_FIX, **data, id="train.memory")


def check_throughput(step_times: list[float], tokens_per_step: int, flops_per_token: float, peak_tflops: float | None,
                     peak_source: str | None, on_gpu: bool) -> CheckResult:
    steady = step_times[3:] if len(step_times) > 6 else step_times
    if not steady:
        return skipped("no steps timed", id="train.throughput")
    median = statistics.median(steady)
    p90 = sorted(steady)[int(0.9 * (len(steady) - 1))]
    tok_s = tokens_per_step / median
    mfu = flops_per_token * tok_s / (peak_tflops * 1e12) if peak_tflops else None
    data = {"tokens_per_s": tok_s, "step_s_median": median, "step_s_p90": p90, "mfu": mfu,
            "peak_bf16_tflops": peak_tflops, "peak_source": peak_source, "flops_per_token": flops_per_token}
    mfu_text = f", MFU {mfu:.1%} of {peak_tflops:g} TFLOP/s ({peak_source})" if mfu is not None else \
        (", MFU n/a (no datasheet bf16 peak for this device)" if on_gpu else ", MFU n/a on CPU")
    summary = f"{tok_s:,.0f} tokens/s, step {median * 1e3:.1f} ms median{mfu_text}"
    evidence = [f"{len(steady)} steady steps; median {median * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms; {tokens_per_step} tokens/step"]
    # Stalls: a GPU step should take the same time every step; 3x spread means syncs, recompiles or
    # allocator thrash. CPU timing shares cores with everything else, so only gross stalls count.
    stall_ratio = 3.0 if on_gpu else 6.0
    if p90 > stall_ratio * median:
        return warned(summary + f"; unsteady steps (p90 {p90 / median:.1f}x median)",
                      "look for other processes on this device (rocm-smi / nvidia-smi) and rerun", evidence, **data, id="train.throughput")
    return passed(summary, evidence, **data, id="train.throughput")


def oom_result(step: int, error_type: str, first_line: str, peak_bytes: int, total_bytes: int | None, kind: str,
               settings: str) -> CheckResult:
    evidence = [f"{error_type} at step {step}: {first_line}",
                f"peak memory {peak_bytes / GiB:.2f} GiB" + (f" of {total_bytes / GiB:.0f} GiB" if total_bytes else "") + f" ({kind})",
                f"settings: {settings}"]
    return failed(f"out of memory at step {step} (peak {peak_bytes / GiB:.2f} GiB)", CKPT_FIX, evidence,
                  step=step, peak_bytes=peak_bytes, total_bytes=total_bytes, error=first_line, id="train.oom")


def stopped_results(reason: str, ids: tuple[str, ...] | list[str]) -> list[CheckResult]:
    return [skipped(f"not judged: {reason}", id=i) for i in ids]
