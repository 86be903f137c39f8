"""The smoke-train run. Reads top to bottom like nanoGPT's train.py: load, data, optimizer, loop,
evaluate, save; then the verdicts."""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# Never reach the network: the model is local, and a hub lookup on a machine without egress hangs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Progress bars and info logs from transformers/hub would interleave with ours (and with --json).
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from rocmcheck.result import CheckResult, failed, skipped  # noqa: E402
from rocmcheck.train import data as data_mod  # noqa: E402
from rocmcheck.train import kernels, reference, task, verdicts  # noqa: E402
from rocmcheck.train.compiled import compile_model  # noqa: E402
from rocmcheck.train.config import TrainConfig  # noqa: E402
from rocmcheck.train.device import DeviceInfo, DeviceUnavailable, fused_adamw_ok, pick_device, synchronize  # noqa: E402
from rocmcheck.train.memory import MemorySampler, detect_leak  # noqa: E402
from rocmcheck.train.outputs import checkpoint_folder, publish_checkpoint  # noqa: E402


@dataclass
class RunHooks:
    """Ways for tests (and curious people) to reach into a real run."""

    on_model: Callable[[torch.nn.Module], None] | None = None  # e.g. register a forward hook
    on_step_end: Callable[[int, torch.Tensor], None] | None = None  # gets the step's loss tensor


@dataclass
class RunReport:
    results: list[CheckResult]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "results": [r.to_dict() for r in self.results], "metrics": self.metrics, "info": self.info}


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError covers CUDA and ROCm ("HIP out of memory"); older builds raised RuntimeError."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "DefaultCPUAllocator: not enough memory" in text)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay to lr * min_lr_ratio (nanoGPT's get_lr)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    min_lr = cfg.lr * cfg.min_lr_ratio
    return min_lr + 0.5 * (1 + math.cos(math.pi * min(1.0, progress))) * (cfg.lr - min_lr)


def quiet_libraries() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def load_model(path: Path, cfg: TrainConfig, device: torch.device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=torch.bfloat16 if cfg.pure_bf16 else torch.float32,
        attn_implementation=cfg.attn,
    ).to(device)
    return tokenizer, model


def flops_per_token(model, seq_len: int) -> float:
    """nanoGPT's estimate: 6N for the matmuls forward+backward plus 12*L*H*T for attention."""
    c = model.config
    n = sum(p.numel() for p in model.parameters())
    return 6 * n + 12 * c.num_hidden_layers * c.hidden_size * seq_len


@torch.no_grad()
def accuracy(model, tokenizer, examples: list[task.Example], device: torch.device, batch: int = 64) -> float:
    """Exact match of greedy generation on held-out prompts."""
    was_training = model.training
    model.eval()
    _, eos, pad = data_mod.special_ids(tokenizer)
    max_new = max(len(tokenizer.encode(e.response, add_special_tokens=False)) for e in examples) + 1
    correct = 0
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        ids, mask = data_mod.left_padded_prompts(tokenizer, chunk)
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new,
                             do_sample=False, pad_token_id=pad, eos_token_id=eos, use_cache=True)
        texts = tokenizer.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)
        correct += sum(task.exact_match(t, e) for t, e in zip(texts, chunk))
    model.train(was_training)
    return correct / len(examples)


@torch.no_grad()
def reload_diff(model, cfg: TrainConfig, save_dir: Path, batch: torch.Tensor) -> tuple[float, float, bool]:
    """Save, load back through from_pretrained, compare. Returns (max |logit diff| reloaded vs trained,
    the same between two forwards of the trained model, whether every weight came back bit for bit).

    The second number is the device's own run-to-run noise (0 on CPU and for deterministic GPU
    kernels); a reload is exact when its difference is no larger than that."""
    from transformers import AutoModelForCausalLM

    model.save_pretrained(save_dir, safe_serialization=True)
    again = AutoModelForCausalLM.from_pretrained(save_dir, local_files_only=True, dtype=next(model.parameters()).dtype,
                                                 attn_implementation=cfg.attn).to(batch.device)
    reloaded = again.state_dict()
    weights_equal = all(torch.equal(t, reloaded[k]) for k, t in model.state_dict().items() if k in reloaded)
    was_training = model.training
    model.eval()
    again.eval()
    first = model(input_ids=batch).logits.float()
    noise = (first - model(input_ids=batch).logits.float()).abs().max().item()
    diff = (first - again(input_ids=batch).logits.float()).abs().max().item()
    model.train(was_training)
    return diff, noise, weights_equal


def make_optimizer(model, cfg: TrainConfig, device: torch.device) -> tuple[torch.optim.Optimizer, bool]:
    fused = fused_adamw_ok(device, cfg.pure_bf16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay,
                                  fused=fused if fused else None)
    return optimizer, fused


def make_train_step(forward, model, cfg: TrainConfig, device: torch.device, micro_batch, on_loss=None):
    """Forward/backward over the accumulation micro-batches, then clip; returns (loss, grad_norm) tensors.

    Default: fp32 weights under bf16 autocast (what HF Trainer's bf16=True does); --pure-bf16: bf16
    weights, no autocast."""
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=not cfg.pure_bf16)

    def train_step(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        loss_sum = torch.zeros((), device=device)
        for micro in range(cfg.grad_accum):
            x, y = micro_batch(step, micro)
            with autocast:
                loss = forward(input_ids=x, labels=y).loss / cfg.grad_accum
            loss.backward()
            loss_sum += loss.detach()
            if on_loss:
                on_loss(step, loss)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        return loss_sum, grad_norm

    return train_step


def run_smoke_train(cfg: TrainConfig, hooks: RunHooks | None = None,
                    progress: Callable[[int, int, dict[str, Any]], None] | None = None) -> RunReport:
    hooks = hooks or RunHooks()
    quiet_libraries()
    t_start = time.perf_counter()
    info: dict[str, Any] = {"config": cfg.to_dict(), "torch": torch.__version__}

    # -- device ------------------------------------------------------------------------------
    try:
        dev: DeviceInfo = pick_device(cfg.device)
    except DeviceUnavailable as exc:
        return RunReport([failed(str(exc), "rocmcheck doctor   (then rerun with --device cpu)", id="train.device")], info=info)
    info["device"] = dev.to_dict()
    device = dev.device
    if device.type == "cuda" and not dev.bf16_supported:
        return RunReport([failed(f"{dev.name} has no bf16 support", "use a GPU with bf16 (MI200/MI300, A100, H100) or --device cpu", id="train.device")], info=info)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)

    # -- model and tokenizer (same path for the bundled model and a person's own) --------------
    try:
        tokenizer, model = load_model(Path(cfg.model), cfg, device)
    except ImportError as exc:  # flash_attention_2 without the flash_attn package, mostly
        return RunReport([failed(f"--attn {cfg.attn} is not usable: {str(exc).splitlines()[0][:200]}",
                                          "pip install flash-attn --no-build-isolation   (or run with --attn sdpa)", id="train.attn")], info=info)
    except (OSError, ValueError) as exc:
        return RunReport([failed(f"could not load {cfg.model}: {str(exc).splitlines()[0][:200]}",
                                          "check the folder holds a complete Hugging Face checkpoint (config.json, weights, tokenizer)", id="train.load")], info=info)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    if hooks.on_model:
        hooks.on_model(model)
    n_params = sum(p.numel() for p in model.parameters())
    info["model"] = {"path": str(cfg.model), "params": n_params, "model_type": model.config.model_type,
                     "attn_implementation": cfg.attn}

    # -- data ------------------------------------------------------------------------------
    eval_set = task.eval_examples(cfg.eval_prompts)
    rows_needed = cfg.steps * cfg.grad_accum * cfg.micro_batch
    # Upper bound on examples per row (all shortest), so packing never runs short of rows.
    per_row = data_mod.examples_per_row(tokenizer, task.make_example(task.FINETUNE_OP, "9" * task.MIN_DIGITS), cfg.seq_len)
    try:
        ids, labels = data_mod.pack_rows(tokenizer, task.train_examples(rows_needed * per_row + per_row, cfg.seed), cfg.seq_len)
    except ValueError as exc:
        return RunReport([failed(str(exc), f"rocmcheck smoke-train --seq-len {cfg.seq_len * 2}", id="train.data")], info=info)
    ids, labels = ids[:rows_needed].to(device), labels[:rows_needed].to(device)

    def micro_batch(step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = (step * cfg.grad_accum + micro) * cfg.micro_batch
        return ids[start:start + cfg.micro_batch], labels[start:start + cfg.micro_batch]

    # -- optimizer -------------------------------------------------------------------------
    optimizer, fused = make_optimizer(model, cfg, device)
    info["optimizer"] = {"name": "AdamW", "fused": fused}
    forward = compile_model(model, cfg.attn) if cfg.compile else model
    train_step = make_train_step(forward, model, cfg, device, micro_batch, hooks.on_step_end)

    accuracy_before = accuracy(model, tokenizer, eval_set, device)
    # -- the loop ----------------------------------------------------------------------------
    sampler = MemorySampler(device)
    metrics: list[dict[str, Any]] = []
    results: list[CheckResult] = []
    stopped: str | None = None
    t_loop = time.perf_counter()
    for step in range(cfg.steps):
        lr = lr_at(step, cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        sampler.start_step()
        t0 = time.perf_counter()
        try:
            loss, grad_norm = train_step(step)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss_v, norm_v = torch.stack([loss.float(), grad_norm.float()]).tolist()  # one sync per step
        except Exception as exc:  # noqa: BLE001 - only OOM is handled here; everything else propagates
            if not is_oom(exc):
                raise
            optimizer.zero_grad(set_to_none=True)
            mem = sampler.sample()
            total = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
            settings = f"micro-batch {cfg.micro_batch}, seq-len {cfg.seq_len}, grad-accum {cfg.grad_accum}, checkpointing {'on' if cfg.gradient_checkpointing else 'off'}"
            results.append(verdicts.oom_result(step, exc, mem.peak, total, sampler.kind, settings))
            stopped = f"out of memory at step {step}"
            break
        synchronize(device)
        dt = time.perf_counter() - t0
        mem = sampler.sample()
        row = {"step": step, "loss": loss_v, "grad_norm": norm_v, "lr": lr, "step_s": dt,
               "tokens": cfg.tokens_per_step, "tokens_per_s": cfg.tokens_per_step / dt,
               "mem_allocated": mem.allocated, "mem_reserved": mem.reserved, "mem_peak": mem.peak}
        metrics.append(row)
        if progress:
            progress(step + 1, cfg.steps, row)
        if not (math.isfinite(loss_v) and math.isfinite(norm_v)):
            stopped = f"non-finite loss/gradient at step {step}"
            break
    info["loop_s"] = time.perf_counter() - t_loop
    info["memory_kind"] = sampler.kind
    info["stopped"] = stopped
    losses = [m["loss"] for m in metrics]
    norms = [m["grad_norm"] for m in metrics]

    # -- verdicts on the run -------------------------------------------------------------------
    results.append(verdicts.check_finite(losses, norms, len(metrics) - 1 if stopped and "non-finite" in stopped else None))
    judged_later = ["train.loss_decrease", "train.task_accuracy", "train.reload", "train.reference_curve",
                    "train.memory_leak", "train.memory", "train.throughput", "train.kernels"]
    if stopped and len(metrics) < cfg.steps:
        results += verdicts.stopped_results(stopped, judged_later)
        info["total_s"] = time.perf_counter() - t_start
        return RunReport(results, metrics, info)

    results.append(verdicts.check_loss_decrease(losses, cfg.min_loss_drop))

    accuracy_after = accuracy(model, tokenizer, eval_set, device)
    info["accuracy"] = accuracy_after
    results.append(verdicts.check_accuracy(accuracy_before, accuracy_after, cfg.min_accuracy, len(eval_set)))

    try:
        with checkpoint_folder(cfg.out) as save_dir:  # a new folder: save_pretrained deletes shards it did not write
            results.append(verdicts.check_reload(*reload_diff(model, cfg, save_dir, ids[: min(4, len(ids))])))
            if cfg.out:
                publish_checkpoint(save_dir, Path(cfg.out))
    except OSError as exc:
        results.append(verdicts.check_reload(None, error=f"{type(exc).__name__}: {exc}"))

    curve, why_not = reference.find_reference(Path(cfg.model), dev.kind, cfg.reference_key())
    results.append(verdicts.check_reference_curve(losses, curve, why_not, dev.kind))

    baselines = [m["mem_allocated"] for m in metrics]
    decision = detect_leak(baselines, sampler.tolerance_bytes(baselines[min(2, len(baselines) - 1)]))
    results.append(verdicts.check_memory_leak(decision, sampler.kind, baselines))
    total_mem = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else _host_memory_bytes()
    results.append(verdicts.check_memory_headroom(max(m["mem_peak"] for m in metrics), total_mem, sampler.kind))

    results.append(verdicts.check_throughput([m["step_s"] for m in metrics], cfg.tokens_per_step,
                                             flops_per_token(model, cfg.seq_len), dev.peak_bf16_tflops, dev.peak_source,
                                             cfg.extra.get("min_mfu"), device.type == "cuda"))
    if cfg.profile:
        def profiled_step() -> None:  # forward + backward only: the optimizer state and the curve stay untouched
            train_step(0)
            optimizer.zero_grad(set_to_none=True)
        rows = kernels.profile_step(profiled_step, device.type == "cuda")
        results.append(kernels.check_kernels(rows, device.type == "cuda", cfg.attn))
    else:
        results.append(skipped("profiling turned off", id="train.kernels"))
    info["total_s"] = time.perf_counter() - t_start
    return RunReport(results, metrics, info)


def _host_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None
