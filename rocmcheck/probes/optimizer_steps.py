"""Several AdamW steps with weight decay through one of torch's implementations (fused=True, foreach=True) against
a reference step written out in float64 from AdamW's formula (Loshchilov & Hutter, "Decoupled Weight Decay
Regularization", algorithm 2; torch.optim.AdamW's documented update):

    p <- p * (1 - lr * weight_decay)
    m <- beta1 * m + (1 - beta1) * g          v <- beta2 * v + (1 - beta2) * g^2
    p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

Compared: the parameter change after the steps (the change, not the parameters: a wrong update hides in p plus a
small change) and both moment buffers. Fresh gradients every step: after one step Adam's update is about
lr * sign(g) whatever the betas. The change is also compared with two look-alikes, AdamW without its weight decay
and Adam with coupled L2 decay, so a wrong kernel is named by what it computes. Imports torch: runs in the child."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from rocmcheck.probes.measure import (
    error_line,
    finite_or_none,
    nonfinite_count,
    relative_error,
    seeded_normal,
    synchronize,
)

LR, BETAS, EPS, WEIGHT_DECAY, STEPS = 1e-2, (0.9, 0.999), 1e-8, 0.1, 5
# Several tensors, as a model has: the multi-tensor kernels split them into chunks, odd sizes reach the tails.
GPU_SIZES: tuple[tuple[int, ...], ...] = ((1024, 1024), (4097,), (3, 1000), (64, 64, 3), (1,))
CPU_SIZES: tuple[tuple[int, ...], ...] = ((64, 32), (67,), (3, 10), (1,))
SEED = 97531

MakeOptimizer = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]
FORMS: dict[str, MakeOptimizer] = {
    "fused": lambda ps: torch.optim.AdamW(ps, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, fused=True),
    "foreach": lambda ps: torch.optim.AdamW(ps, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                                            foreach=True),
}


Tensors = list[torch.Tensor]


def reference_adamw(p0: Sequence[torch.Tensor], grads: Sequence[Sequence[torch.Tensor]],
                    decoupled: float = WEIGHT_DECAY, coupled: float = 0.0) -> tuple[Tensors, Tensors, Tensors]:
    """(parameters, exp_avg, exp_avg_sq) after len(grads) steps, in float64. decoupled: AdamW's weight decay;
    coupled: Adam's L2 decay added to the gradient (the look-alike)."""
    beta1, beta2 = BETAS
    params = [p.to(torch.float64).clone() for p in p0]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, step_grads in enumerate(grads, start=1):
        for i, g32 in enumerate(step_grads):
            g = g32.to(torch.float64) + coupled * params[i]
            params[i] = params[i] * (1 - LR * decoupled)
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1 ** t)
            v_hat = v[i] / (1 - beta2 ** t)
            params[i] = params[i] - LR * m_hat / (v_hat.sqrt() + EPS)
    return params, m, v


def _flat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().to("cpu", torch.float64).reshape(-1) for t in tensors])


def adamw_probe(device: torch.device, form: str, sizes: Sequence[tuple[int, ...]] = GPU_SIZES,
                make: MakeOptimizer | None = None, seed: int = SEED) -> dict[str, Any]:
    """STEPS steps of one implementation ("fused" or "foreach"); `make` replaces it (tests)."""
    p0 = [seeded_normal(size, seed + i) for i, size in enumerate(sizes)]
    grads = [[seeded_normal(size, seed + 1000 * (t + 1) + i) for i, size in enumerate(sizes)] for t in range(STEPS)]
    data: dict[str, Any] = {"form": form, "steps": STEPS, "tensors": len(sizes),
                            "elements": sum(math.prod(s) for s in sizes), "lr": LR, "betas": list(BETAS), "eps": EPS,
                            "weight_decay": WEIGHT_DECAY}
    params = [torch.nn.Parameter(p.to(device, copy=True)) for p in p0]
    try:
        optimizer = (make or FORMS[form])(params)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = g.to(device, copy=True)
            optimizer.step()
        synchronize(device)
        states = [optimizer.state[p] for p in params]
        if not all("exp_avg" in s and "exp_avg_sq" in s for s in states):
            raise RuntimeError("the optimizer keeps no exp_avg / exp_avg_sq state: not an Adam-family optimizer")
    except Exception as exc:  # fused=True refused for this device or dtype, a kernel error
        data["error"] = error_line(exc)
        return data
    start = _flat(p0)
    change = _flat(params) - start
    ref_p, ref_m, ref_v = reference_adamw(p0, grads)
    got = {"change": change, "exp_avg": _flat([s["exp_avg"] for s in states]),
           "exp_avg_sq": _flat([s["exp_avg_sq"] for s in states])}
    want = {"change": _flat(ref_p) - start, "exp_avg": _flat(ref_m), "exp_avg_sq": _flat(ref_v)}
    data.update({name: finite_or_none(relative_error(got[name], want[name])) for name in got})
    data["nonfinite"] = {name: nonfinite_count(t) for name, t in got.items()}
    data["change_rms"] = finite_or_none(change.pow(2).mean().sqrt().item())
    # What the change matched instead, when it was not AdamW's (within the error AdamW's own change has).
    look_alikes = {"no_weight_decay": reference_adamw(p0, grads, decoupled=0.0)[0],
                   "coupled_weight_decay": reference_adamw(p0, grads, decoupled=0.0, coupled=WEIGHT_DECAY)[0]}
    own = data["change"]
    data["look_alike_errors"] = {name: finite_or_none(relative_error(change, _flat(p) - start))
                                 for name, p in look_alikes.items()}
    data["matches"] = [name for name, err in data["look_alike_errors"].items()
                       if err is not None and own is not None and err < own]
    return data
