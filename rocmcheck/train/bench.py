"""`smoke-train --bench`: the 1.1B LLaMA shape (random init, no download), the smoke-train's own loop
(run.train_steps with the plain strategy) vs HF Trainer in the same process with identical settings (AdamW
fused, same lr schedule, clipping, bf16, checkpointing), then the loop under torch.compile. Tokens/s and MFU
side by side; the loss curves must agree (comparisons.bench_verdicts)."""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import replace
from typing import Any, Callable

import torch

from rocmcheck.result import skipped
from rocmcheck.safe.scratch_folders import scratch_folder
from rocmcheck.train import modeling
from rocmcheck.train.comparisons import bench_verdicts
from rocmcheck.train.config import ADAM_BETAS, ADAM_EPS, TrainConfig
from rocmcheck.train.device import pick_device, synchronize
from rocmcheck.train.distributed import World
from rocmcheck.train.plain_strategy import PlainStrategy
from rocmcheck.train.report import RunReport, first_line
from rocmcheck.train.run import train_steps

SHAPES = {
    # The TinyLlama-1.1B shape; its H200 numbers are in benchmarks/RESULTS.md.
    "1.1b": dict(hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                 intermediate_size=5632, vocab_size=32000, seq_len=2048, micro_batch=4, steps=30),
    # CPU-sized, only to exercise this code path in tests.
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=256, seq_len=64, micro_batch=2, steps=12),
}
WARMUP_STEPS_EXCLUDED = 5  # first steps pay for allocator growth, cuBLAS heuristics, compilation


def _model(shape: dict[str, Any], cfg: TrainConfig, device: torch.device):
    from transformers import LlamaConfig, LlamaForCausalLM

    conf = LlamaConfig(**{k: v for k, v in shape.items() if k not in ("seq_len", "micro_batch", "steps")},
                       max_position_embeddings=shape["seq_len"], tie_word_embeddings=False)
    conf._attn_implementation = cfg.attn
    torch.manual_seed(cfg.seed)
    with torch.device(device):
        model = LlamaForCausalLM(conf)
    if cfg.pure_bf16:
        model = model.to(torch.bfloat16)
    return model


def _data(shape: dict[str, Any], cfg: TrainConfig, device: torch.device) -> torch.Tensor:
    """Learnable rows (arithmetic progressions mod vocab, random start and stride), so the loss falls
    and the loop-vs-Trainer loss comparison means something; random tokens would sit at ln(vocab)."""
    g = torch.Generator().manual_seed(cfg.seed)
    rows = shape["steps"] * cfg.grad_accum * shape["micro_batch"]
    start = torch.randint(0, shape["vocab_size"], (rows, 1), generator=g)
    stride = torch.randint(1, 8, (rows, 1), generator=g)
    return ((start + stride * torch.arange(shape["seq_len"])) % shape["vocab_size"]).to(device)


def _free(device: torch.device) -> None:
    torch._dynamo.reset()  # compiled graphs hold the model's parameters
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def bench_loop(shape, cfg: TrainConfig, device, compile_: bool) -> dict[str, Any]:
    """The smoke-train's loop on the random-init shape: the same strategy and steps as a real run."""
    data = _data(shape, cfg, device)
    mb = shape["micro_batch"]

    def batch(step: int, micro: int):
        x = data[(step * cfg.grad_accum + micro) * mb:][:mb]
        return x, x

    strategy = PlainStrategy(replace(cfg, compile=compile_), device, World(0, 1, 0), model=_model(shape, cfg, device))
    model = strategy.build(batch)
    phase = train_steps(strategy, strategy.cfg, device)
    out = {"step_times": phase.step_times, "losses": phase.losses, "fused_adamw": strategy.info["fused"],
           "peak_gib": _peak(device), "flops_per_token": modeling.flops_per_token(model, shape["seq_len"])}
    strategy.close()
    del model, strategy
    _free(device)
    return out


def bench_trainer(shape, cfg: TrainConfig, device) -> dict[str, Any]:
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

    model = modeling.prepare_for_training(_model(shape, cfg, device), cfg.gradient_checkpointing)
    data = _data(shape, cfg, device).cpu()

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            return {"input_ids": data[i], "labels": data[i]}

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []
            self._t = 0.0

        def on_step_begin(self, args, state, control, **kw):
            synchronize(device)
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            synchronize(device)
            self.times.append(time.perf_counter() - self._t)

    timer = StepTimer()
    with scratch_folder("bench") as tmp:
        args = TrainingArguments(
            output_dir=str(tmp), max_steps=shape["steps"], per_device_train_batch_size=shape["micro_batch"],
            gradient_accumulation_steps=cfg.grad_accum, learning_rate=cfg.lr, lr_scheduler_type="cosine",
            warmup_steps=cfg.warmup_steps, weight_decay=cfg.weight_decay, adam_beta1=ADAM_BETAS[0],
            adam_beta2=ADAM_BETAS[1], adam_epsilon=ADAM_EPS,
            max_grad_norm=cfg.grad_clip, bf16=not cfg.pure_bf16, logging_steps=1, save_strategy="no", report_to=[],
            dataloader_num_workers=0, disable_tqdm=True, seed=cfg.seed, use_cpu=device.type == "cpu",
            optim="adamw_torch_fused" if device.type == "cuda" else "adamw_torch",
            # gradient checkpointing: already enabled on the model, with the same kwargs as the loop
        )
        class InOrderTrainer(Trainer):  # the loop reads rows in order; so must the Trainer
            def _get_train_sampler(self, *args, **kwargs):
                return torch.utils.data.SequentialSampler(self.train_dataset)

        trainer = InOrderTrainer(model=model, args=args, train_dataset=Rows(), callbacks=[timer])
        trainer.remove_callback(PrinterCallback)  # it prints every log dict to stdout, which --json owns
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    out = {"step_times": timer.times, "losses": losses, "peak_gib": _peak(device),
           "flops_per_token": modeling.flops_per_token(model, shape["seq_len"])}
    del model, trainer
    _free(device)
    return out


def summarize(name: str, run: dict[str, Any], tokens_per_step: int, peak_tflops: float | None) -> dict[str, Any]:
    steady = run["step_times"][WARMUP_STEPS_EXCLUDED:] or run["step_times"]
    step_s = statistics.median(steady)
    tok_s = tokens_per_step / step_s
    mfu = run["flops_per_token"] * tok_s / (peak_tflops * 1e12) if peak_tflops else None
    return {"mode": name, "step_s": step_s, "tokens_per_s": tok_s, "mfu": mfu, "peak_gib": run["peak_gib"],
            "first_loss": run["losses"][0] if run["losses"] else None,
            "last_loss": run["losses"][-1] if run["losses"] else None,
            "compile_overhead_s": sum(run["step_times"][:WARMUP_STEPS_EXCLUDED]) - WARMUP_STEPS_EXCLUDED * step_s}


ALL_MODES = ("loop", "hf_trainer", "loop_compile")


def run_bench(cfg: TrainConfig, shape: str = "1.1b", log: Callable[[str], None] | None = None,
              modes: tuple[str, ...] = ALL_MODES) -> RunReport:
    log = log or (lambda line: None)
    modeling.offline_and_quiet()
    dev = pick_device(cfg.device)
    info: dict[str, Any] = {"config": cfg.to_dict(), "device": dev.to_dict(), "shape": shape}
    if shape == "1.1b" and dev.device.type != "cuda":
        return RunReport([skipped("the 1.1B benchmark needs a GPU (about 40 GiB at seq 2048, micro-batch 4)",
                                  id="train.bench")], info=info)
    sh = dict(SHAPES[shape])
    bcfg = replace(cfg, seq_len=sh["seq_len"], micro_batch=sh["micro_batch"], steps=sh["steps"], lr=3e-4,
                   warmup_steps=3, min_lr_ratio=0.0)  # Trainer's cosine decays to 0
    tokens = bcfg.tokens_per_step
    info["settings"] = {k: getattr(bcfg, k) for k in ("seq_len", "micro_batch", "grad_accum", "steps", "lr",
                                                     "pure_bf16", "gradient_checkpointing", "attn")}
    rows, runs = [], {}
    for name, fn in (("loop", lambda: bench_loop(sh, bcfg, dev.device, False)),
                     ("hf_trainer", lambda: bench_trainer(sh, bcfg, dev.device)),
                     ("loop_compile", lambda: bench_loop(sh, bcfg, dev.device, True))):
        if name not in modes:
            continue
        log(f"bench: {name} ...")
        try:
            runs[name] = fn()
        except Exception as exc:  # noqa: BLE001 - one mode failing (compile on an odd stack) is a finding
            rows.append({"mode": name, "error": f"{type(exc).__name__}: {first_line(exc)}"})
            _free(dev.device)
            continue
        rows.append(summarize(name, runs[name], tokens, dev.peak_bf16_tflops))
        log(f"bench: {name}: {rows[-1]['tokens_per_s']:,.0f} tok/s")
    info["bench"] = rows
    return RunReport(bench_verdicts(rows, runs), info=info)
