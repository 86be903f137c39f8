"""GEMM through one BLAS library torch can call, in fp32, TF32, bf16 and fp16, over the shapes and call forms a
fine-tune's linear layers use, each against a float64 product of the same operands computed on the CPU. Imports
torch: runs inside the probe child; probes/numerics_verdicts.py judges the numbers.

The library: torch.backends.cuda.preferred_blas_library("cublaslt" | "cublas"), which on a ROCm build of torch
selects hipBLASLt | hipBLAS (rocBLAS underneath). TORCH_BLAS_PREFER_HIPBLASLT is read once, when torch starts,
so inside one process only this call switches; torch may refuse (hipBLASLt on an arch it does not support: it
keeps hipBLAS and warns), so the library in effect is read back and reported. A preference is what torch tries
first: a call the preferred library does not implement goes to the other one (torch's documentation of
preferred_blas_library), and a failed hipBLASLt/cuBLASLt call is retried on hipBLAS/cuBLAS with a warning, which
the judge turns into a warning verdict.

The cases: each shape x each call form x each operand layout:
  shapes   square, odd (1000^3: no dimension a multiple of the tile sizes), skinny (4097x3x4095: N=3) and large-M
           (M past 2^19 with small N and K; the rows past 2^19 are judged on their own as well)
  calls    matmul, matmul(out=), addmm(C, A, B, beta=0.5, alpha=1.5), the same with out=, and F.linear with a
           bias vector (the bias epilogue of the Lt libraries)
  layouts  nn (A @ B), nt (A @ W.T: a linear layer's forward), tn (X.T @ G: its weight gradient)
Outputs of the out= forms are filled with NaN first, so an element the kernel never wrote shows.

The operands and their float64 products are made once per shape and dtype and kept for the next library
(gemm_blaslt then gemm_blas run in the same child), so the second pays only for its GPU work."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F

from rocmcheck.probes.measure import (
    error_line,
    finite_or_none,
    nonfinite_count,
    relative_error,
    seeded_normal,
    synchronize,
)
from rocmcheck.probes.spec import ProbeSkip

ALPHA, BETA = 1.5, 0.5  # beta != 0 and alpha != 1: the form in which a kernel dropping alpha shows
DTYPES = ("fp32", "tf32", "bf16", "fp16")
TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (m, n, k). large_m: past 2^19 = 524,288 rows, where fp32 GEMMs have returned garbage rows (600,000 is a size
# seen to break; 524,288 itself was right).
GPU_SHAPES = {"square": (2048, 2048, 2048), "odd": (1000, 1000, 1000), "skinny": (4097, 3, 4095),
              "large_m": (600_000, 16, 64)}
LARGE_M_TAIL = 2 ** 19
# CPU test mode: the same forms at sizes a laptop does in a second; the tail boundary scaled down with them.
CPU_SHAPES = {"square": (64, 64, 64), "odd": (33, 17, 65), "skinny": (65, 3, 63), "large_m": (4133, 4, 16)}
CPU_TAIL = 4096
LIBRARIES = {"lt": "cublaslt", "classic": "cublas"}  # preferred_blas_library's names (the same on ROCm)
SEED = 1234


@dataclass
class Operands:
    """One case's inputs on the device, in its layout."""

    a: torch.Tensor  # (m, k)
    b: torch.Tensor  # (k, n)
    c: torch.Tensor  # (m, n): addmm's C
    x: torch.Tensor  # (m, k) row-major: F.linear's input
    w: torch.Tensor  # (n, k) row-major: F.linear's weight
    bias: torch.Tensor  # (n,)

    def poisoned(self) -> torch.Tensor:
        return torch.full((self.a.shape[0], self.b.shape[1]), float("nan"), dtype=self.a.dtype, device=self.a.device)


def _mm(o: Operands) -> torch.Tensor:
    return torch.matmul(o.a, o.b)


def _mm_out(o: Operands) -> torch.Tensor:
    out = o.poisoned()
    torch.matmul(o.a, o.b, out=out)
    return out


def _addmm(o: Operands) -> torch.Tensor:
    return torch.addmm(o.c, o.a, o.b, beta=BETA, alpha=ALPHA)


def _addmm_out(o: Operands) -> torch.Tensor:
    out = o.poisoned()
    torch.addmm(o.c, o.a, o.b, beta=BETA, alpha=ALPHA, out=out)
    return out


def _linear(o: Operands) -> torch.Tensor:
    return F.linear(o.x, o.w, o.bias)


Kernel = Callable[[Operands], torch.Tensor]
KERNELS: dict[str, Kernel] = {"mm": _mm, "mm_out": _mm_out, "addmm": _addmm, "addmm_out": _addmm_out,
                              "linear": _linear}
LAYOUTS = {"mm": ("nn", "nt", "tn"), "mm_out": ("nn", "nt", "tn"), "addmm": ("nn", "nt", "tn"),
           "addmm_out": ("nn", "nt", "tn"), "linear": ("nt",)}
REFERENCE_OF = {"mm": "product", "mm_out": "product", "addmm": "addmm", "addmm_out": "addmm", "linear": "bias"}

_OPERANDS: dict[tuple[Any, ...], tuple[torch.Tensor, ...]] = {}
_PRODUCTS: dict[tuple[Any, ...], torch.Tensor] = {}


def _operands(shape: tuple[int, int, int], seed: int) -> tuple[torch.Tensor, ...]:
    """fp32 A (m, k), B (k, n), C (m, n), bias (n,) on the CPU: N(0, 1) values, never zeros (zeros hide wrong
    indexing)."""
    key = (shape, seed)
    if key not in _OPERANDS:
        m, n, k = shape
        _OPERANDS[key] = (seeded_normal((m, k), seed), seeded_normal((k, n), seed + 1),
                          seeded_normal((m, n), seed + 2), seeded_normal((n,), seed + 3))
    return _OPERANDS[key]


def _product(shape: tuple[int, int, int], dtype: torch.dtype, seed: int, a: torch.Tensor,
             b: torch.Tensor) -> torch.Tensor:
    """The float64 product of the operands as rounded to `dtype`, on the CPU."""
    key = (shape, dtype, seed)
    if key not in _PRODUCTS:
        _PRODUCTS[key] = a.to(torch.float64) @ b.to(torch.float64)
    return _PRODUCTS[key]


def backend_name() -> str | None:
    """The BLAS library torch prefers now ("Cublaslt", "Cublas", "Ck", "Default"); None without the API."""
    try:
        return torch.backends.cuda.preferred_blas_library().name
    except (AttributeError, RuntimeError):
        return None


def _cases_of(device: torch.device, dtype: str, name: str, shape: tuple[int, int, int], tail_from: int | None,
              kernels: Mapping[str, Kernel], seed: int) -> list[dict[str, Any]]:
    m, n, k = shape
    tdtype = TORCH_DTYPES[dtype]
    a32, b32, c32, bias32 = _operands(shape, seed)
    a_cpu, b_cpu, c_cpu, bias_cpu = (t.to(tdtype, copy=True) for t in (a32, b32, c32, bias32))
    product = _product(shape, tdtype, seed, a_cpu, b_cpu).to(device)
    a, b, c, bias = (t.to(device, copy=True) for t in (a_cpu, b_cpu, c_cpu, bias_cpu))
    a_t = a_cpu.t().contiguous().to(device).t()  # the same values stored column-major: the "t" layouts
    w = b_cpu.t().contiguous().to(device)  # (n, k): a linear layer's weight
    refs = {"product": product, "addmm": BETA * c.to(torch.float64) + ALPHA * product,
            "bias": product + bias.to(torch.float64)}
    cases = []
    for op, layouts in LAYOUTS.items():
        for layout in layouts:
            operands = Operands(a=a_t if layout[0] == "t" else a, b=w.t() if layout[1] == "t" else b, c=c, x=a,
                                w=w, bias=bias)
            case: dict[str, Any] = {"dtype": dtype, "shape": name, "mnk": [m, n, k], "op": op, "layout": layout}
            try:
                out = kernels[op](operands)
                synchronize(device)
                ref = refs[REFERENCE_OF[op]]
                case.update(rel_err=finite_or_none(relative_error(out, ref)), nonfinite=nonfinite_count(out))
                if tail_from is not None and m > tail_from:
                    case["tail_rel_err"] = finite_or_none(relative_error(out[tail_from:], ref[tail_from:]))
            except Exception as exc:  # HIPBLAS_STATUS_NOT_SUPPORTED, "file not found": the path is unusable
                case["error"] = error_line(exc)
            cases.append(case)
    return cases


def gemm_path(device: torch.device, library: str, shapes: Mapping[str, tuple[int, int, int]] = GPU_SHAPES,
              tail_from: int = LARGE_M_TAIL, kernels: Mapping[str, Kernel] = KERNELS,
              dtypes: tuple[str, ...] = DTYPES, seed: int = SEED) -> dict[str, Any]:
    """Every case through `library` ("lt" or "classic"). On the CPU (test mode) there is no library to choose:
    the cases run on torch's CPU BLAS. Torch's settings are put back as they were, whatever happens."""
    on_gpu = device.type == "cuda"
    default = backend_name() if on_gpu else None
    precision = torch.get_float32_matmul_precision()
    in_effect = None
    cases: list[dict[str, Any]] = []
    seen: list[str] = []
    try:
        if on_gpu:
            with warnings.catch_warnings(record=True) as refused:
                warnings.simplefilter("always")
                torch.backends.cuda.preferred_blas_library(LIBRARIES[library])
            in_effect = backend_name()
            if library == "lt" and in_effect != "Cublaslt":
                why = "; ".join(" ".join(str(w.message).split())[:200] for w in refused) or "no reason given"
                raise ProbeSkip(f"torch does not use the Lt library on this GPU: asked for it, it keeps "
                                f"{in_effect} ({why})")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for dtype in dtypes:
                torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
                for name, shape in shapes.items():
                    cases += _cases_of(device, dtype, name, shape, tail_from if name == "large_m" else None,
                                       kernels, seed)
        for w in caught:
            text = " ".join(str(w.message).split())[:300]
            if text not in seen:
                seen.append(text)
    finally:
        torch.set_float32_matmul_precision(precision)
        if on_gpu and default is not None:
            torch.backends.cuda.preferred_blas_library(default.lower())
    return {"library": library, "asked": LIBRARIES[library], "default": default, "in_effect": in_effect,
            "alpha": ALPHA, "beta": BETA, "tail_from": tail_from, "cases": cases, "warnings": seen[:8],
            "hip": torch.version.hip}
