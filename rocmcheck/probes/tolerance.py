"""How far a right kernel may land from a float64 reference of the same operands, per dtype: the level-2 numerics
probes' limits, derived from each dtype's unit roundoff and the length of the sums a kernel accumulates. Pure
numbers, no torch: the judges (rocmcheck/probes/catalog/) read them, and tests check every limit on plain values.

Every error here is the relative norm error ||out - ref|| / ||ref||, the reference computed in float64 from the
very operands the kernel got (already rounded to its dtype), so rounding the inputs costs nothing and what is left
is the kernel's own rounding:
- each rounding of a result to a dtype moves every element by at most its unit roundoff u (relative), so n
  roundings along the way cost at most n*u in the norm;
- a sum of L terms accumulated in fp32 drifts like a random walk: about sqrt(L) * u_fp32 (Higham, "Accuracy and
  Stability of Numerical Algorithms", 2nd ed., section 4.2; blocked and pairwise sums, what GPU kernels do, do
  better);
- TF32 rounds both operands to 10 mantissa bits inside the kernel: sqrt(2) * u_tf32.
The limit is SAFETY times that estimate. The estimate is already a bound for the rounding part (a typical error is
about u/sqrt(3) per rounding), so a right kernel stays several times below its limit; the faults these probes are
for are off by orders of magnitude more: alpha dropped when beta != 0 (~0.3), rows of garbage (~0.1-1), weight
gradients "abnormally large" (>> 1), a backend computing the wrong attention (~1).

These limits are derived, not measured on a GPU here; benchmarks/bench_level2.py prints each probe's measured
error beside its limit on the GPU it runs on, and benchmarks/RESULTS.md records the figures (the CPU figures in
docs/probes.md were measured on this project's CPU test box with the same code)."""

from __future__ import annotations

import math

# Unit roundoff u = 2^-t of each dtype, t its significand bits with the implicit one (IEEE 754; bf16 8 bits; TF32
# is fp32 with fp16's 10-bit mantissa, t = 11).
UNIT_ROUNDOFF = {"fp64": 2.0 ** -53, "fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
# What a dtype's results are stored in: a TF32 product is written as fp32.
STORED_AS = {"fp64": "fp64", "fp32": "fp32", "tf32": "fp32", "bf16": "bf16", "fp16": "fp16"}
ACCUMULATOR = "fp32"  # every kernel here accumulates in fp32 (bf16/fp16 GEMMs, softmax, norms, optimizer math)
SAFETY = 4.0

# GEMM: the result is rounded once to its dtype; bf16/fp16 may be rounded once more, because torch allows
# reduced-precision reductions there by default (split-K partial sums kept in bf16/fp16:
# torch.backends.cuda.matmul.allow_bf16/fp16_reduced_precision_reduction).
GEMM_HALF_EXTRA_ROUNDINGS = 1

# SDPA, per output, the roundings to the input dtype along a flash-style kernel's way (FlashAttention-2's
# algorithm; the memory-efficient and math paths round at most as often):
#   out = P~ V: the probabilities P~ rounded before the product, the output rounded -> 2
#   dV  = P~^T dO: P~ rounded, dV rounded -> 2
#   dQ  = dS K, dK = dS^T Q: O rounded (it enters D = rowsum(dO * O)), dS rounded, the result rounded -> 3
ATTENTION_ROUNDINGS = {"out": 2, "dq": 3, "dk": 3, "dv": 2}

# RMSNorm, per output: y = w * x * rsqrt(mean(x^2) + eps). The normalised x may be rounded to the input dtype
# before the weight multiplies it (transformers' LlamaRMSNorm does), then y is rounded -> 2; dx and dw are
# computed in fp32 and rounded once, after one more rounding of an intermediate product -> 2. The sums: mean(x^2)
# over the hidden size (y, dx), the weight gradient over every token (dw).
NORM_ROUNDINGS = {"y": 2, "dx": 2, "dw": 2}


def unit_roundoff(dtype: str) -> float:
    return UNIT_ROUNDOFF[dtype]


def accumulation(length: int) -> float:
    """The drift of an fp32 sum of `length` terms: sqrt(length) * u_fp32."""
    return math.sqrt(max(1, length)) * UNIT_ROUNDOFF[ACCUMULATOR]


def gemm_expected(dtype: str, k: int) -> float:
    """The relative error a right GEMM of inner size k may reach in `dtype` (fp32, tf32, bf16, fp16)."""
    stored = UNIT_ROUNDOFF[STORED_AS[dtype]]
    roundings = 1 + (GEMM_HALF_EXTRA_ROUNDINGS if dtype in ("bf16", "fp16") else 0)
    operands = math.sqrt(2) * UNIT_ROUNDOFF["tf32"] if dtype == "tf32" else 0.0
    return roundings * stored + operands + accumulation(k)


def gemm_limit(dtype: str, k: int) -> float:
    return SAFETY * gemm_expected(dtype, k)


def attention_limit(dtype: str, output: str, head_dim: int, keys: int) -> float:
    """SDPA's limit for one output (out, dq, dk, dv) in bf16/fp16: its roundings, plus the fp32 sums over the
    head dimension (q.k) and over the keys (the softmax and P V)."""
    return SAFETY * (ATTENTION_ROUNDINGS[output] * UNIT_ROUNDOFF[dtype] + accumulation(head_dim) + accumulation(keys))


def norm_limit(dtype: str, output: str, hidden: int, tokens: int) -> float:
    """RMSNorm's limit for one output (y, dx, dw) in bf16/fp32."""
    length = tokens if output == "dw" else hidden
    return SAFETY * (NORM_ROUNDINGS[output] * UNIT_ROUNDOFF[dtype] + accumulation(length))


# AdamW, fp32 parameters: the parameter change after `steps` steps is compared (the change, not the parameters: a
# wrong update hides in p + a small change). Storing p in fp32 each step moves it by u_fp32 * |p|, a random walk
# over the steps: sqrt(steps) * u_fp32 * rms(p) against a change of rms(dp); the update's own fp32 arithmetic
# (sqrt, division, bias corrections) is a few u_fp32 more. The probe runs lr 1e-2 for 5 steps on N(0, 1)
# parameters, where rms(dp) is 2.7e-2 (measured with the probe's own data, which is the same on every device), so
# the estimate is sqrt(5) * 6e-8 / 2.7e-2 + 8 * 6e-8 = 5.4e-6 and SAFETY times it 2.2e-5; the limit is the next
# power of ten. torch's CPU AdamW, fused and foreach, lands at 3.8e-6 (the parameter change) and 1e-7 (the moments).
ADAMW_CHANGE_RMS = 2.7e-2
ADAMW_EXPECTED = math.sqrt(5) * UNIT_ROUNDOFF["fp32"] / ADAMW_CHANGE_RMS + 8 * UNIT_ROUNDOFF["fp32"]
ADAMW_MAX_REL_ERR = 10.0 ** math.ceil(math.log10(SAFETY * ADAMW_EXPECTED))
