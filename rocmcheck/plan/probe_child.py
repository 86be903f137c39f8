"""The GPU batch finder's child: `python -m rocmcheck.plan.probe_child --request JSON`.

Builds transformers' LlamaForCausalLM from a shape (random init, nothing downloaded), then searches the largest
micro-batch whose real forward + backward + AdamW steps peak within target_fraction of the GPU's memory.
An out-of-memory is caught by type (torch.OutOfMemoryError: "CUDA out of memory" and ROCm's "HIP out of memory"
alike), everything the try held is freed, and the search goes on. Its events (rocmcheck/child.py):
  {"event": "device", "available", "reason", "torch", "hip", "cuda", "count", "devices"}  (torch's GPUs as
      rocmcheck.facts.torch_devices describes them)
  {"event": "guess", "micro_batch": b}   (the planner's answer, the first try, when no start was given)
  {"event": "start", "micro_batch": b}    {"event": "trial", ...Trial}    (per try)
  {"event": "result", "best", "stop", "total_bytes", "budget_bytes", "outside_bytes"}    {"event": "done"}

Test mode (plan "cpu_ceiling_bytes"): runs on the CPU, where there is no device allocator to read. The bytes
autograd saves are counted by a saved-tensor hook on top of the model states, and past the ceiling the hook
raises a real torch.OutOfMemoryError, so the catching, freeing, doubling and bisection run exactly as on a GPU."""

from __future__ import annotations

import gc
import time
from typing import Any

from rocmcheck.child import Channel, leave, open_channel, read_request, watchdog
from rocmcheck.facts.torch_devices import describe_devices
from rocmcheck.plan.estimate import ATTN_IMPLEMENTATION
from rocmcheck.plan.search import Trial, search_from_estimate, search_max_batch

CPU_DEVICE = {"index": 0, "name": "CPU (test mode)", "arch": "", "total_bytes": 0}


def start_torch(channel: Channel, cpu: bool) -> Any:
    """Import torch and send the "device" event (GPU 0 is the one measured). None, after a "done" event, when
    torch cannot be imported or sees no GPU: the batch finder has nothing to measure."""
    try:
        import torch
    except Exception as exc:
        channel.emit("device", available=False, reason=f"torch cannot be imported: {type(exc).__name__}: {exc}")
        channel.emit("done")
        return None
    devices = [dict(CPU_DEVICE)] if cpu else describe_devices(torch)
    build = (f"HIP {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}" if torch.version.cuda
             else "a CPU-only build")
    channel.emit("device", available=bool(devices), torch=torch.__version__, hip=torch.version.hip,
                 cuda=torch.version.cuda, count=len(devices), devices=devices,
                 reason="" if devices else f"no GPU visible to torch {torch.__version__} ({build})")
    if not devices:
        channel.emit("done")
        return None
    return torch


class CeilingTracker:
    """CPU test mode: model states + saved activations against a byte ceiling."""

    def __init__(self, torch, ceiling: int, base: int, param_ptrs: set[int]):
        self.torch, self.ceiling, self.base, self.param_ptrs = torch, ceiling, base, param_ptrs
        self.seen: set[int] = set()
        self.held = 0
        self.peak = base

    def reset(self) -> None:
        self.seen.clear()
        self.held = 0

    def pack(self, t):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in self.seen and key not in self.param_ptrs:
            self.seen.add(key)
            self.held += storage.nbytes()
            now = self.base + self.held
            self.peak = max(self.peak, now)
            if now > self.ceiling:
                raise self.torch.OutOfMemoryError(f"CPU test ceiling: {now} bytes held, ceiling {self.ceiling}")
        return t


def oom_type(torch):
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def build_model(torch, plan: dict[str, Any], device):
    """LlamaForCausalLM from the shape; with lora_rank, loaded in bf16 and wrapped by peft as people run it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**plan["config"], attn_implementation=ATTN_IMPLEMENTATION[plan.get("attention", "sdpa")],
                         use_cache=False)
    torch.manual_seed(0)
    lora = plan.get("lora_rank") is not None
    default_dtype = torch.get_default_dtype()
    if lora:  # the base as from_pretrained(dtype=torch.bfloat16) gives it, without an fp32 copy first
        torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):  # initialise on the GPU directly: a 7B fp32 init on the CPU takes minutes
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    if plan.get("precision") == "pure-bf16" and not lora:
        model = model.to(torch.bfloat16)
    if lora:
        from peft import LoraConfig, get_peft_model

        target = plan.get("lora_target", "all-linear")
        lora_config = LoraConfig(r=int(plan["lora_rank"]), lora_alpha=2 * int(plan["lora_rank"]),
                                 lora_dropout=float(plan.get("lora_dropout", 0.0)), task_type="CAUSAL_LM",
                                 target_modules="all-linear" if target == "all-linear" else ["q_proj", "v_proj"])
        model = get_peft_model(model, lora_config, autocast_adapter_dtype=plan.get("adapter_dtype", "fp32") == "fp32")
    if plan.get("gradient_checkpointing"):
        model.gradient_checkpointing_enable()
        if lora:  # as HF Trainer and peft do: the frozen embedding's output must carry grad into the checkpoints
            model.enable_input_require_grads()
    model.train()
    return model


def uses_autocast(plan: dict[str, Any]) -> bool:
    """Full fine-tune: autocast over fp32 weights unless pure bf16. LoRA: the autocast setting."""
    if plan.get("lora_rank") is not None:
        return bool(plan.get("autocast", True)) and plan.get("precision") != "pure-bf16"
    return plan.get("precision", "amp-bf16") == "amp-bf16"


def run_steps(torch, model, device, b: int, plan: dict[str, Any], tracker: CeilingTracker | None) -> None:
    """`steps` optimizer steps of `grad_accumulation_steps` micro-batches each: the second step runs with the
    optimizer states already allocated, as every later step of a real run does."""
    amp = uses_autocast(plan)
    accum = int(plan.get("grad_accumulation_steps", 1))
    vocab, seq = model.config.vocab_size, int(plan["seq_len"])
    fused = device.type == "cuda"
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5, fused=fused, foreach=False if not fused else None)
    try:
        for _ in range(int(plan.get("steps", 2))):
            for _ in range(accum):
                ids = torch.randint(0, vocab, (b, seq), device=device)
                if tracker:
                    tracker.reset()
                hooks = (torch.autograd.graph.saved_tensors_hooks(tracker.pack, lambda t: t) if tracker
                         else _nullcontext())
                with hooks, torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                    loss = model(input_ids=ids, labels=ids).loss
                (loss / accum).backward()
                del loss, ids
            opt.step()
            opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
    finally:
        opt.zero_grad(set_to_none=True)
        del opt


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def state_bytes(model) -> int:
    """Trainable weights + gradients + two AdamW moments in their dtype, and the frozen weights (CPU test mode's
    fixed part)."""
    return sum((4 if p.requires_grad else 1) * p.numel() * p.element_size() for p in model.parameters())


def free(torch, model, device) -> None:
    model.zero_grad(set_to_none=True)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def make_try(torch, model, device, plan: dict[str, Any], budget: float, outside: int,
             tracker: CeilingTracker | None, channel: Channel):
    oom = oom_type(torch)
    trial_timeout = float(plan.get("trial_timeout_s", 300))

    def try_batch(b: int) -> Trial:
        channel.emit("start", micro_batch=b)
        free(torch, model, device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        if tracker:
            tracker.peak = tracker.base
        t0 = time.perf_counter()
        error, ran, other = None, False, False
        with watchdog(trial_timeout):
            try:
                run_steps(torch, model, device, b, plan, tracker)
                ran = True
            except oom as exc:  # by type: CUDA's and HIP's messages differ, the class does not
                error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
            except Exception as exc:  # not memory: stop the search and say what it was
                error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
                other = True
        if other:
            free(torch, model, device)
            return Trial(b, "error", seconds=round(time.perf_counter() - t0, 3), error=error)
        # Out of the except block, the traceback (and the activations its frames held) is gone: free it all.
        free(torch, model, device)
        if tracker:
            allocated = reserved = device_peak = tracker.peak
        else:
            allocated = torch.cuda.max_memory_allocated(device)
            reserved = torch.cuda.max_memory_reserved(device)
            device_peak = reserved + outside
        if not ran:
            return Trial(b, "oom", allocated, reserved, device_peak, round(time.perf_counter() - t0, 3), error)
        outcome = "ok" if device_peak <= budget else "over"
        return Trial(b, outcome, allocated, reserved, device_peak, round(time.perf_counter() - t0, 3))

    return try_batch


ESTIMATE_KEYS = ("precision", "gradient_checkpointing", "attention", "grad_accumulation_steps", "lora_rank",
                 "lora_target", "lora_dropout", "adapter_dtype", "autocast")


def planner(plan: dict[str, Any], total: float, target: float, outside: int):
    """(the planner's largest micro-batch on this device, b -> its predicted device peak). Torch-free."""
    from rocmcheck.plan.estimate import CONTEXT_BYTES, estimate_memory, largest_micro_batch
    from rocmcheck.plan.shapes import shape_from_config

    shape = shape_from_config(plan["config"], name="plan")
    settings = {k: plan[k] for k in ESTIMATE_KEYS if k in plan}
    seq, cap = int(plan["seq_len"]), int(plan.get("max_micro_batch", 1024))
    extra = outside - CONTEXT_BYTES  # what this device holds outside PyTorch, in place of the estimate's 1 GiB

    def predict(b: int) -> float:
        return estimate_memory(shape, micro_batch=b, seq_len=seq, **settings).total_bytes + extra

    guess = largest_micro_batch(shape, gpu_memory_bytes=(target * total - extra) / target, target_fraction=target,
                                max_micro_batch=cap, seq_len=seq, **settings)
    return max(1, guess), predict


def main(argv: list[str] | None = None) -> int:
    """Request: config, seq_len, precision, target_fraction, start, max_micro_batch, max_trials,
    cpu_ceiling_bytes, init_timeout_s, trial_timeout_s and the training settings."""
    plan = read_request(argv, prog="python -m rocmcheck.plan.probe_child")
    channel = open_channel()
    with watchdog(float(plan.get("init_timeout_s", 120))):
        ceiling = plan.get("cpu_ceiling_bytes")
        cpu = ceiling is not None
        torch = start_torch(channel, cpu)
        if torch is None:
            return 0
        device = torch.device("cpu") if cpu else torch.device("cuda", 0)
        model = build_model(torch, plan, device)
        target = float(plan.get("target_fraction", 0.95))
        tracker = None
        if cpu:
            total, outside = int(ceiling), 0
            params = {p.untyped_storage().data_ptr() for p in model.parameters()}
            tracker = CeilingTracker(torch, total, state_bytes(model), params)
        else:
            free_b, total = torch.cuda.mem_get_info(device)
            outside = max(0, total - free_b - torch.cuda.memory_reserved(device))  # context, other processes
    budget = target * total
    try_batch = make_try(torch, model, device, plan, budget, outside, tracker, channel)
    cap, max_trials = int(plan.get("max_micro_batch", 1024)), int(plan.get("max_trials", 25))
    emit_trial = lambda t: channel.emit("trial", **t.to_dict())  # noqa: E731
    if plan.get("start") is not None:  # a given start: double from there, then bisect
        outcome = search_max_batch(try_batch, start=int(plan["start"]), max_micro_batch=cap, max_trials=max_trials,
                                   on_trial=emit_trial)
    else:  # the planner's answer first, then around it
        guess, predict = planner(plan, total, target, outside)
        channel.emit("guess", micro_batch=guess)
        outcome = search_from_estimate(try_batch, guess, predict, budget, total=total, max_micro_batch=cap,
                                       max_trials=max_trials, on_trial=emit_trial)
    channel.emit("result", best=outcome.best, stop=outcome.stop, total_bytes=int(total), budget_bytes=int(budget),
                 outside_bytes=int(outside))
    channel.emit("done")
    return 0


if __name__ == "__main__":
    leave(main())
