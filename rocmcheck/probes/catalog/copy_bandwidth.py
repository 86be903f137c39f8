"""probe.copy_bandwidth: a device-to-device copy of 1 GiB (bytes read + written) against the datasheet HBM
bandwidth."""

from __future__ import annotations

from typing import Any

from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number, rate_verdict, slow_gpu_fix
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed

ID = "probe.copy_bandwidth"
# Device copy vs datasheet HBM bandwidth: an H200 reached 4.2 of 4.8 TB/s (0.875) in this project's baseline.
COPY_PASS_OF_PEAK = 0.60
COPY_FAIL_OF_PEAK = 0.35


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import copy_bandwidth

    return copy_bandwidth(device)


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    from rocmcheck.probes.compute import copy_bandwidth

    return copy_bandwidth(device, 1 << 22, iters=3)


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    tbps = number(data["tb_per_s"])
    info = dict(tb_per_s=tbps, bytes=data.get("bytes"))
    if tbps is None or tbps <= 0:
        return failed(f"device copy bandwidth could not be measured on {ctx.label()}", slow_gpu_fix(ctx), **info,
                      id=ID)
    product = ctx.product()
    if product is None or not product.hbm_tbps:
        return passed(f"device copy: {tbps:.2f} TB/s on {ctx.label()} (no datasheet figure for this GPU to compare)",
                      **info, id=ID)
    return rate_verdict(ID, "device copy:", tbps, "TB/s", product.hbm_tbps,
                        f"the {product.hbm_tbps} TB/s datasheet memory bandwidth", COPY_PASS_OF_PEAK,
                        COPY_FAIL_OF_PEAK, slow_gpu_fix(ctx), ctx, **info)


PROBE = Probe(ID, "device memory moves data at the speed this GPU should reach", 20, judge, run=run, run_cpu=run_cpu)
