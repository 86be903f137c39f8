"""`rocmcheck smoke-train`: a short bf16 fine-tune of a real LLaMA that proves the stack end to end.
Only parses options and calls one function (rocmcheck.train.runner.smoke_train), which decides what to run once,
refuses bad input before torch is imported, runs it, shows it and returns the exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rocmcheck.commands.options import (
    MAX_BATCH,
    MAX_SECONDS,
    MAX_SEQ_LEN,
    AttnChoice,
    BoundedInt,
    Command,
    FiniteFloat,
    alias,
    json_option,
)
from rocmcheck.train.config import ATTN_CHOICES, BUNDLED_MODEL, TrainConfig
from rocmcheck.train.request import DEFAULT_TIMEOUT_S

DEFAULTS = TrainConfig()
# Upper bounds only; the lower ones are validate_numbers' and request.decide's, with their own messages.
MAX_STEPS = 10_000_000  # a smoke test is minutes; ten million steps is weeks on any GPU
MAX_LR = 10.0  # AdamW learning rates are below 1e-2; anything above 10 is a typo
MAX_LORA_RANK = 1 << 16  # LoRA ranks are 4-256; a rank above the widest hidden size is a typo
MAX_NPROC = 1024  # a typo bound; what this machine holds (one rank per GPU, or per core) is request.rank_problem's


@click.command("smoke-train", cls=Command)
@click.option("--model", "model", type=click.Path(path_type=Path), default=None,
              help="Local Hugging Face folder of any causal LM the installed transformers builds (default: the "
                   "bundled tiny LLaMA). Never downloads.")
@click.option("--steps", type=BoundedInt(high=MAX_STEPS), default=DEFAULTS.steps, show_default=True)
@click.option("--micro-batch", type=BoundedInt(high=MAX_BATCH), default=DEFAULTS.micro_batch, show_default=True)
@click.option("--grad-accum", type=BoundedInt(high=MAX_BATCH), default=DEFAULTS.grad_accum, show_default=True,
              help="Gradient accumulation steps.")
@click.option("--seq-len", type=BoundedInt(high=MAX_SEQ_LEN), default=DEFAULTS.seq_len, show_default=True)
@click.option("--lr", type=FiniteFloat(high=MAX_LR), default=None,
              help="Peak learning rate (warmup, then cosine decay). Default: 1e-3 for the bundled model; for --model "
                   "0.5/hidden_size (GPT-3's lr for that width; x10 with --lora-rank), at most 1e-3.")
@click.option("--pure-bf16", is_flag=True,
              help="bf16 weights and optimizer, no fp32 master copy (default: fp32 + bf16 autocast).")
@click.option("--gradient-checkpointing", is_flag=True)
@click.option("--lora-rank", type=BoundedInt(1, MAX_LORA_RANK), default=None,
              help="Train LoRA adapters of this rank (peft) on the model's own decoder Linear layers (not lm_head "
                   "or a router), the base model frozen in bf16.")
@click.option("--attn", type=AttnChoice(), default=DEFAULTS.attn, show_default=True,
              help=f"Attention kernel: {', '.join(ATTN_CHOICES)} (flash is accepted for flash_attention_2).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="cuda also means ROCm GPUs (PyTorch uses the same name).")
@click.option("--seed", type=BoundedInt(0, 2**32 - 1), default=DEFAULTS.seed, show_default=True)
@click.option("--compile", "compile_", is_flag=True,
              help="torch.compile the model (SDPA keeps its causal kernels: docs/smoke-train.md).")
@click.option("--no-profile", is_flag=True, help="Skip the one profiled step (kernel report).")
@click.option("--memory-snapshot", is_flag=True,
              help="Watch two steps with the leak finder: the allocations that survive a step, by Python line, and "
                   "(GPU) the allocator snapshot for PyTorch's memory visualizer, written into --out (else here).")
@click.option("--drift", is_flag=True,
              help="After the run, train the same steps again in fp32 (same weights, data, lr schedule) and compare "
                   "the loss and gradient-norm curves (train.drift). About doubles the training time.")
@click.option("-o", "--out", type=click.Path(path_type=Path), default=None,
              help="Write metrics.jsonl, report.json, loss_memory.png and the checkpoint here (a new or empty folder).")
@click.option("--force", is_flag=True, help="Use a non-empty --out folder: replace those four outputs there.")
@json_option("Print one JSON document (the envelope of docs/json-schema.md, with metrics and info).")
@click.option("--bench", is_flag=True, help="Benchmark the 1.1B LLaMA shape (random init): this loop vs HF Trainer.")
@click.option("--bench-shape", type=click.Choice(["1.1b", "tiny"]), default="1.1b", hidden=True,
              help="tiny: a CPU-sized shape, to test the benchmark code path.")
@click.option("--deepspeed", "deepspeed_config", type=click.Path(path_type=Path), default=None,
              help="Train through the DeepSpeed engine with this config (linted first; \"auto\" filled as the HF "
                   "Trainer does).")
@click.option("--gpus", "nproc", type=BoundedInt(1, MAX_NPROC), default=1, show_default=True,
              help="Ranks on this machine, launched with torchrun: one per visible GPU at most (with --device cpu: "
                   "gloo, one per core, 8 at most). See docs/distributed.md.")
@alias("--nproc", "nproc", type=BoundedInt(1, MAX_NPROC))
@alias("--world-size", "nproc", type=BoundedInt(1, MAX_NPROC))
@click.option("--timeout", "timeout_s", type=FiniteFloat(0, MAX_SECONDS, low_open=True), default=DEFAULT_TIMEOUT_S,
              show_default=True,
              help="Seconds the launched ranks may take, and the limit on any one collective.")
@click.option("--local_rank", "--local-rank", "local_rank", type=BoundedInt(0, MAX_NPROC), default=None, hidden=True,
              help="Passed by the DeepSpeed launcher; the rank comes from the environment.")
def smoke_train(model, steps, micro_batch, grad_accum, seq_len, lr, pure_bf16, gradient_checkpointing, lora_rank, attn,
                device, seed, compile_, no_profile, memory_snapshot, drift, out, force, as_json, bench, bench_shape,
                deepspeed_config, nproc, timeout_s, local_rank) -> None:
    """Fine-tune a LLaMA in bf16 for a short run and judge the whole stack."""
    from rocmcheck.train.runner import smoke_train as run_smoke_train

    cfg = TrainConfig(model=model or BUNDLED_MODEL, steps=steps, micro_batch=micro_batch, grad_accum=grad_accum,
                      seq_len=seq_len, lr=DEFAULTS.lr if lr is None else lr, pure_bf16=pure_bf16,
                      gradient_checkpointing=gradient_checkpointing, attn=attn, device=device, seed=seed,
                      compile=compile_, profile=not no_profile, memory_snapshot=memory_snapshot, out=out,
                      lora_rank=lora_rank, drift=drift)
    sys.exit(run_smoke_train(cfg, lr_given=lr is not None, bench=bench, bench_shape=bench_shape,
                             deepspeed=deepspeed_config, nproc=nproc, timeout_s=timeout_s, force=force,
                             as_json=as_json))
