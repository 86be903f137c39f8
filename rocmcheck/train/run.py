"""The smoke-train run, read top to bottom like nanoGPT's train.py: device, data, model, the loop
(train_steps, the one function that runs training steps), then the verdicts.

One path for a world of one and of N ranks (one process per rank, started by torchrun, the DeepSpeed
launcher or `smoke-train --nproc`), plain, DDP or DeepSpeed: a strategy (plain_strategy.py, ds_engine.py)
owns the model, the optimizer and one optimizer step; the loop, the data and the judging are the same for
all. The global batch is micro-batch x accumulation x ranks, rank r reading every W-th micro-batch.

With --deepspeed the run first trains the plain way (DDP when there are several ranks) for the parity
curve, and, for a config that offloads, the same config without offload for the step-time baseline.
Those runs keep only their loss and step times; the verdicts are on the DeepSpeed run.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import os
import random
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from rocmcheck import fixes
from rocmcheck.facts.host_resources import total_memory
from rocmcheck.fixes import Fix
from rocmcheck.heap import imports_without_gc
from rocmcheck.monitor.step_memory import MemorySampler, detect_leak
from rocmcheck.result import CheckResult, skipped
from rocmcheck.train import (
    comparisons,
    distributed,
    fit,
    kernels,
    modeling,
    numerics,
    reference,
    reload,
    task,
    verdicts,
)
from rocmcheck.train import data as data_mod
from rocmcheck.train.config import TrainConfig, read_model_config
from rocmcheck.train.device import DeviceInfo, DeviceUnavailable, fused_adamw_ok, pick_device, synchronize
from rocmcheck.train.distributed import World, bind_device, world_from_env
from rocmcheck.train.ds_config import DeepSpeedPlan
from rocmcheck.train.model_files import no_eos_failure, tokenizer_failure, weights_failure
from rocmcheck.train.report import (
    JUDGED_AFTER_OWN_MODEL_RUN,
    JUDGED_AFTER_RUN,
    RunReport,
    SetupFailed,
    Timings,
    first_line,
)

DEFAULT_PG_TIMEOUT_S = 600.0
NUMERICS_ROWS = 4  # rows of the first batch compared in bf16 and fp32 (the tolerance was measured on 4-16)
Progress = Callable[[int, int, dict[str, Any]], None]

# Fixes of the runs that cannot start (one pasteable line each).
NO_DEVICE_FIX = fixes.shell("rocmcheck doctor", "then rerun with --device cpu")
NO_BF16_FIX = fixes.shell("rocmcheck smoke-train --device cpu", "this GPU has no bf16; MI200/MI300, A100, H100 have it")
PEFT_FIX = fixes.shell("pip install peft", "--lora-rank trains a LoRA adapter through peft")
ATTN_FIX = fixes.shell("pip install flash-attn --no-build-isolation", "or run with --attn sdpa")


def ranks_fix(gpus: int) -> Fix:
    return fixes.shell("rocmcheck smoke-train --gpus {gpus}", "one rank per visible GPU", gpus=gpus)


def seq_len_fix(seq_len: int) -> Fix:
    return fixes.shell("rocmcheck smoke-train --seq-len {seq_len}", "a row must hold at least one example",
                       seq_len=seq_len * 2)


@dataclass
class RunHooks:
    """Ways for tests (and curious people) to reach into a real run."""

    on_model: Callable[[torch.nn.Module], None] | None = None  # e.g. register a forward hook
    on_step_end: Callable[[int, torch.Tensor], None] | None = None  # gets each micro-batch's loss tensor
    on_saved: Callable[[Path], None] | None = None  # gets the checkpoint folder once saved, before it is checked


@dataclass
class Phase:
    """One training run inside the process: its per-step rows, and what the verdicts need from it."""

    name: str
    steps: int  # the steps asked for
    metrics: list[dict[str, Any]] = field(default_factory=list)
    local_losses: list[float] = field(default_factory=list)
    stopped: str | None = None
    oom: dict[str, Any] | None = None
    sampler: MemorySampler | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def losses(self) -> list[float]:
        return [m["loss"] for m in self.metrics]

    @property
    def step_times(self) -> list[float]:
        return [m["step_s"] for m in self.metrics]

    @property
    def finished(self) -> bool:
        """Every step ran (a non-finite loss at the last step still counts as finished)."""
        return len(self.metrics) == self.steps


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay to lr * min_lr_ratio (nanoGPT's get_lr)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    min_lr = cfg.lr * cfg.min_lr_ratio
    return min_lr + 0.5 * (1 + math.cos(math.pi * min(1.0, progress))) * (cfg.lr - min_lr)


def train_steps(strategy, cfg: TrainConfig, device: torch.device, world_size: int = 1,
                progress: Progress | None = None, watch: Any = None) -> Phase:
    """The training loop: cfg.steps optimizer steps of `strategy`, each timed, with its loss (the mean over
    ranks), gradient norm and memory. Stops at an out-of-memory error or a non-finite loss."""
    phase = Phase(strategy.name, cfg.steps)
    sampler = phase.sampler = MemorySampler(device)
    tokens = cfg.tokens_per_step * world_size
    t_loop = time.perf_counter()
    for step in range(cfg.steps):
        lr = strategy.set_lr(lr_at(step, cfg))
        sampler.start_step()
        t0 = time.perf_counter()
        try:
            loss, grad_norm = strategy.train_step(step)
            global_loss = distributed.mean_over_ranks(loss.float())
            local_v, loss_v, norm_v = torch.stack([loss.float(), global_loss, grad_norm.float()]).tolist()  # one sync
        except Exception as exc:  # noqa: BLE001 - only OOM becomes a verdict here; everything else propagates
            if not modeling.is_oom(exc):
                raise
            strategy.zero_grad()
            phase.stopped = f"out of memory at step {step}"
            phase.oom = {"step": step, "error_type": type(exc).__name__, "error": first_line(exc, 300),
                         "peak": sampler.sample().peak}
            break
        synchronize(device)
        dt = time.perf_counter() - t0
        mem = sampler.sample()
        row = {"step": step, "loss": loss_v, "grad_norm": norm_v, "lr": lr, "step_s": dt, "tokens": tokens,
               "tokens_per_s": tokens / dt, "mem_allocated": mem.allocated, "mem_reserved": mem.reserved,
               "mem_peak": mem.peak}
        phase.metrics.append(row)
        phase.local_losses.append(local_v)
        if watch is not None:  # --memory-snapshot: the leak finder's post-step point
            watch.step()
        if progress:
            progress(step + 1, cfg.steps, row)
        if not (math.isfinite(loss_v) and math.isfinite(norm_v)):
            phase.stopped = f"non-finite loss/gradient at step {step}"
            break
    phase.info["loop_s"] = time.perf_counter() - t_loop
    phase.info["memory_kind"] = sampler.kind
    return phase


def run_smoke_train(cfg: TrainConfig, hooks: RunHooks | None = None, progress: Progress | None = None, *,
                    plan: DeepSpeedPlan | None = None, pg_timeout_s: float = DEFAULT_PG_TIMEOUT_S) -> RunReport:
    """Every rank calls this; the RunReport that matters is rank 0's (other ranks return theirs, empty)."""
    # DeepSpeed calls the deprecated torch.distributed names once per step; a warning per step buries the report.
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please use `torch\.distributed\.",
                            category=FutureWarning)
    timed = Timings()
    world = world_from_env()
    with timed("import transformers"), imports_without_gc():
        modeling.offline_and_quiet()
    if plan is not None and (cfg.device == "cpu" or not torch.cuda.is_available()):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before deepspeed is imported anywhere
    with timed("import model classes (and torch._dynamo)"), imports_without_gc():
        modeling.import_model_classes()
    bind_device(world, cfg.device)
    cfg.attn, attn_why = modeling.attention_for(cfg)
    run = _Run(cfg, plan, world, hooks or RunHooks(), progress, pg_timeout_s, timed)
    run.attn_why = attn_why
    try:
        return run.run()
    except SetupFailed as exc:
        return RunReport([exc.result], info=run.info)
    finally:
        distributed.leave()


class _Run:
    def __init__(self, cfg: TrainConfig, plan: DeepSpeedPlan | None, world: World, hooks: RunHooks,
                 progress: Progress | None, pg_timeout_s: float, timed: Timings) -> None:
        self.cfg, self.plan, self.world, self.hooks, self.progress = cfg, plan, world, hooks, progress
        self.pg_timeout_s = pg_timeout_s
        self.numerics: dict[str, Any] | None = None
        self.numerics_result = verdicts.check_numerics(None, False)
        self.accuracy_before: float | None = None
        self.estimate = None
        self.t_start = time.perf_counter()
        self.timed = timed
        self.attn_why: str | None = None  # why the attention is not --attn's (modeling.attention_for)
        self.info: dict[str, Any] = {"config": cfg.to_dict(), "torch": torch.__version__, "python": sys.executable,
                                     "timings_s": self.timed.seconds}
        if world.distributed or plan is not None:
            self.info["world"] = {"ranks": world.world_size, "rank": world.rank}
        if plan is not None:
            self.info["deepspeed"] = plan.to_dict()

    # -- device ------------------------------------------------------------------------------------
    def _device(self) -> DeviceInfo:
        try:
            dev = pick_device(self.cfg.device)
        except DeviceUnavailable as exc:
            raise SetupFailed("train.device", str(exc), NO_DEVICE_FIX) from None
        self.info["device"] = dev.to_dict()
        if dev.device.type == "cpu":  # torch's threads sized to the CPU time this process gets (cpu_threads.py)
            from rocmcheck.train import cpu_threads

            local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("LOCAL_SIZE") or 1)
            self.info["cpu"] = cpu_threads.apply(ranks=local if self.world.distributed else 1).to_dict()
        if dev.device.type == "cuda" and not dev.bf16_supported:
            raise SetupFailed("train.device", f"{dev.name} has no bf16 support",
                              NO_BF16_FIX)
        if dev.device.type == "cuda" and self.world.distributed:
            # torchrun says LOCAL_WORLD_SIZE, the DeepSpeed launcher LOCAL_SIZE; without either, trust the launcher.
            local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("LOCAL_SIZE") or 0)
            if torch.cuda.device_count() < local:
                raise SetupFailed("train.device", f"{local} ranks on this node but only {torch.cuda.device_count()} "
                                  "GPU(s) visible: two ranks would share a GPU",
                                  ranks_fix(torch.cuda.device_count()))
        return dev

    # -- fit first: the planner's estimate, before any weight is loaded -----------------------------
    def _fit(self) -> None:
        cfg = self.cfg
        try:
            model_config = read_model_config(cfg.model)
        except ValueError:  # unreadable: the estimate says it cannot size the model, and the load says why
            model_config = {}
        settings = fit.run_settings(cfg, self.plan, self.world.world_size, self.fused_adamw)
        self.estimate, why_not = fit.estimate_run(model_config, settings)
        label = self.dev.name if self.device.type == "cuda" else "this machine (CPU run)"
        self.fit_result, stop = fit.check_fit(self.estimate, why_not, self._total_memory(), label, str(cfg.model),
                                              self.device.type == "cuda")
        if stop:
            raise SetupFailed.of(self.fit_result)
        if cfg.lora_rank and importlib.util.find_spec("peft") is None:
            raise SetupFailed("train.lora", "--lora-rank needs peft, which is not installed",
                              PEFT_FIX)

    # -- data: packed task rows, W times as many as one rank needs ---------------------------------
    def _data(self) -> None:
        """The bundled model trains on fresh task rows every step; any other model on its first batch,
        repeated (the classic "can it overfit one batch" check, which any model passes)."""
        cfg, world = self.cfg, self.world
        self.fixed_batch = not cfg.judged_on_task
        self.tokenizer = self._tokenizer()
        steps_of_data = 1 if self.fixed_batch else cfg.steps
        rows_needed = steps_of_data * cfg.grad_accum * cfg.micro_batch * world.world_size
        try:  # only the examples these rows take are made and encoded
            ids, labels = data_mod.pack_rows(self.tokenizer, task.iter_train_examples(cfg.seed), cfg.seq_len,
                                             rows=rows_needed)
        except ValueError as exc:
            raise SetupFailed("train.data", str(exc), seq_len_fix(cfg.seq_len)) from None
        self.ids, self.labels = ids.to(self.device), labels.to(self.device)
        self.eval_set = task.eval_examples(cfg.eval_prompts) if cfg.judged_on_task else []

    def _tokenizer(self):
        """The model folder's tokenizer; what is wrong with its files becomes train.load, naming the file."""
        folder, bundled = Path(self.cfg.model), self.cfg.is_bundled_model
        try:
            tokenizer = modeling.load_tokenizer(folder)
        except Exception as exc:  # noqa: BLE001 - whatever its files make the loader raise, they are at fault
            summary, fix = tokenizer_failure(folder, exc, bundled)
            raise SetupFailed("train.load", summary, fix, [f"{type(exc).__name__}: {first_line(exc, 300)}"]) from None
        if tokenizer.eos_token_id is None:
            summary, fix = no_eos_failure(folder)
            raise SetupFailed("train.load", summary, fix)
        return tokenizer

    def _build(self, strategy) -> torch.nn.Module:
        """The strategy's model, loaded from the folder. --attn's package missing becomes train.attn; damaged or
        mismatched weights become train.load, naming the file; anything else is raised (a bug)."""
        cfg = self.cfg
        try:
            return strategy.build(self.micro_batch)
        except ImportError as exc:  # flash_attention_2 without the flash_attn package, mostly
            raise SetupFailed("train.attn", f"--attn {cfg.attn} is not usable: {first_line(exc)}", ATTN_FIX) from None
        except SetupFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - sorted below: the folder's fault, or raised again
            found = weights_failure(Path(cfg.model), exc, cfg.is_bundled_model)
            if found is None:
                raise
            raise SetupFailed("train.load", found[0], found[1], [f"{type(exc).__name__}: {first_line(exc, 300)}"]) \
                from None

    def micro_batch(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        mb, w = self.cfg.micro_batch, self.world
        if self.fixed_batch:
            step = 0
        start = ((step * self.cfg.grad_accum + micro) * w.world_size + w.rank) * mb
        return self.ids[start:start + mb], self.labels[start:start + mb]

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> RunReport:
        with self.timed("device"):
            self.dev = self._device()
        self.device = self.dev.device
        with self.timed("first optimizer step"):
            self.fused_adamw = fused_adamw_ok(self.device, self.cfg.pure_bf16)
        with self.timed("fit"):
            self._fit()
        if self.plan is not None or self.world.distributed:
            with self.timed("join"):
                self.info["backend"] = distributed.join(self.world, self.device.type, self.plan is not None,
                                                        self.pg_timeout_s)
        with self.timed("data"), imports_without_gc():  # the tokenizer's imports, and the data once
            self._data()
        from rocmcheck.train.plain_strategy import PlainStrategy

        plain = PlainStrategy(self.cfg, self.device, self.world, on_loss=self.hooks.on_step_end)
        if self.plan is None:
            main = self._phase(plain, main=True, accuracy_before=True)
            return self._report(main)
        from rocmcheck.train.ds_engine import DeepSpeedStrategy

        baseline = self._phase(plain, main=False, accuracy_before=True)
        no_offload = None
        if self.plan.offloads:
            no_offload = self._phase(DeepSpeedStrategy(self.cfg, self.device, self.world, self.plan.without_offload()),
                                     main=False)
        main = self._phase(DeepSpeedStrategy(self.cfg, self.device, self.world, self.plan), main=True)
        return self._report(main, baseline, no_offload)

    def _phase(self, strategy, main: bool, accuracy_before: bool = False) -> Phase:
        """Build the strategy's model, train it, and (the main run) judge it while the model is alive."""
        cfg, timed = self.cfg, self.timed
        which = "" if main else f"{strategy.name} run: "  # the DeepSpeed run's comparison runs, timed apart
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        with timed(which + "load"):
            model = self._build(strategy)
        phase = self._train_and_judge(strategy, model, main, which, accuracy_before)
        strategy.close()  # drops the model, optimizer and engine it holds
        del model
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        if main and cfg.drift and phase.finished:  # --drift: the same steps again in fp32, this model gone
            from rocmcheck.train import drift

            phase.info.setdefault("results", []).append(drift.compare_with_fp32(self, phase))
        return phase

    def _train_and_judge(self, strategy, model, main: bool, which: str, accuracy_before: bool) -> Phase:
        """The numerics pass (once), the steps, and on the main run its verdicts while the model is alive."""
        cfg, timed = self.cfg, self.timed
        if self.numerics is None and strategy.name == "plain":  # before any step: the weights as loaded
            x, y = self.micro_batch(0, 0)
            with timed("numerics"):
                self.numerics = numerics.measure(strategy.model, x[:NUMERICS_ROWS], y[:NUMERICS_ROWS], cfg.pure_bf16)
            self.numerics_result = verdicts.check_numerics(self.numerics, self.device.type == "cuda")
            # each pass's seconds: the first includes the device's first use of the run's kernels
            self.info["numerics_s"] = {k: v["seconds"] for k, v in self.numerics.items()
                                       if isinstance(v, dict) and "seconds" in v}
        if main:
            self.info["model"] = {"path": str(cfg.model), "params": modeling.param_count(model),
                                  "model_type": model.config.model_type, "attn_implementation": cfg.attn}
            if self.attn_why:
                self.info["model"]["attn_why"] = self.attn_why
            if strategy.info.get("lora_targets"):
                self.info["model"]["lora_targets"] = strategy.info["lora_targets"]
            self.info["optimizer"] = {"name": strategy.info.get("optimizer"), "fused": strategy.info.get("fused")}
            if self.hooks.on_model:
                self.hooks.on_model(model)
        if accuracy_before and self.world.is_main and cfg.judged_on_task:
            with timed("accuracy"):
                self.accuracy_before = modeling.accuracy(model, self.tokenizer, self.eval_set, self.device)
        watch = None
        if main and cfg.memory_snapshot and self.world.is_main:
            from rocmcheck.monitor.leak import LeakWatch

            gc.unfreeze()  # the finder names holders through gc, which does not see frozen objects (heap.py)
            watch = LeakWatch(cfg.out or ".", always=True, device=self.device)
        router = None
        if main and not cfg.compile:  # MoE: the tokens each expert gets over the run (moe.py); none for a dense model
            from rocmcheck.train import moe

            router = moe.RouterWatch(model) if moe.experts_modules(model) else None
        with timed(which + "train"):
            phase = train_steps(strategy, cfg, self.device, self.world.world_size, self.progress if main else None,
                                watch)
        if router is not None:
            phase.info["moe_router"] = router.close()
        if watch is not None:
            watch.close()
            phase.info["memory_snapshot"] = verdicts.check_memory_snapshot(
                watch.report.result().to_dict() if watch.report else None,
                bool(watch.report and (watch.report.holders or watch.report.groups)),
                bool(watch.report and watch.report.holders))
        phase.info["strategy"] = strategy.info
        if main:
            phase.info["rank_rows"] = self._gather_rank_rows(phase, strategy)
            if phase.finished:
                phase.info["results"] = self._judge(strategy, phase)
            if "memory_snapshot" in phase.info:
                phase.info.setdefault("results", []).append(phase.info.pop("memory_snapshot"))
        return phase

    # -- verdicts on the main run (collectives first, on every rank; then rank 0 alone) -------------
    def _judge(self, strategy, phase: Phase) -> list[CheckResult]:
        cfg, world, device = self.cfg, self.world, self.device
        batch = self.ids[: min(4, len(self.ids))]
        eval_model = strategy.eval_model()  # ZeRO-3 gathers its shards: a collective
        live = strategy.live_logits(batch)
        noise = (live - strategy.live_logits(batch)).abs().max().item()  # this device's run-to-run noise
        if not world.is_main:
            return []
        status = self.numerics_result.status.value
        numerics_ok = None if status == "skip" else status == "pass"
        if cfg.judged_on_task:
            results = [verdicts.check_loss_decrease(phase.losses, cfg.min_loss_drop, numerics_ok)]
            with self.timed("accuracy"):
                after = modeling.accuracy(eval_model, self.tokenizer, self.eval_set, device)
            self.info["accuracy"] = after
            results.append(verdicts.check_accuracy(self.accuracy_before, after, cfg.accuracy_threshold,
                                                   len(self.eval_set), numerics_ok))
        else:
            min_drop = verdicts.LORA_LEARNS_MIN_DROP if cfg.lora_rank else verdicts.LEARNS_MIN_DROP
            results = [verdicts.check_learns(phase.losses, numerics_ok, min_drop)]
        with self.timed("reload"):
            results.append(reload.check_reload(cfg, reload.Reloaded(eval_model, live, noise, batch, strategy.zero3),
                                               self.info.setdefault("reload", {}), self.hooks.on_saved))
        if cfg.judged_on_task:
            key = cfg.reference_key()
            if world.distributed:
                key["ranks"] = world.world_size  # a curve with a W-times larger global batch is another curve
            curve, why_not = reference.find_reference(Path(cfg.model), self.dev.kind, key)
            # What train.reference_curve compares with, for the plot (outputs.py draws the curve and its band).
            self.info["reference_curve"] = ({"kind": curve["kind"], "run_kind": self.dev.kind, "loss": curve["loss"],
                                             "window": reference.WINDOW,
                                             "recorded_on": curve.get("recorded_on", {})} if curve else
                                            {"kind": self.dev.kind, "why_not": why_not})
            results.append(verdicts.check_reference_curve(phase.losses, curve, why_not, self.dev.kind))
        baselines = [m["mem_allocated"] for m in phase.metrics]
        decision = detect_leak(baselines, phase.sampler.tolerance_bytes(baselines[min(2, len(baselines) - 1)]))
        results.append(verdicts.check_memory_leak(decision, phase.sampler.kind, baselines))
        planned = {"allocated_peak_bytes": int(self.estimate.allocated_peak_bytes)} if self.estimate else None
        results.append(verdicts.check_memory_headroom(max(m["mem_peak"] for m in phase.metrics), self._total_memory(),
                                                      phase.sampler.kind, planned, fit.GAP_RATIO, fit.GAP_FLOOR_BYTES))
        peak = self.dev.peak_bf16_tflops * world.world_size if self.dev.peak_bf16_tflops else None
        recompute = modeling.recompute_flops_per_token(eval_model, cfg.seq_len) if cfg.gradient_checkpointing else 0.0
        results.append(verdicts.check_throughput(phase.step_times, cfg.tokens_per_step * world.world_size,
                                                 modeling.flops_per_token(eval_model, cfg.seq_len), peak,
                                                 self.dev.peak_source, device.type == "cuda",
                                                 modeling.param_count(eval_model), recompute, world.world_size))
        with self.timed("profile"):
            results.append(self._kernels(strategy))
        results += self._moe(eval_model, batch, phase)
        return results

    def _moe(self, model, batch: torch.Tensor, phase: Phase) -> list[CheckResult]:
        """train.moe_router and train.moe_experts for a mixture-of-experts model; nothing for a dense one."""
        from rocmcheck.train import moe

        if not moe.experts_modules(model):
            return []
        with self.timed("moe"):
            m = moe.measure_batch(model, batch, self.cfg.pure_bf16)
        self.info["moe"] = m
        router = phase.info.get("moe_router")
        if router is None:
            routed = skipped("the tokens per expert are not counted under --compile (hooks on a compiled model)",
                             id="train.moe_router")
        else:
            distinct = self.cfg.tokens_per_step if self.fixed_batch else None  # the same batch every step
            routed = verdicts.check_moe_router(router["layers"], router["top_k"], m.get("aux_loss"), m.get("aux_why"),
                                               distinct)
        return [routed, verdicts.check_moe_experts(m.get("experts"), m.get("layer"))]

    def _kernels(self, strategy) -> CheckResult:
        if self.world.distributed or self.plan is not None:
            return skipped("the kernel report comes from the single-process plain run (rocmcheck smoke-train without "
                           "--deepspeed/--gpus): profiling a sharded step would profile the collectives of one rank",
                           id="train.kernels")
        if not self.cfg.profile:
            return skipped("profiling turned off", id="train.kernels")

        def profiled_step() -> None:  # forward + backward only: the optimizer state and the curve stay untouched
            strategy.forward_backward(0)
            strategy.zero_grad()

        on_gpu = self.device.type == "cuda"
        return kernels.check_kernels(kernels.profile_step(profiled_step, on_gpu), on_gpu, self.cfg.attn,
                                     self.attn_why)

    def _total_memory(self) -> int | None:
        if self.device.type == "cuda":
            return torch.cuda.get_device_properties(self.device).total_memory
        return total_memory()

    def _gather_rank_rows(self, phase: Phase, strategy) -> list[dict[str, Any]] | None:
        """Every rank's per-step global loss, local loss and grad norm (and weight sum), on every rank."""
        if not self.world.distributed:
            return None
        n = self.cfg.steps
        rows = torch.full((3, n + 1), float("nan"), dtype=torch.float64, device=self.device)
        for i, m in enumerate(phase.metrics):
            rows[0, i], rows[1, i], rows[2, i] = m["loss"], phase.local_losses[i], m["grad_norm"]
        checksum = strategy.weights_checksum()
        rows[0, n] = checksum if checksum is not None else float("nan")
        rows[1, n] = len(phase.metrics)
        out = []
        for p in (p.cpu() for p in distributed.gather_rows(rows)):
            steps = int(p[1, n].item())
            out.append({"global_loss": p[0, :steps].tolist(), "local_loss": p[1, :steps].tolist(),
                        "grad_norm": p[2, :steps].tolist(),
                        "weights": None if math.isnan(p[0, n].item()) else p[0, n].item()})
        return out

    # -- the report --------------------------------------------------------------------------------
    def _report(self, main: Phase, baseline: Phase | None = None, no_offload: Phase | None = None) -> RunReport:
        cfg, info = self.cfg, self.info
        if self.plan is not None:
            info["phases"] = {p.name: {k: v for k, v in p.info.items() if k not in ("results", "rank_rows")}
                              | {"losses": p.losses, "step_s": p.step_times, "stopped": p.stopped}
                              for p in (baseline, no_offload, main) if p is not None}
        info["loop_s"] = main.info["loop_s"]
        info["memory_kind"] = main.info["memory_kind"]
        info["stopped"] = main.stopped
        info["total_s"] = time.perf_counter() - self.t_start
        if not self.world.is_main:
            return RunReport([], main.metrics, info)
        norms = [m["grad_norm"] for m in main.metrics]
        nonfinite_at = len(main.metrics) - 1 if main.stopped and "non-finite" in main.stopped else None
        results = [self.fit_result, self.numerics_result, verdicts.check_finite(main.losses, norms, nonfinite_at)]
        if main.oom is not None:
            o = main.oom
            settings = (f"micro-batch {cfg.micro_batch}, seq-len {cfg.seq_len}, grad-accum {cfg.grad_accum}, "
                        f"checkpointing {'on' if cfg.gradient_checkpointing else 'off'}")
            if self.world.distributed:
                settings += f", ranks {self.world.world_size}"
            total = self._total_memory() if self.device.type == "cuda" else None
            results.append(verdicts.oom_result(o["step"], o["error_type"], o["error"], o["peak"], total,
                                               main.info["memory_kind"], settings))
        if main.finished:
            results += main.info.get("results", [])
        else:
            results += verdicts.stopped_results(main.stopped, JUDGED_AFTER_RUN if cfg.judged_on_task
                                                else JUDGED_AFTER_OWN_MODEL_RUN)
        if baseline is not None:
            why_not = None
            if self.plan.has_scheduler:
                why_not = (f"the config's own scheduler ({self.plan.config['scheduler'].get('type', '?')}) sets the "
                           "learning rate instead of the smoke-train's warmup + cosine, so the curves are not "
                           "comparable; remove \"scheduler\" from the config to compare")
            elif not baseline.finished:
                why_not = f"the plain run stopped: {baseline.stopped}"
            results.append(comparisons.check_deepspeed_parity(main.losses, baseline.losses, self.plan.label, why_not))
        if no_offload is not None:
            results.append(comparisons.check_offload_cost(main.step_times, no_offload.step_times, self.plan.label,
                                                          self.device.type == "cuda"))
        rank_rows = main.info.get("rank_rows")
        if rank_rows is not None:
            weights_known = all(r["weights"] is not None for r in rank_rows)
            results.append(comparisons.check_rank_agreement(rank_rows, weights_known))
        return RunReport(results, main.metrics, info)
