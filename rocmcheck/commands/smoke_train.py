"""`rocmcheck smoke-train`: a short bf16 fine-tune of a real LLaMA that proves the stack end to end.
Only parses options and calls one function; torch is imported inside, after the input is validated."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from rocmcheck.commands.errors import BadInput
from rocmcheck.train.launch import prepare_parallel, world_size_from_env
from rocmcheck.train.config import (ATTN_CHOICES, BUNDLED_MODEL, TrainConfig, default_lr, validate_model_dir,
                                    validate_numbers, BadInput as InvalidTrainInput)

DEFAULTS = TrainConfig()


@click.command("smoke-train")
@click.option("--model", "model", type=click.Path(path_type=Path), default=None,
              help="Local Hugging Face LLaMA-family folder (default: the bundled tiny LLaMA). Never downloads.")
@click.option("--steps", type=int, default=DEFAULTS.steps, show_default=True)
@click.option("--micro-batch", type=int, default=DEFAULTS.micro_batch, show_default=True)
@click.option("--grad-accum", type=int, default=DEFAULTS.grad_accum, show_default=True, help="Gradient accumulation steps.")
@click.option("--seq-len", type=int, default=DEFAULTS.seq_len, show_default=True)
@click.option("--lr", type=float, default=None,
              help="Peak learning rate (warmup, then cosine decay). Default: 1e-3 for the bundled model; for --model "
                   "0.5/hidden_size (GPT-3's lr for that width; x10 with --lora-rank), at most 1e-3.")
@click.option("--pure-bf16", is_flag=True, help="bf16 weights and optimizer, no fp32 master copy (default: fp32 + bf16 autocast).")
@click.option("--gradient-checkpointing", is_flag=True)
@click.option("--lora-rank", type=int, default=None,
              help="Train LoRA adapters of this rank (peft) on every Linear layer, the base model frozen in bf16.")
@click.option("--attn", type=click.Choice(ATTN_CHOICES), default=DEFAULTS.attn, show_default=True)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="cuda also means ROCm GPUs (PyTorch uses the same name).")
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True)
@click.option("--compile", "compile_", is_flag=True,
              help="torch.compile the model (SDPA keeps its causal kernels: docs/smoke-train.md).")
@click.option("--no-profile", is_flag=True, help="Skip the one profiled step (kernel report).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write metrics.jsonl, report.json, loss_memory.png and the checkpoint here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: results, metrics, info.")
@click.option("--bench", is_flag=True, help="Benchmark the 1.1B LLaMA shape (random init): this loop vs HF Trainer.")
@click.option("--bench-shape", type=click.Choice(["1.1b", "tiny"]), default="1.1b", hidden=True,
              help="tiny: a CPU-sized shape, to test the benchmark code path.")
@click.option("--deepspeed", "deepspeed_config", type=click.Path(path_type=Path), default=None,
              help="Train through the DeepSpeed engine with this config (linted first; \"auto\" filled as the HF Trainer does).")
@click.option("--nproc", type=int, default=1, show_default=True,
              help="Ranks on this machine, launched with torchrun (one GPU each; gloo on CPU). See docs/distributed.md.")
@click.option("--timeout", "timeout_s", type=float, default=1800.0, show_default=True,
              help="Seconds the launched ranks may take, and the limit on any one collective.")
@click.option("--local_rank", "--local-rank", "local_rank", type=int, default=None, hidden=True,
              help="Passed by the DeepSpeed launcher; the rank comes from the environment.")
def smoke_train(model, steps, micro_batch, grad_accum, seq_len, lr, pure_bf16, gradient_checkpointing, lora_rank, attn,
                device, seed, compile_, no_profile, out, as_json, bench, bench_shape, deepspeed_config, nproc, timeout_s,
                local_rank) -> None:
    """Fine-tune a LLaMA in bf16 for a short run and judge the whole stack."""
    cfg = TrainConfig(model=model or BUNDLED_MODEL, steps=steps, micro_batch=micro_batch, grad_accum=grad_accum,
                      seq_len=seq_len, lr=DEFAULTS.lr if lr is None else lr, pure_bf16=pure_bf16, gradient_checkpointing=gradient_checkpointing,
                      attn=attn, device=device, seed=seed, compile=compile_, profile=not no_profile, out=out,
                      lora_rank=lora_rank)
    try:
        model_config = None if bench else validate_model_dir(cfg.model)
        if lr is None and model_config is not None:
            text_config = model_config.get("text_config") if isinstance(model_config.get("text_config"), dict) else {}
            cfg.lr = default_lr(cfg.is_bundled_model, lora_rank, model_config.get("hidden_size") or text_config.get("hidden_size"))
        validate_numbers(cfg)
        parallel = None
        if deepspeed_config is not None or nproc != 1 or world_size_from_env() > 1:
            if bench or pure_bf16 or compile_:
                raise BadInput("--deepspeed/--nproc cannot be combined with --bench, --pure-bf16 or --compile "
                               "(the DeepSpeed config's bf16 section sets the precision)")
            if deepspeed_config is not None and lora_rank:
                raise BadInput("--lora-rank runs without DeepSpeed here (plain or --nproc N); drop --deepspeed")
            parallel = prepare_parallel(cfg, deepspeed_config, nproc, timeout_s, model_config)
    except InvalidTrainInput as exc:
        raise BadInput(str(exc)) from None
    if out is not None and out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: exists and is not a directory")

    if parallel is not None:
        from rocmcheck.train.launch import run_parallel

        sys.exit(run_parallel(cfg, parallel, as_json=as_json))
    if bench and not any(v in os.environ for v in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")):
        # One GPU for both sides: in one process, HF Trainer wraps the model in nn.DataParallel over every visible
        # GPU (a doubled batch and a slower step), which would compare two different runs. Before torch loads.
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    from rocmcheck.train.runner import run_and_report  # imports torch

    sys.exit(run_and_report(cfg, as_json=as_json, bench=bench, bench_shape=bench_shape))


