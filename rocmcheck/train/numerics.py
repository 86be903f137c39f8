"""The numerics measurement: the run's first batch through the model twice, the way the run computes it
(bf16: autocast over fp32 weights, or bf16 weights) and in fp32, each time forward and backward. The loss
and the gradient norm of every block (decoder layer, embedding, head) of both passes go to
verdicts.check_numerics. A kernel that computes wrongly in bf16 (an attention that drops its scale, a GEMM
with a bad epilogue) moves them far more than bf16 rounding does. Imports torch.

The fp32 pass runs on the same weights: the model itself with autocast off when its weights are fp32 (the
default), otherwise an fp32 copy, on the run's device when it has room for it, else on the CPU when the
model is small enough to run there in seconds."""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import torch

# An fp32 copy on the CPU: up to this many parameters (a 1B model's forward and backward on 4 short rows
# take seconds on a few cores; a 7B would take minutes and 56 GB of host memory).
CPU_REFERENCE_MAX_PARAMS = 1.5e9
# The fp32 copy and its gradients on the GPU must leave this much of the free memory unused.
GPU_REFERENCE_FREE_SHARE = 0.8


def block_of(name: str) -> str:
    """The block a parameter belongs to: "layer 3" for model.layers.3.*, else the module path ("lm_head")."""
    if ".layers." in name:
        return "layer " + name.split(".layers.", 1)[1].split(".", 1)[0]
    return name.rsplit(".", 1)[0].replace("base_model.model.", "")


def _block_norms(model: torch.nn.Module) -> dict[str, float]:
    squares: dict[str, list[torch.Tensor]] = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            squares.setdefault(block_of(name), []).append(p.grad.detach().float().pow(2).sum())
    return {k: math.sqrt(float(torch.stack(v).sum())) for k, v in squares.items()}


def _pass(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, bf16_autocast: bool) -> dict[str, Any]:
    """One forward and backward: its loss, gradient norms and seconds (the device waited for: the norms are read
    back as Python floats)."""
    t0 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16_autocast):
        loss = model(input_ids=x, labels=y).loss
    loss.backward()
    norms = _block_norms(model)
    model.zero_grad(set_to_none=True)
    return {"loss": float(loss.detach()), "grad_norm": math.sqrt(sum(v * v for v in norms.values())), "blocks": norms,
            "seconds": round(time.perf_counter() - t0, 3)}


def _reference_model(model: torch.nn.Module, device: torch.device) -> tuple[torch.nn.Module | None, str]:
    """(an fp32 model with the same weights, where it lives) or (None, why there is none)."""
    if all(p.dtype == torch.float32 for p in model.parameters()):
        return model, str(device)
    n = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        if 4 * (n + trainable) < GPU_REFERENCE_FREE_SHARE * free:
            return copy.deepcopy(model).float(), str(device)
    if n <= CPU_REFERENCE_MAX_PARAMS:
        return copy.deepcopy(model).to("cpu", torch.float32), "cpu"
    return None, (f"an fp32 copy of {n / 1e9:.1f}B parameters fits neither in this GPU's free memory nor in "
                  f"the CPU's time budget (up to {CPU_REFERENCE_MAX_PARAMS / 1e9:.1f}B)")


def measure(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, pure_bf16: bool) -> dict[str, Any]:
    """{"bf16": pass, "fp32": pass, "reference_device": ...} or {"skipped": why}. Leaves no gradients behind;
    the weights and the optimizer are untouched."""
    was_training = model.training
    model.train()
    try:
        low = _pass(model, x, y, bf16_autocast=not pure_bf16)
        ref_model, where = _reference_model(model, x.device)
        if ref_model is None:
            return {"skipped": where, "bf16": low}
        ref = _pass(ref_model, x.to(where), y.to(where), bf16_autocast=False)
        if ref_model is not model:
            del ref_model
            if x.device.type == "cuda":
                torch.cuda.empty_cache()
        return {"bf16": low, "fp32": ref, "reference_device": where, "rows": int(x.shape[0]),
                "tokens": int(x.numel()),
                "precision": "bf16 weights" if pure_bf16 else "bf16 autocast over fp32 weights"}
    finally:
        model.train(was_training)
