"""The smoke-train through DeepSpeed and/or several ranks (one process per rank, started by torchrun,
the DeepSpeed launcher or `smoke-train --nproc`). Same data, schedule and verdicts as loop.py's run;
the global batch is micro-batch x accumulation x ranks, each rank reading its own slice.

With --deepspeed the run first trains the plain way (DDP when there are several ranks) for the
parity curve, and, for a config that offloads, the same config without offload for the step-time
baseline. Those runs keep only their loss and step times; the verdicts are on the DeepSpeed run.
"""

from __future__ import annotations

import gc
import math
import os
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocmcheck.train.distributed import World, bind_device, world_from_env
from rocmcheck.train.ds_config import DeepSpeedPlan

DEFAULT_PG_TIMEOUT_S = 600.0


@dataclass
class Phase:
    """One training run inside the process: its per-step rows, and what the verdicts need from it."""

    name: str
    metrics: list[dict[str, Any]] = field(default_factory=list)
    local_losses: list[float] = field(default_factory=list)
    stopped: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def losses(self) -> list[float]:
        return [m["loss"] for m in self.metrics]

    @property
    def step_times(self) -> list[float]:
        return [m["step_s"] for m in self.metrics]


class SetupFailed(Exception):
    """A run that cannot start for a reason a person can fix: carries the failed verdict."""

    def __init__(self, check_id: str, summary: str, fix: str) -> None:
        from rocmcheck.result import failed

        super().__init__(summary)
        self.result = failed(summary, fix, id=check_id)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def run_parallel_smoke_train(cfg, plan: DeepSpeedPlan | None = None, progress: Callable | None = None,
                             pg_timeout_s: float = DEFAULT_PG_TIMEOUT_S):
    """Every rank calls this; the RunReport that matters is rank 0's (other ranks return theirs too)."""
    # DeepSpeed calls the deprecated torch.distributed names once per step; a warning per step buries the report.
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please use `torch\.distributed\.", category=FutureWarning)
    world = world_from_env()
    if plan is not None and (cfg.device == "cpu" or not _cuda_available()):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before deepspeed is imported anywhere
    bind_device(world, cfg.device)
    return _Run(cfg, plan, world, progress, pg_timeout_s).run()


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


class _Run:
    def __init__(self, cfg, plan, world: World, progress, pg_timeout_s: float) -> None:
        import torch

        self.torch = torch
        self.cfg, self.plan, self.world, self.progress = cfg, plan, world, progress
        self.pg_timeout_s = pg_timeout_s
        self.info: dict[str, Any] = {"config": cfg.to_dict(), "torch": torch.__version__,
                                     "world": {"ranks": world.world_size, "rank": world.rank}}
        if plan is not None:
            self.info["deepspeed"] = plan.to_dict()

    # -- the run -------------------------------------------------------------------------------
    def run(self):
        from rocmcheck.result import failed
        from rocmcheck.train import distributed
        from rocmcheck.train.device import DeviceUnavailable, pick_device
        from rocmcheck.train.loop import RunReport, quiet_libraries

        quiet_libraries()
        t_start = time.perf_counter()
        try:
            self.dev = pick_device(self.cfg.device)
        except DeviceUnavailable as exc:
            return RunReport([failed(str(exc), "rocmcheck doctor   (then rerun with --device cpu)", id="train.device")], info=self.info)
        self.info["device"] = self.dev.to_dict()
        self.info["model"] = {"path": str(self.cfg.model), "attn_implementation": self.cfg.attn}
        torch = self.torch
        if self.dev.device.type == "cuda" and self.world.distributed:
            # torchrun says LOCAL_WORLD_SIZE, the DeepSpeed launcher LOCAL_SIZE; without either, trust the launcher.
            local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("LOCAL_SIZE") or 0)
            if torch.cuda.device_count() < local:
                return RunReport([failed(f"{local} ranks on this node but only {torch.cuda.device_count()} "
                                         "GPU(s) visible: two ranks would share a GPU",
                                         f"rocmcheck smoke-train --nproc {torch.cuda.device_count()}", id="train.device")], info=self.info)
        if self.plan is not None or self.world.distributed:
            self.info["backend"] = distributed.join(self.world, self.dev.device.type, self.plan is not None, self.pg_timeout_s)
        try:
            return self._run_phases(t_start)
        except SetupFailed as exc:
            return RunReport([exc.result], info=self.info)
        finally:
            distributed.leave()

    def _run_phases(self, t_start: float):
        from rocmcheck.train.ds_engine import DeepSpeedStrategy
        from rocmcheck.train.plain_strategy import PlainStrategy

        cfg, device = self.cfg, self.dev.device
        self._make_data()
        if self.plan is None:
            main = self._phase(PlainStrategy(cfg, device, self.world), full=True, accuracy_before=True)
            return self._report(main, None, None, t_start)
        plain = self._phase(PlainStrategy(cfg, device, self.world), full=False, accuracy_before=True)
        no_offload = None
        if self.plan.offloads:
            no_offload = self._phase(DeepSpeedStrategy(cfg, device, self.world, self.plan.without_offload()), full=False)
        main = self._phase(DeepSpeedStrategy(cfg, device, self.world, self.plan), full=True)
        return self._report(main, plain, no_offload, t_start)

    # -- data: loop.py's rows, W times as many, rank r reading every W-th micro-batch ------------
    def _make_data(self) -> None:
        from rocmcheck.train import data as data_mod
        from rocmcheck.train import task
        from transformers import AutoTokenizer

        cfg, world = self.cfg, self.world
        self.tokenizer = AutoTokenizer.from_pretrained(Path(cfg.model), local_files_only=True)
        rows_needed = cfg.steps * cfg.grad_accum * cfg.micro_batch * world.world_size
        per_row = data_mod.examples_per_row(self.tokenizer, task.make_example(task.FINETUNE_OP, "9" * task.MIN_DIGITS), cfg.seq_len)
        try:
            ids, labels = data_mod.pack_rows(self.tokenizer, task.train_examples(rows_needed * per_row + per_row, cfg.seed),
                                             cfg.seq_len)
        except ValueError as exc:
            raise SetupFailed("train.data", str(exc), f"rocmcheck smoke-train --seq-len {cfg.seq_len * 2}") from None
        self.ids, self.labels = ids[:rows_needed].to(self.dev.device), labels[:rows_needed].to(self.dev.device)
        self.eval_set = task.eval_examples(cfg.eval_prompts)

    def micro_batch(self, step: int, micro: int):
        mb, w = self.cfg.micro_batch, self.world
        start = ((step * self.cfg.grad_accum + micro) * w.world_size + w.rank) * mb
        return self.ids[start:start + mb], self.labels[start:start + mb]

    # -- one training run ------------------------------------------------------------------------
    def _phase(self, strategy, full: bool, accuracy_before: bool = False) -> Phase:
        from rocmcheck.train import distributed
        from rocmcheck.train.device import synchronize
        from rocmcheck.train.loop import accuracy, is_oom, lr_at
        from rocmcheck.train.memory import MemorySampler

        torch, cfg = self.torch, self.cfg
        phase = Phase(strategy.name)
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        model = self._build(strategy)
        phase.info["strategy"] = strategy.info
        if accuracy_before and self.world.is_main:
            self.accuracy_before = accuracy(model, self.tokenizer, self.eval_set, self.dev.device)
        sampler = MemorySampler(self.dev.device)
        t_loop = time.perf_counter()
        for step in range(cfg.steps):
            lr = strategy.set_lr(lr_at(step, cfg))
            sampler.start_step()
            t0 = time.perf_counter()
            try:
                loss, grad_norm = strategy.train_step(step)
                global_loss = distributed.mean_over_ranks(loss.float())
                local_v, loss_v, norm_v = torch.stack([loss.float(), global_loss, grad_norm.float()]).tolist()
            except Exception as exc:  # noqa: BLE001 - only OOM becomes a verdict here
                if not is_oom(exc):
                    raise
                strategy.zero_grad()
                phase.stopped = f"out of memory at step {step}"
                phase.info["oom"] = {"step": step, "error": str(exc).splitlines()[0][:300], "peak": sampler.sample().peak}
                break
            synchronize(self.dev.device)
            dt = time.perf_counter() - t0
            mem = sampler.sample()
            row = {"step": step, "loss": loss_v, "grad_norm": norm_v, "lr": lr, "step_s": dt,
                   "tokens": cfg.tokens_per_step * self.world.world_size,
                   "tokens_per_s": cfg.tokens_per_step * self.world.world_size / dt,
                   "mem_allocated": mem.allocated, "mem_reserved": mem.reserved, "mem_peak": mem.peak}
            phase.metrics.append(row)
            phase.local_losses.append(local_v)
            if full and self.progress:
                self.progress(step + 1, cfg.steps, row)
            if not (math.isfinite(loss_v) and math.isfinite(norm_v)):
                phase.stopped = f"non-finite loss/gradient at step {step}"
                break
        phase.info["loop_s"] = time.perf_counter() - t_loop
        phase.info["memory_kind"] = sampler.kind
        if full:
            self._judge(strategy, phase, model, sampler)
        strategy.close()
        del model, strategy
        gc.collect()
        if self.dev.device.type == "cuda":
            torch.cuda.empty_cache()
        return phase

    def _build(self, strategy):
        """Load the model and set up the strategy; what a person can fix becomes a failed verdict (as in loop.py)."""
        try:
            return strategy.build(self.micro_batch)
        except ImportError as exc:  # flash_attention_2 without flash_attn, mostly
            raise SetupFailed("train.attn", f"--attn {self.cfg.attn} is not usable: {_first_line(exc)}",
                              "pip install flash-attn --no-build-isolation   (or run with --attn sdpa)") from None
        except OSError as exc:
            raise SetupFailed("train.load", f"could not load {self.cfg.model}: {_first_line(exc)}",
                              "check the folder holds a complete Hugging Face checkpoint (config.json, weights, tokenizer)") from None
        except (ValueError, AssertionError) as exc:
            if self.plan is None:
                raise
            # DeepSpeed checks the rest of the config in deepspeed.initialize (asserts and ValueErrors).
            raise SetupFailed("train.deepspeed", f"deepspeed.initialize refused {self.plan.path}: {_first_line(exc)}",
                              f"rocmcheck lint {self.plan.path} --world-size {self.world.world_size} --micro-batch "
                              f"{self.cfg.micro_batch} --grad-accum {self.cfg.grad_accum}") from None

    # -- verdicts on the main run (collectives first, on every rank; then rank 0 alone) -----------
    def _judge(self, strategy, phase: Phase, model, sampler) -> None:
        from rocmcheck.result import skipped
        from rocmcheck.train import reference, verdicts
        from rocmcheck.train.loop import accuracy, flops_per_token, _host_memory_bytes
        from rocmcheck.train.memory import detect_leak

        torch, cfg, world = self.torch, self.cfg, self.world
        results = phase.info.setdefault("results", [])
        phase.info["rank_rows"] = self._gather_rank_rows(phase, strategy)
        finished = phase.stopped is None or len(phase.metrics) == cfg.steps
        if not finished:
            return
        # Collective: ZeRO-3 gathers its shards for both.
        batch = self.ids[: min(4, len(self.ids))]
        eval_model = strategy.eval_model()
        live = strategy.live_logits(batch)
        noise = (live - strategy.live_logits(batch)).abs().max().item()  # this device's run-to-run noise
        if not world.is_main:
            return
        losses = phase.losses
        results.append(verdicts.check_loss_decrease(losses, cfg.min_loss_drop))
        after = accuracy(eval_model, self.tokenizer, self.eval_set, self.dev.device)
        self.info["accuracy"] = after
        results.append(verdicts.check_accuracy(self.accuracy_before, after, cfg.min_accuracy, len(self.eval_set)))
        results.append(self._reload(eval_model, live, noise, batch))
        key = cfg.reference_key()
        if world.distributed:
            key["ranks"] = world.world_size  # a curve with a W-times larger global batch is another curve
        curve, why_not = reference.find_reference(Path(cfg.model), self.dev.kind, key)
        results.append(verdicts.check_reference_curve(losses, curve, why_not, self.dev.kind))
        baselines = [m["mem_allocated"] for m in phase.metrics]
        decision = detect_leak(baselines, sampler.tolerance_bytes(baselines[min(2, len(baselines) - 1)]))
        results.append(verdicts.check_memory_leak(decision, sampler.kind, baselines))
        total = (torch.cuda.get_device_properties(self.dev.device).total_memory if self.dev.device.type == "cuda"
                 else _host_memory_bytes())
        results.append(verdicts.check_memory_headroom(max(m["mem_peak"] for m in phase.metrics), total, sampler.kind))
        results.append(verdicts.check_throughput(phase.step_times, cfg.tokens_per_step * world.world_size,
                                                 flops_per_token(eval_model, cfg.seq_len) if eval_model is not None else 0.0,
                                                 self._peak_all_ranks(), self.dev.peak_source, cfg.extra.get("min_mfu"),
                                                 self.dev.device.type == "cuda"))
        results.append(skipped("the kernel report comes from the single-process plain run "
                               "(rocmcheck smoke-train without --deepspeed/--nproc): profiling a sharded step would "
                               "profile the collectives of one rank", id="train.kernels"))

    def _peak_all_ranks(self) -> float | None:
        peak = self.dev.peak_bf16_tflops
        return peak * self.world.world_size if peak else None

    def _reload(self, eval_model, live, noise: float, batch):
        """Save the trained weights as the Trainer would (ZeRO-3: the gathered 16-bit state), load them back
        with from_pretrained: the weights must come back bit for bit, and the logits must match the engine's
        own (live) logits within the device's run-to-run noise (loop.reload_diff's rule)."""
        from transformers import AutoModelForCausalLM

        from rocmcheck.train import verdicts
        from rocmcheck.train.outputs import checkpoint_folder, publish_checkpoint

        try:
            with checkpoint_folder(self.cfg.out) as save_dir:  # new: save_pretrained deletes shards it did not write
                eval_model.save_pretrained(save_dir, safe_serialization=True)
                if self.cfg.out:
                    publish_checkpoint(save_dir, Path(self.cfg.out))
                    save_dir = Path(self.cfg.out) / "checkpoint"
                again = AutoModelForCausalLM.from_pretrained(save_dir, local_files_only=True,
                                                             dtype=next(eval_model.parameters()).dtype,
                                                             attn_implementation=self.cfg.attn).to(batch.device).eval()
                reloaded = again.state_dict()
                weights_equal = all(self.torch.equal(t, reloaded[k]) for k, t in eval_model.state_dict().items()
                                    if k in reloaded)
                with self.torch.no_grad():
                    diff = (again(input_ids=batch).logits.float() - live).abs().max().item()
                dtype = next(eval_model.parameters()).dtype
                if dtype in (self.torch.bfloat16, self.torch.float16):
                    # The engine's module (ZeRO hooks, gathered parameters) and a plain HF model with the same
                    # 16-bit weights may pick different GEMM/attention kernels: their 16-bit logits then differ
                    # by a few units in the last place (bf16: 2^-7 of the magnitude; seen on an H200 with
                    # ZeRO-3 + offload: max |diff| 0.28). A wrong checkpoint differs by far more; the weights
                    # themselves are still compared bit for bit.
                    ulps = 4 * self.torch.finfo(dtype).eps * live.abs().max().item()
                    return verdicts.check_reload(diff, max(noise, ulps), weights_equal,
                                                 bound_label=f"4 {dtype} ulps of the largest logit")
                return verdicts.check_reload(diff, noise, weights_equal)
        except OSError as exc:
            return verdicts.check_reload(None, error=f"{type(exc).__name__}: {exc}")

    def _gather_rank_rows(self, phase: Phase, strategy) -> list[dict[str, Any]] | None:
        """Every rank's per-step global loss, local loss and grad norm (and weight sum), on every rank."""
        from rocmcheck.train import distributed

        torch = self.torch
        if not self.world.distributed:
            return None
        n = self.cfg.steps
        rows = torch.full((3, n + 1), float("nan"), dtype=torch.float64, device=self.dev.device)
        for i, m in enumerate(phase.metrics):
            rows[0, i], rows[1, i], rows[2, i] = m["loss"], phase.local_losses[i], m["grad_norm"]
        checksum = strategy.weights_checksum()
        rows[0, n] = checksum if checksum is not None else float("nan")
        rows[1, n] = len(phase.metrics)
        parts = [p.cpu() for p in distributed.gather_rows(rows)]
        out = []
        for p in parts:
            steps = int(p[1, n].item())
            out.append({"global_loss": p[0, :steps].tolist(), "local_loss": p[1, :steps].tolist(),
                        "grad_norm": p[2, :steps].tolist(),
                        "weights": None if math.isnan(p[0, n].item()) else p[0, n].item()})
        return out

    # -- the report ------------------------------------------------------------------------------
    def _report(self, main: Phase, plain: Phase | None, no_offload: Phase | None, t_start: float):
        from rocmcheck.train import parallel_verdicts as pv
        from rocmcheck.train import verdicts
        from rocmcheck.train.loop import RunReport

        cfg = self.cfg
        self.info["phases"] = {p.name: {k: v for k, v in p.info.items() if k not in ("results", "rank_rows")}
                               | {"losses": p.losses, "step_s": p.step_times, "stopped": p.stopped}
                               for p in (plain, no_offload, main) if p is not None}
        self.info["stopped"] = main.stopped
        self.info["memory_kind"] = main.info.get("memory_kind")
        self.info["loop_s"] = main.info.get("loop_s")
        self.info["total_s"] = time.perf_counter() - t_start
        if not self.world.is_main:
            return RunReport([], main.metrics, self.info)
        norms = [m["grad_norm"] for m in main.metrics]
        results = [verdicts.check_finite(main.losses, norms, len(main.metrics) - 1
                                         if main.stopped and "non-finite" in main.stopped else None)]
        if "oom" in main.info:
            o = main.info["oom"]
            results.append(verdicts.oom_result(o["step"], RuntimeError(o["error"]), o["peak"], None,
                                               main.info.get("memory_kind", ""), f"micro-batch {cfg.micro_batch}, "
                                               f"seq-len {cfg.seq_len}, grad-accum {cfg.grad_accum}, ranks {self.world.world_size}"))
        if main.stopped and len(main.metrics) < cfg.steps:
            later = ["train.loss_decrease", "train.task_accuracy", "train.reload", "train.reference_curve",
                     "train.memory_leak", "train.memory", "train.throughput", "train.kernels"]
            results += verdicts.stopped_results(main.stopped, later)
        else:
            results += main.info.get("results", [])
        if plain is not None:
            why_not = None
            if self.plan.has_scheduler:
                why_not = (f"the config's own scheduler ({self.plan.config['scheduler'].get('type', '?')}) sets the learning "
                           "rate instead of the smoke-train's warmup + cosine, so the curves are not comparable; "
                           "remove \"scheduler\" from the config to compare")
            elif plain.stopped and len(plain.metrics) < cfg.steps:
                why_not = f"the plain run stopped: {plain.stopped}"
            results.append(pv.check_deepspeed_parity(main.losses, plain.losses, self.plan.label, why_not))
        if no_offload is not None:
            results.append(pv.check_offload_cost(main.step_times, no_offload.step_times, self.plan.label,
                                                 self.dev.device.type == "cuda"))
        rank_rows = main.info.get("rank_rows")
        if rank_rows is not None:
            results.append(pv.check_rank_agreement(rank_rows, all(r["weights"] is not None for r in rank_rows)))
        return RunReport(results, main.metrics, self.info)
