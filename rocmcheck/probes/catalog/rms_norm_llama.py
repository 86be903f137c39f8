"""probe.rms_norm_llama: the RMSNorm transformers' LlamaRMSNorm computes, decomposed into torch's element-wise ops
and a mean (statistics in fp32, cast back before the weight), forward and backward, bf16 and fp32, against float64
on the CPU (rocmcheck/probes/norms.py). The form LLaMA fine-tunes run, and the workaround when
probe.rms_norm fails. Level 2."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.numerics_verdicts import judge_norm
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.rms_norm_llama"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.norms import rms_norm_probe

    return rms_norm_probe(device, "llama")


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.norms import CPU_SHAPE, rms_norm_probe

    return rms_norm_probe(device, "llama", CPU_SHAPE)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_norm(ID, "llama", data, ctx)


PROBE = Probe(ID, "LLaMA's decomposed RMSNorm forward+backward is right in bf16 and fp32", 45, judge, run=run,
              run_cpu=run_cpu, level=2, budget_s=3)
