"""Probe verdicts recorded in a bundle, judged again against a site's floors (`doctor --bundle FILE --knowledge DIR`).
No torch here.

A bundle keeps each probe's verdict as the stage gave it, data included. For the probes judged against a floor the
verdict's data holds every measurement the judge reads: the GEMM rate and shape, the device copy rate, the two host
copy rates, the GPU pairs with their link types. So where the site sets a floor for the recorded GPU's product and
one of those measures, the probe's own judge runs again on the recorded numbers, the site's floor in AMD's place,
and its verdict replaces the recorded one (which its evidence quotes). Elsewhere the recorded verdict stands."""

from __future__ import annotations

from typing import Any, Callable

from rocmcheck.knowledge.floors import (
    DEVICE_TO_HOST_GBPS,
    GEMM_BF16_TFLOPS,
    HBM_COPY_GBPS,
    HOST_TO_DEVICE_GBPS,
    XGMI_PAIR_GBPS,
)
from rocmcheck.probes.catalog import copy_bandwidth, gemm_tflops, host_bandwidth, p2p_matrix
from rocmcheck.probes.context import DeviceContext
from rocmcheck.result import CheckResult, Status
from rocmcheck.safe.text import excerpt

Inputs = Callable[[dict[str, Any]], dict[str, Any]]

# probe id -> (its judge, the floor measures it reads, the judge's input rebuilt from the verdict's data)
FLOOR_JUDGED: dict[str, tuple[Callable[[dict[str, Any], DeviceContext], CheckResult], tuple[str, ...], Inputs]] = {
    gemm_tflops.ID: (gemm_tflops.judge, (GEMM_BF16_TFLOPS,),
                     lambda d: {"tflops": d["tflops"], "shape": d["shape"]}),
    copy_bandwidth.ID: (copy_bandwidth.judge, (HBM_COPY_GBPS,),
                        lambda d: {"tb_per_s": d["tb_per_s"], "bytes": d.get("bytes")}),
    host_bandwidth.ID: (host_bandwidth.judge, (HOST_TO_DEVICE_GBPS, DEVICE_TO_HOST_GBPS),
                        lambda d: {"h2d_gb_per_s": d["h2d_gb_per_s"], "d2h_gb_per_s": d["d2h_gb_per_s"],
                                   "bytes": d.get("bytes")}),
    # The verdict keeps the link types alone (its "links"); the judge reads them under "kinds".
    p2p_matrix.ID: (p2p_matrix.judge, (XGMI_PAIR_GBPS,),
                    lambda d: {"gpus": d["gpus"], "pairs": d["pairs"], "links": {"kinds": d.get("links") or {}}}),
}
JUDGED_STATUSES = (Status.PASS, Status.WARN, Status.FAIL)


def rejudge(recorded: CheckResult, ctx: DeviceContext) -> CheckResult | None:
    """The recorded verdict judged again with ctx's site floors, or None when it stands as recorded: not a probe
    judged against a floor, not a measured verdict (a skip, an error), or no site floor for ctx's product and the
    probe's measures. Recorded data the judge cannot read (a damaged or hand-edited bundle) leaves the recorded
    verdict, with a line saying so."""
    entry = FLOOR_JUDGED.get(recorded.id)
    product = ctx.product()
    if entry is None or product is None or ctx.site_rules is None or recorded.status not in JUDGED_STATUSES:
        return None
    judge, keys, inputs = entry
    floors = [f for f in (ctx.site_rules.floor(product.name, k) for k in keys) if f is not None]
    if not floors:
        return None
    was = f"recorded on the machine: {recorded.status.value}: {excerpt(recorded.summary)}"
    try:
        again = judge(inputs(recorded.data), ctx)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
        recorded.evidence.append(f"not judged again against the site's floor ({floors[0].source}): the recorded "
                                 "measurements are incomplete")
        return None
    again.data.setdefault("seconds", recorded.data.get("seconds"))
    again.data["rejudged"] = True
    again.evidence += [f"judged again on replay against the site's floor: {', '.join(f.cite() for f in floors)}",
                       was]
    return again
