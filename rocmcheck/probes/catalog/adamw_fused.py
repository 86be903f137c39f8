"""probe.adamw_fused: torch.optim.AdamW(fused=True: one kernel per step; transformers' optim=adamw_torch_fused)
over several fp32 tensors, 5 steps with weight decay, against AdamW's formula written out in float64: the parameter
change and both moment buffers (rocmcheck/probes/optimizer_steps.py). Level 2."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.numerics_verdicts import judge_adamw
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.adamw_fused"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.optimizer_steps import adamw_probe

    return adamw_probe(device, "fused")


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.optimizer_steps import CPU_SIZES, adamw_probe

    return adamw_probe(device, "fused", CPU_SIZES)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_adamw(ID, "fused", data, ctx)


PROBE = Probe(ID, "AdamW(fused=True) steps with weight decay match AdamW's formula in float64", 45, judge, run=run,
              run_cpu=run_cpu, level=2, budget_s=3)
