"""Which fp8 formats a GPU's fp8 GEMM (torch._scaled_mm) takes, from its arch name, and how far a right fp8 GEMM may
land from float64. Pure: no torch here; probe.fp8_gemm's runner (rocmcheck/probes/fp8_gemm.py) and judge
(rocmcheck/probes/catalog/fp8_gemm.py) read it, and the tests check it on plain values.

The formats. Two fp8 families exist: the "fnuz" formats (float8_e4m3fnuz, float8_e5m2fnuz: no infinities, no
negative zero, exponent bias one higher) that MI300 (gfx942) computes in, and the OCP formats (float8_e4m3fn,
float8_e5m2) of MI350/MI355 (gfx950), RDNA4 (gfx1200, gfx1201) and NVIDIA Ada and newer. torch decides which GPUs
run _scaled_mm in `_scaled_mm_allowed_device` (aten/src/ATen/native/cuda/ScaledBlas.cpp, torch 2.9-2.13; Blas.cpp
before): on ROCm gfx942, gfx1200/gfx1201 (ROCm >= 6.3 builds) and gfx950 (ROCm >= 6.5 builds), with the fnuz types
on gfx942 alone (`_scaled_mm_is_fnuz`); on CUDA compute capability 8.9 or >= 9.0. An fp8 GEMM is two operands:
e4m3 x e4m3 (a linear layer's forward: activations and weights) and e5m2 x e4m3 (its backward: the gradient in
e5m2, whose wider exponent holds gradients' range); e5m2 x e5m2 is refused by torch on CUDA and used by nobody."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rocmcheck.probes.tolerance import ACCUMULATOR, SAFETY, UNIT_ROUNDOFF


@dataclass(frozen=True)
class Fp8Formats:
    """The torch dtype names of one arch's fp8 pair, and which family they are."""

    e4m3: str  # "float8_e4m3fnuz" | "float8_e4m3fn"
    e5m2: str  # "float8_e5m2fnuz" | "float8_e5m2"
    family: str  # "fnuz" | "ocp"


FNUZ = Fp8Formats("float8_e4m3fnuz", "float8_e5m2fnuz", "fnuz")
OCP = Fp8Formats("float8_e4m3fn", "float8_e5m2", "ocp")
# torch's _scaled_mm_allowed_device on ROCm, and the family of each arch (_scaled_mm_is_fnuz: gfx942 only).
ROCM_FP8_ARCHS = {"gfx942": FNUZ, "gfx950": OCP, "gfx1200": OCP, "gfx1201": OCP}
# torch's _scaled_mm_allowed_device on CUDA: capability 8.9 (Ada) or 9.0 and above (Hopper, Blackwell).
CUDA_FP8_MIN_CAPABILITY = (8, 9)
_SM = re.compile(r"sm_(\d+)(\d)a?")


def cuda_capability(arch: str) -> tuple[int, int] | None:
    """"sm_90" -> (9, 0), "sm_120" -> (12, 0), "sm_89" -> (8, 9); None for anything else."""
    found = _SM.fullmatch(arch.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def fp8_formats(arch: str) -> Fp8Formats | None:
    """The fp8 formats this arch's fp8 GEMM takes ("gfx942" -> fnuz, "gfx950" / "sm_90" -> OCP); None where torch
    runs no fp8 GEMM on it (gfx90a, sm_80, an unknown name, "" for no GPU)."""
    name = arch.strip().split(":", 1)[0]  # torch's gcnArchName carries target features: "gfx942:sramecc+:xnack-"
    if name.startswith("gfx"):
        return ROCM_FP8_ARCHS.get(name)
    capability = cuda_capability(name)
    return OCP if capability is not None and capability >= CUDA_FP8_MIN_CAPABILITY else None


def no_fp8_reason(arch: str) -> str:
    """One line for the skip: why this arch gets no fp8 GEMM verdict."""
    if not arch:
        return "no GPU arch is known, so no fp8 GEMM to test"
    return (f"{arch} has no fp8 GEMM in torch._scaled_mm (torch runs it on "
            f"{', '.join(sorted(ROCM_FP8_ARCHS))} and NVIDIA compute capability "
            f"{'.'.join(map(str, CUDA_FP8_MIN_CAPABILITY))} and newer)")


# Significand bits stored (the mantissa) of each fp8 format; the fnuz formats keep the same mantissa as their OCP
# twins (they differ in exponent bias and special values). Unit roundoff u = 2^-(mantissa + 1).
MANTISSA_BITS = {"float8_e4m3fn": 3, "float8_e4m3fnuz": 3, "float8_e5m2": 2, "float8_e5m2fnuz": 2}
OUTPUT_DTYPE = "bf16"  # what the probe asks _scaled_mm to write: a fine-tune's activations are bf16


def fp8_unit_roundoff(dtype: str) -> float:
    return 2.0 ** -(MANTISSA_BITS[dtype] + 1)


# The fp8 GEMM's own accumulation. NVIDIA's fp8 tensor cores keep about 14 bits of the running sum inside an MMA
# chain ("the accumulation precision of FP8 GEMM on NVIDIA H800 GPUs is limited to retaining around 14 bits",
# DeepSeek-V3 technical report, arXiv 2412.19437, section 3.3.2; cuBLASLt promotes the partial sums to fp32 every
# few chains unless use_fast_accum is set). The limit takes the worse of the two for every path: u = 2^-14.
FP8_ACCUMULATOR_BITS = 14
FP8_ACCUMULATOR_ROUNDOFF = 2.0 ** -FP8_ACCUMULATOR_BITS


def fp8_gemm_expected(k: int) -> float:
    """How far a right fp8 GEMM of inner size k lands from the float64 product of the very operands it got (the fp8
    values times their scales): the sum of k terms drifts like a random walk, sqrt(k) * u_acc (the reasoning of
    rocmcheck/probes/tolerance.py, with the fp8 accumulator's 14 bits in place of fp32's 24), and the result is
    rounded once to bf16. Rounding the inputs to fp8 costs nothing here: the reference starts from the fp8 values."""
    return UNIT_ROUNDOFF[OUTPUT_DTYPE] + math.sqrt(max(1, k)) * max(FP8_ACCUMULATOR_ROUNDOFF,
                                                                   UNIT_ROUNDOFF[ACCUMULATOR])


def fp8_gemm_limit(k: int) -> float:
    """The kernel's limit: SAFETY (tolerance.py) times its expected error. At k = 4096: 4 x (2^-8 + 64 x 2^-14)
    = 3.1e-2, above the "nearly 2 %" worst case the DeepSeek-V3 report measured at that k with the 14-bit
    accumulator; a kernel that reads the wrong format (fnuz bits as OCP: every value off by 2x) or drops a scale is
    off by O(1)."""
    return SAFETY * fp8_gemm_expected(k)


def fp8_quantized_limit(a_dtype: str, b_dtype: str, k: int) -> float:
    """The limit against the float64 product of the operands before they were cast to fp8: casting each element
    moves it by at most u_fp8 of itself, so for operands with independent entries (the probe's are) the product
    moves by at most u_a + u_b of its norm (a typical cast, about u/sqrt(3) per operand, lands near a third of
    that); the kernel's own limit comes on top. e4m3 x e4m3: 2^-4 + 2^-4 + 3.1e-2 = 0.16 at k = 4096; e5m2 x e4m3:
    0.22. This is what catches a broken cast to fp8, which the first comparison cannot see (its reference is built
    from the cast's own output)."""
    return fp8_unit_roundoff(a_dtype) + fp8_unit_roundoff(b_dtype) + fp8_gemm_limit(k)


# The rate. Dense fp8 is twice dense bf16 on every fp8 datasheet the probe meets: H100 SXM 1,979 vs 989 TFLOP/s
# (NVIDIA H100 datasheet), MI300X 2,615 vs 1,307 (AMD Instinct MI300X datasheet), MI355X 5,000 vs 2,500 (AMD
# Instinct MI355X datasheet). The probe passes from 1.2x its own bf16 rate on the same GPU in the same run, well
# under the datasheet's 2x, to leave room for fp8 kernels that reach a smaller share of their peak at the probe's
# one shape than the bf16 ones do: below it the fp8 path buys little over bf16, which means it does not run on
# the fp8 units (a fallback kernel, a BLAS library without fp8 kernels for this GPU) or something throttles it.
FP8_OVER_BF16_DATASHEET = 2.0
FP8_OVER_BF16_FLOOR = 1.2
