"""probe.copy_bandwidth: a device-to-device copy of 1 GiB (bytes read + written) against AMD's validation floor for
the product (TransferBench's healthcheck HBM copy limit), or the datasheet HBM bandwidth where AMD publishes none."""

from __future__ import annotations

from typing import Any

from rocmcheck.knowledge import Product
from rocmcheck.knowledge.floors import HBM_COPY_GBPS, Floor
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number, rate_verdict, slow_gpu_fix
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.copy_bandwidth"
# Device copy vs datasheet HBM bandwidth: an H200 reached 4.2 of 4.8 TB/s (0.875) in this project's baseline.
COPY_PASS_OF_PEAK = 0.60
COPY_FAIL_OF_PEAK = 0.35
# TransferBench counts a copy's bytes once; this probe counts them read and written, as datasheet bandwidths do.
TRANSFERBENCH_COPY_BYTES_FACTOR = 2


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
    floor = ctx.floor(HBM_COPY_GBPS)
    if floor is not None:
        return _against_amd_floor(tbps, floor, product, ctx, info)
    if product is None or not product.hbm_tbps:
        return passed(f"device copy: {tbps:.2f} TB/s on {ctx.label()} (no datasheet figure for this GPU to compare)",
                      **info, id=ID)
    return rate_verdict(ID, "device copy:", tbps, "TB/s", product.hbm_tbps,
                        f"the {product.hbm_tbps} TB/s datasheet memory bandwidth", COPY_PASS_OF_PEAK,
                        COPY_FAIL_OF_PEAK, slow_gpu_fix(ctx), ctx, **info)


def _against_amd_floor(tbps: float, floor: Floor, product: Product | None, ctx: DeviceContext,
                      info: dict[str, Any]) -> CheckResult:
    """Pass at AMD's floor; warn below it; fail below COPY_FAIL_OF_PEAK of the datasheet bandwidth (or of the floor
    when the datasheet figure is missing)."""
    floor_tbps = floor.value * TRANSFERBENCH_COPY_BYTES_FACTOR / 1000
    text = (f"device copy: {tbps:.2f} TB/s on {ctx.label()} (read + written) vs {floor.who} floor {floor_tbps:.2f} "
            f"TB/s for {floor.product}")
    info.update(floor_tb_per_s=round(floor_tbps, 3), floor_source=floor.source)
    evidence = [f"floor: {floor.cite()}, bytes counted twice here"]
    bottom = COPY_FAIL_OF_PEAK * (product.hbm_tbps if product and product.hbm_tbps else floor_tbps)
    if tbps >= floor_tbps:
        return passed(text, evidence, **info, id=ID)
    if tbps >= bottom:
        below = "the site's floor" if floor.site else "the floor AMD's health check fails a GPU at"
        return warned(text + f": below {below}", slow_gpu_fix(ctx), evidence,
                      **info, id=ID)
    return failed(text + f": far below what it should reach (< {bottom:.2f} TB/s)", slow_gpu_fix(ctx), evidence,
                  **info, id=ID)


PROBE = Probe(ID, "device memory moves data at the speed this GPU should reach", 20, judge, run=run, run_cpu=run_cpu)
