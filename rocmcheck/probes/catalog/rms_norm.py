"""probe.rms_norm: torch.nn.functional.rms_norm (torch's fused kernel, what torch.nn.RMSNorm calls) forward and
backward, bf16 and fp32, at a LLaMA-7B shape, against float64 on the CPU: y, dx and the weight gradient
(rocmcheck/probes/norms.py). Abnormally large bf16 weight gradients are the failure it is for. Level 2."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.numerics_verdicts import judge_norm
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.rms_norm"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.norms import rms_norm_probe

    return rms_norm_probe(device, "torch")


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.norms import CPU_SHAPE, rms_norm_probe

    return rms_norm_probe(device, "torch", CPU_SHAPE)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_norm(ID, "torch", data, ctx)


PROBE = Probe(ID, "torch.nn.functional.rms_norm forward+backward is right in bf16 and fp32", 45, judge, run=run,
              run_cpu=run_cpu, level=2, budget_s=5)
