"""Probes of plain compute and memory: GEMM numerics and rate, device copy, pinned host copies, memory.
Imports torch: runs inside the child process. Each returns the measurements; each probe's
module in rocmcheck/probes/catalog judges them."""

from __future__ import annotations

from typing import Any

import torch

from rocmcheck.probes.measure import finite_or_none, median_ms, nonfinite_count, relative_error
from rocmcheck.units import GIB, MIB


def memory(device: torch.device) -> dict[str, Any]:
    devices = []
    if device.type == "cuda":
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            devices.append({"index": i, "name": torch.cuda.get_device_name(i), "total_bytes": total,
                            "free_bytes": free})
    return {"devices": devices}


def gemm_numerics(device: torch.device, m: int = 2048, n: int = 2048, k: int = 4096) -> dict[str, Any]:
    """bf16 product of random operands (never zeros: they hide wrong indexing) against a float64 reference
    of the same bf16 inputs. The output is poisoned with NaN first, so an unwritten element fails too."""
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
    out = torch.full((m, n), float("nan"), device=device, dtype=torch.bfloat16)
    torch.matmul(a, b, out=out)
    ref = a.to(torch.float64) @ b.to(torch.float64)
    return {"shape": [m, n, k], "rel_err": finite_or_none(relative_error(out, ref)),
            "nonfinite": nonfinite_count(out), "reference": "float64"}


def gemm_tflops(device: torch.device, size: int = 8192, iters: int = 30, warmup_s: float = 0.5) -> dict[str, Any]:
    """bf16 size^3 product rate: random data (zeros run faster than real data), warm-up long enough for the
    clocks to ramp, device events, median."""
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    c = torch.empty(size, size, device=device, dtype=torch.bfloat16)
    ms = median_ms(lambda: torch.matmul(a, b, out=c), device, iters=iters, warmup_s=warmup_s, warmup_iters=3)
    return {"shape": [size, size, size], "ms": ms, "tflops": 2 * size**3 / (ms * 1e-3) / 1e12, "iters": iters}


def copy_bandwidth(device: torch.device, nbytes: int = GIB, iters: int = 20) -> dict[str, Any]:
    """Device-to-device copy; counts bytes read plus bytes written, as memory bandwidth figures do."""
    src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, iters=iters, warmup_iters=3)
    moved = 2 * src.numel() * 4
    return {"bytes": moved, "ms": ms, "tb_per_s": moved / (ms * 1e-3) / 1e12}


def host_bandwidth(device: torch.device, nbytes: int = 256 * MIB, iters: int = 10) -> dict[str, Any]:
    """Pinned host<->device copies, each direction on its own (what ZeRO CPU offload moves every step)."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    # Any bytes do: a copy's speed does not depend on them. fill_ writes 256 MiB in about 10 ms; random_ took 0.66 s
    # on one core of the 2-core CPU box, inside the probe's time.
    host.fill_(0x5A)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = median_ms(lambda: dev.copy_(host, non_blocking=True), device, iters=iters)
    d2h = median_ms(lambda: host.copy_(dev, non_blocking=True), device, iters=iters)
    return {"bytes": nbytes, "pinned": bool(host.is_pinned()),
            "h2d_gb_per_s": nbytes / (h2d * 1e-3) / 1e9, "d2h_gb_per_s": nbytes / (d2h * 1e-3) / 1e9}
