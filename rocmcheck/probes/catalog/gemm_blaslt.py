"""probe.gemm_blaslt: GEMM through the Lt BLAS library (hipBLASLt on ROCm, cuBLASLt on CUDA) in fp32, TF32, bf16
and fp16, over square, odd, skinny and large-M (> 2^19 rows) shapes, as matmul, out=, addmm with beta != 0 and
linear with a bias, each against a float64 product of the same operands (rocmcheck/probes/gemm_paths.py). Level 2.
A case that raises (HIPBLAS_STATUS_NOT_SUPPORTED, "file not found") fails with the library and dtype named."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.numerics_verdicts import judge_gemm
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.gemm_blaslt"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.gemm_paths import gemm_path

    return gemm_path(device, "lt")


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.gemm_paths import CPU_SHAPES, CPU_TAIL, gemm_path

    return gemm_path(device, "lt", CPU_SHAPES, CPU_TAIL)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_gemm(ID, "lt", data, ctx)


PROBE = Probe(ID, "GEMM via hipBLASLt / cuBLASLt is right in fp32, TF32, bf16, fp16 (odd, large-M, beta != 0)", 90,
              judge, run=run, run_cpu=run_cpu, level=2, budget_s=12)
