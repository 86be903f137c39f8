"""`rocmcheck plan`: will this fine-tune fit in GPU memory, and with what micro-batch? Parses options, calls the
planner (rocmcheck/plan), prints a table or JSON. torch is never imported here: --measure runs a child."""

from __future__ import annotations

from typing import Any

import click

from rocmcheck.commands.options import (
    MAX_BATCH,
    MAX_GPU_MEMORY_GIB,
    MAX_GPUS,
    MAX_SECONDS,
    MAX_SEQ_LEN,
    AttnChoice,
    BoundedInt,
    Command,
    FiniteFloat,
    alias,
    json_option,
)
from rocmcheck.errors import BadInput
from rocmcheck.plan.estimate import ADAPTER_DTYPES, LORA_TARGET_CHOICES, OPTIMIZERS, PLAN_ATTENTION, estimate_memory
from rocmcheck.result import CheckResult, exit_code, skipped
from rocmcheck.units import GIB, fmt_bytes

# The planner's own names for the attention kinds (rocmcheck/plan/estimate.py ATTENTIONS).


def _settings(opts: dict[str, Any]) -> dict[str, Any]:
    return {"micro_batch": opts["micro_batch"], "seq_len": opts["seq_len"],
            "precision": "pure-bf16" if opts["pure_bf16"] else "amp-bf16", "zero_stage": opts["zero"],
            "world_size": opts["gpus"], "offload_optimizer": opts["offload_optimizer"],
            "offload_params": opts["offload_params"], "gradient_checkpointing": opts["gradient_checkpointing"],
            "attention": PLAN_ATTENTION[opts["attn"]], "lora_rank": opts["lora_rank"],
            "grad_accumulation_steps": opts["grad_accum"],
            "optimizer": opts["optimizer"], "lora_target": opts["lora_target"], "lora_dropout": opts["lora_dropout"],
            "adapter_dtype": opts["adapter_dtype"], "autocast": not opts["no_autocast"], "qlora": opts["qlora"]}


def _render(est, results: list[CheckResult], gpu: tuple[str, float] | None, measured) -> None:
    from rich.table import Table
    from rich.text import Text

    from rocmcheck.report import render

    console = render.console()
    s = est.settings
    title = (f"{est.model.name}: {est.params:,} params, micro-batch {s['micro_batch']} x seq {s['seq_len']}, "
             f"{s['precision']}, ZeRO-{s['zero_stage']} x {s['world_size']} GPU(s)"
             + (", checkpointing" if s["gradient_checkpointing"] else "") + f", attn {s['attention']}"
             + (f", {'QLoRA' if s['qlora'] else 'LoRA'} r={s['lora_rank']} on {s['lora_target']} "
                f"({s['adapter_dtype']} adapters, {'autocast' if s['autocast'] else 'no autocast'}"
                + (f", dropout {s['lora_dropout']:g}" if s["lora_dropout"] else "") + ")" if s["lora_rank"] else ""))
    table = Table(title=title, title_justify="left")
    table.add_column("per GPU", no_wrap=True)
    table.add_column("at the peak", justify="right", no_wrap=True)
    table.add_column("largest in the step", justify="right", no_wrap=True)
    for line in est.lines:
        table.add_row(line.name, fmt_bytes(est.at_peak(line)), fmt_bytes(line.largest))
    table.add_row("runtime context", fmt_bytes(est.context_bytes), fmt_bytes(est.context_bytes))
    table.add_row(Text("total", style="bold"), Text(fmt_bytes(est.total_bytes), style="bold"), "")
    console.print(table)
    versus = f" of {fmt_bytes(gpu[1])} on {gpu[0]} ({est.total_bytes / gpu[1]:.0%})" if gpu else ""
    console.print(Text(f"peak at the {est.peak_phase.replace('_', ' ')}: {fmt_bytes(est.total_bytes)}{versus}",
                       style="bold"))
    for line in est.lines:
        # soft_wrap: the terminal wraps, rich inserts no newline, so a source URL stays whole to copy
        console.print(Text(f"  {line.name}: ", style="bold").append(line.formula).append(f"  [{line.source}]",
                                                                                         style="dim"), soft_wrap=True)
    console.print(Text("  runtime context: ", style="bold").append(
        "CUDA/HIP context and libraries, outside PyTorch's allocator (a rough constant)"))
    if est.host_bytes:
        console.print(f"host memory for offloaded states: {fmt_bytes(est.host_bytes)} per GPU")
    if measured is not None and measured.trials:
        mt = Table(title="measured (real steps on the GPU) vs estimate", title_justify="left")
        for col in ("micro-batch", "outcome", "allocated peak", "device peak", "estimate (allocated)"):
            mt.add_column(col, justify="right")
        for t in measured.trials:
            guess = estimate_memory(est.model, **{**s, "micro_batch": t.micro_batch}).allocated_peak_bytes
            mt.add_row(str(t.micro_batch), t.outcome, fmt_bytes(t.peak_allocated or 0), fmt_bytes(t.device_peak or 0),
                       fmt_bytes(guess))
        console.print(mt)
    render.print_report(results, console)


@click.command("plan", cls=Command)
@click.option("--model", "model_spec", required=True, metavar="PRESET|config.json|DIR",
              help="llama-2-7b, llama-3-8b, llama-3-70b, tinyllama-1.1b, a config.json or a model folder.")
@click.option("--seq-len", type=BoundedInt(1, MAX_SEQ_LEN), default=2048, show_default=True)
@click.option("--micro-batch", type=BoundedInt(1, MAX_BATCH), default=1, show_default=True, help="Per GPU.")
@click.option("--grad-accum", type=BoundedInt(1, MAX_BATCH), default=1, show_default=True,
              help="Gradient accumulation steps (>1 keeps the gradients through the forward).")
@click.option("--gpus", type=BoundedInt(1, MAX_GPUS), default=1, show_default=True, help="Data-parallel GPUs.")
@click.option("--gpu", "gpu_name", metavar="NAME", help="mi300x, mi325x, h200, h100, ...: its memory from the table.")
@alias("--world-size", "gpus", type=BoundedInt(1, MAX_GPUS))
@alias("--nproc", "gpus", type=BoundedInt(1, MAX_GPUS))
@click.option("--gpu-memory", type=FiniteFloat(0.0, MAX_GPU_MEMORY_GIB, low_open=True, unit="GiB"), metavar="GiB",
              help="Memory per GPU.")
@click.option("--zero", type=BoundedInt(0, 3), default=0, show_default=True, help="DeepSpeed ZeRO stage.")
@click.option("--offload-optimizer", is_flag=True, help="ZeRO: optimizer states in host memory.")
@click.option("--offload-params", is_flag=True, help="ZeRO-3: parameters in host memory.")
@click.option("--gradient-checkpointing", is_flag=True, help="Recompute each layer in backward.")
@click.option("--pure-bf16", is_flag=True, help="bf16 weights and Adam moments, no fp32 master copy (8 B/param).")
@click.option("--attn", type=AttnChoice(), default="sdpa", show_default=True,
              help="Attention kernel, by Hugging Face's names (flash is accepted for flash_attention_2).")
@click.option("--lora-rank", type=BoundedInt(1, MAX_BATCH), default=None,
              help="LoRA (peft) of this rank over a frozen bf16 base; also with --find-batch and --measure.")
@click.option("--lora-target", type=click.Choice(LORA_TARGET_CHOICES), default="all-linear", show_default=True,
              help='LoRA: target_modules="all-linear", or q_proj and v_proj (peft\'s choice for LLaMA by default).')
@click.option("--lora-dropout", type=FiniteFloat(0.0, 1.0, high_open=True), default=0.0, show_default=True,
              help="LoRA: lora_dropout (peft's default 0); above 0 each adapter keeps a dropout mask.")
@click.option("--adapter-dtype", type=click.Choice(ADAPTER_DTYPES), default="fp32", show_default=True,
              help="LoRA: adapter weights' dtype (peft casts them to fp32 unless autocast_adapter_dtype=False).")
@click.option("--no-autocast", is_flag=True,
              help="LoRA: the step runs without torch.autocast (HF Trainer with bf16=True uses it).")
@click.option("--qlora", is_flag=True, help="LoRA over a 4-bit base (bitsandbytes NF4, double quantization); "
              "modeled, not measured.")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="fused", show_default=True,
              help="AdamW implementation: foreach holds one more copy of the weights during the step.")
@click.option("--find-batch", is_flag=True, help="The largest micro-batch that fits (estimate).")
@click.option("--measure", is_flag=True, help="Find the largest micro-batch with real training steps on GPU 0.")
@click.option("--target", type=FiniteFloat(0.0, 1.0, low_open=True), default=None,
              help="Share of GPU memory the batch may use (default 0.9 for --find-batch, 0.95 for --measure).")
@click.option("--start-batch", type=BoundedInt(1, MAX_BATCH), default=None,
              help="--measure doubles from here instead of starting from the planner's answer.")
@click.option("--timeout", "timeout_s", type=FiniteFloat(10.0, MAX_SECONDS), default=600.0, show_default=True,
              help="--measure's time limit in seconds.")
@json_option()
def plan(**opts: Any) -> None:
    """Estimate per-GPU memory of a LLaMA fine-tune, say whether it fits, and what to change if not. Exit 0 when
    nothing failed, 1 when a verdict fails, 3 when nothing could be judged (no --gpu, and --measure found no GPU)."""
    from rocmcheck.plan.advice import batch_verdict, fit_verdict
    from rocmcheck.plan.devices import gpu_memory_by_name
    from rocmcheck.plan.shapes import load_model_shape

    if opts["gpu_name"] and opts["gpu_memory"]:
        raise BadInput("give --gpu or --gpu-memory, not both")
    try:
        model = load_model_shape(opts["model_spec"])
    except ValueError as exc:
        raise BadInput(f"--model: {exc}") from None
    gpu: tuple[str, float] | None = None
    if opts["gpu_name"]:
        try:
            gpu = gpu_memory_by_name(opts["gpu_name"])
        except ValueError as exc:
            raise BadInput(f"--gpu: {exc}") from None
    elif opts["gpu_memory"]:
        gpu = (f"a {opts['gpu_memory']:g} GiB GPU", opts["gpu_memory"] * GIB)
    settings = _settings(opts)
    try:
        est = estimate_memory(model, **settings)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if opts["find_batch"] and gpu is None:
        raise BadInput("--find-batch needs --gpu NAME or --gpu-memory GiB")
    if opts["measure"] and (opts["zero"] or opts["gpus"] > 1):
        raise BadInput("--measure runs a plain single-GPU training loop: drop --zero and --gpus")
    if opts["measure"] and opts["qlora"]:
        raise BadInput("--measure does not run QLoRA (a 4-bit base needs bitsandbytes): drop --qlora")
    if opts["lora_rank"] is None and (opts["qlora"] or opts["lora_target"] != "all-linear" or opts["lora_dropout"]
                                      or opts["adapter_dtype"] != "fp32" or opts["no_autocast"]):
        raise BadInput("--qlora, --lora-target, --lora-dropout, --adapter-dtype and --no-autocast need --lora-rank")

    results: list[CheckResult] = []
    if gpu:
        results.append(fit_verdict(est, gpu[1], gpu[0]))
    else:
        results.append(skipped("no verdict: give --gpu NAME or --gpu-memory GiB", id="plan.fit"))
    if opts["find_batch"]:
        results.append(batch_verdict(model, settings, gpu[1], gpu[0], opts["target"] or 0.9))
    measured = None
    if opts["measure"]:
        from rocmcheck.plan.measure import find_max_micro_batch, measured_verdict
        from rocmcheck.report import render
        from rocmcheck.report.progress import Progress

        con = render.console(stderr=True)
        with Progress(con, plain_after_s=2.0, prefix="plan ") as progress:
            progress.begin(f"measuring: real training steps on GPU 0 (up to {opts['timeout_s']:g} s)")
            measured = find_max_micro_batch(model, settings["seq_len"], opts["target"] or 0.95,
                                            precision=settings["precision"],
                                            gradient_checkpointing=settings["gradient_checkpointing"],
                                            attention=settings["attention"],
                                            grad_accumulation_steps=settings["grad_accumulation_steps"],
                                            lora_rank=settings["lora_rank"], lora_target=settings["lora_target"],
                                            lora_dropout=settings["lora_dropout"],
                                            adapter_dtype=settings["adapter_dtype"], autocast=settings["autocast"],
                                            start=opts["start_batch"], timeout_s=opts["timeout_s"])
        results.append(measured_verdict(measured))
    if opts["as_json"]:
        from rocmcheck.report.json_report import dumps, envelope

        payload = {"estimate": est.to_dict()}
        if measured is not None:
            payload["measured"] = measured.to_dict()
        click.echo(dumps(envelope("plan", results, **payload)))
    else:
        _render(est, results, gpu, measured)
    code = exit_code(results)
    if code:
        raise SystemExit(code)
