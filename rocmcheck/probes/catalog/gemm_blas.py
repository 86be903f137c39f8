"""probe.gemm_blas: the same GEMM cases as probe.gemm_blaslt through the classic BLAS library (hipBLAS, rocBLAS
underneath, on ROCm; cuBLAS on CUDA): what torch calls with TORCH_BLAS_PREFER_HIPBLASLT=0, and the workaround
when hipBLASLt fails (rocmcheck/probes/gemm_paths.py). Level 2."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.numerics_verdicts import judge_gemm
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.gemm_blas"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.gemm_paths import gemm_path

    return gemm_path(device, "classic")


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.gemm_paths import CPU_SHAPES, CPU_TAIL, gemm_path

    return gemm_path(device, "classic", CPU_SHAPES, CPU_TAIL)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_gemm(ID, "classic", data, ctx)


PROBE = Probe(ID, "GEMM via hipBLAS (rocBLAS) / cuBLAS is right in fp32, TF32, bf16, fp16 (odd, large-M, beta != 0)",
              90, judge, run=run, run_cpu=run_cpu, level=2, budget_s=8)
