"""probe.triton: Triton compiles and runs a masked scaled-add kernel (a length that is not a multiple of the
block) on this GPU. Skips where triton is not installed and in CPU test mode (Triton kernels need a GPU)."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import judge_numerics
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.triton"
# An fp32 x * scale + y computed two ways: rounding only.
TRITON_MAX_REL_ERR = 1e-6


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.extensions import triton_probe

    return triton_probe(device)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_numerics(ID, f"a Triton {data.get('version', '')} kernel".replace("  ", " "),
                          data["rel_err"], TRITON_MAX_REL_ERR, ctx,
                          evidence=[f"compiled and ran in {data.get('compile_s', 0):.2f} s, {data.get('n')} elements"],
                          version=data.get("version"), compile_s=data.get("compile_s"))


PROBE = Probe(ID, "Triton compiles and runs a kernel on this GPU", 60, judge, run=run, run_cpu=run)
