"""probe.gemm_numerics: a bf16 matrix product of random operands against a float64 reference of the same inputs."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import judge_numerics
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.gemm_numerics"
# Relative norm error ||out - ref|| / ||ref|| against a float64 reference. bf16 operands with fp32 accumulation
# land between 1e-3 and 1e-2 (rounding the inputs and the output to 8 mantissa bits); a wrong kernel is off by O(1).
BF16_MAX_REL_ERR = 1e-2


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import gemm_numerics

    return gemm_numerics(device)


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import gemm_numerics

    return gemm_numerics(device, 128, 128, 256)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    m, n, k = data["shape"]
    return judge_numerics(ID, f"bf16 GEMM {m}x{n}x{k}", data["rel_err"], BF16_MAX_REL_ERR, ctx,
                          nonfinite=int(data.get("nonfinite") or 0),
                          evidence=[f"reference: {data.get('reference', 'float64')} product of the same bf16 operands"],
                          shape=[m, n, k])


PROBE = Probe(ID, "a bf16 matrix product computes the right numbers", 20, judge, run=run, run_cpu=run_cpu)
