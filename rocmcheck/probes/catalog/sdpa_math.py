"""probe.sdpa_math: SDPA through the math path alone (batched GEMMs and a softmax in the input dtype), selected with
torch.nn.attention.sdpa_kernel, forward AND backward, bf16 and fp16, causal LLaMA shapes, against the math path in
float64 on the CPU: the output and dq, dk, dv (rocmcheck/probes/attention_grads.py). A backend torch cannot run
here is a skip with torch's reason. Level 2."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.numerics_verdicts import judge_attention
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult

ID = "probe.sdpa_math"


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention_grads import sdpa_backend

    return sdpa_backend(device, "math")


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.attention_grads import CPU_SHAPES, sdpa_backend

    return sdpa_backend(device, "math", CPU_SHAPES)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    return judge_attention(ID, "math", data, ctx)


PROBE = Probe(ID, "SDPA math forward+backward is right for bf16/fp16 causal LLaMA shapes", 60, judge, run=run,
              run_cpu=run_cpu, level=2, budget_s=4)
