"""probe.stress_gemm (level 3): the bf16 8192^3 product at full load for its share of `doctor --duration`, with
clocks, power, temperature and slowdown reasons sampled every interval; judged on four things:
- every repeat bitwise equal to the first product (same inputs, same kernel): a GPU that computes differently
  from one run to the next is failing;
- the memory-error counters (ECC / RAS) not grown between before and after;
- the rate holding: the slowest interval against the median interval (min / median);
- no heat or power-hardware slowdown reason during the run.
A GPU that hangs under the load (the ROCm runtime's "HW Exception ... reason :GPU Hang" on the child's stderr)
gets its own verdict from the stage (rocmcheck/probes/gpu_fault.py). Runner: rocmcheck/probes/stress.py."""

from __future__ import annotations

import statistics
from typing import Any

from rocmcheck.fixes import note, shell
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.judging import number, slow_gpu_fix
from rocmcheck.probes.ras import memory_errors_fix, ras_lines
from rocmcheck.probes.spec import Probe, RunOptions
from rocmcheck.probes.telemetry import slowdown
from rocmcheck.result import CheckResult, failed, passed, warned

ID = "probe.stress_gemm"
# The slowest interval against the median one. A GPU at full load settles at its power cap and holds its rate
# within a few per cent from interval to interval (probe.gemm_tflops's run-to-run spread on an H200 was 99.3-104.3 %
# over five runs, benchmarks/RESULTS.md section 3); 10 % below its own median is a clock or power drop, 25 % a GPU
# that cannot hold the load. benchmarks/bench_level3.py measures the healthy ratio on an H200.
STABILITY_WARN_BELOW = 0.90
STABILITY_FAIL_BELOW = 0.75
MIN_INTERVALS_JUDGED = 4  # fewer points say nothing about stability
FALLBACK_DURATION_S = 60.0  # a run given no duration (the stage always gives one)
CPU_MAX_DURATION_S = 2.0  # CPU test mode: the real loop, briefly
CPU_SIZE = 128

_WRONG_FIX = note("the GPU computes differently from one run to the next under load: drain the node and test it "
                  "with the vendor diagnostics (AMD: rvs, module gst; NVIDIA: dcgmi diag -r 3); if it repeats, "
                  "contact the vendor (RMA)")


def _vendor(torch: Any, device: Any) -> str:
    return "cpu" if device.type != "cuda" else ("amd" if torch.version.hip else "nvidia")


def _run(device: Any, options: RunOptions, cpu: bool) -> dict[str, Any]:
    import torch

    from rocmcheck.probes.links import torch_bus_id
    from rocmcheck.probes.ras import read_counters
    from rocmcheck.probes.stress import STRESS_SIZE, sustained_gemm
    from rocmcheck.probes.telemetry import open_telemetry

    vendor = _vendor(torch, device)
    duration = options.duration_s if options.duration_s is not None else FALLBACK_DURATION_S
    telemetry, why = None, "CPU test mode"
    if not cpu:
        bus = torch_bus_id(torch.cuda.get_device_properties(device))
        telemetry, why = open_telemetry(vendor, bus, torch.cuda.device_count())
    before = read_counters(vendor) if not cpu else {}
    try:
        if cpu:
            data = sustained_gemm(device, min(duration, CPU_MAX_DURATION_S), size=CPU_SIZE, note=options.note,
                                  warmup_s=0.1, interval_s=0.2,
                                  min_intervals=MIN_INTERVALS_JUDGED)
        else:
            data = sustained_gemm(device, duration, size=STRESS_SIZE, telemetry=telemetry, note=options.note,
                                  min_intervals=MIN_INTERVALS_JUDGED)
    finally:
        if telemetry is not None:
            telemetry.close()
    data["telemetry"]["why_not"] = None if telemetry is not None else why
    data["ras"] = {"before": before, "after": read_counters(vendor) if not cpu else {}}
    data["vendor"] = vendor
    return data


def run(device: Any, options: RunOptions) -> dict[str, Any]:
    return _run(device, options, cpu=False)


def run_cpu(device: Any, options: RunOptions) -> dict[str, Any]:
    return _run(device, options, cpu=True)


def _spread(values: list[float]) -> str:
    return f"{min(values):,.4g} / {statistics.median(values):,.4g} / {max(values):,.4g}"


def _telemetry_lines(points: list[dict[str, Any]], data: dict[str, Any]) -> list[str]:
    lines = []
    for key, label in (("sm_clock_mhz", "clock MHz"), ("power_w", "power W"), ("temp_c", "temperature C")):
        values = [v for v in (number(p.get(key)) for p in points) if v is not None]
        if values:
            lines.append(f"{label} min / median / max: {_spread(values)}")
    if not lines:
        tel = data.get("telemetry") or {}
        lines.append(f"clocks, power and temperature not read: {tel.get('why_not') or 'no binding reading'}")
    return lines


def judge(data: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    points: list[dict[str, Any]] = data["intervals"]
    rates = [r for r in (number(p.get("tflops")) for p in points) if r is not None and r > 0]
    m, n, k = data["shape"]
    what = f"bf16 GEMM {m}x{n}x{k} at full load for {data['ran_s']:.0f} s"
    if not rates:
        return failed(f"{what}: no rate could be measured on {ctx.label()}", slow_gpu_fix(ctx), id=ID)
    median = statistics.median(rates)
    stability = min(rates) / median
    quarter = max(1, len(rates) // 4)
    trend = statistics.median(rates[-quarter:]) / statistics.median(rates[:quarter])
    differing = [p for p in points if p.get("differ")]
    products = sum(int(p.get("differ") or 0) for p in points)
    grew, ras_line = ras_lines(data)
    slowed = [(p, slowdown(p)) for p in points]
    slowed = [(p, s) for p, s in slowed if s]
    evidence = [f"{len(rates)} intervals of {data['gemms_per_interval']} products each; TFLOP/s min / median / max: "
                f"{_spread(rates)}; slowest = {stability:.0%} of the median; last quarter = {trend:.0%} of the "
                "first", ras_line, *_telemetry_lines(points, data)]
    info = dict(median_tflops=round(median, 1), min_tflops=round(min(rates), 1), stability=round(stability, 4),
                trend=round(trend, 4), intervals=len(points), differing_repeats=products,
                ras_increases=grew, slowdown_intervals=len(slowed), shape=data["shape"], ran_s=data["ran_s"],
                curve=[[p.get("t_s"), number(p.get("tflops"))] for p in points])
    if differing:
        first = differing[0]
        evidence.insert(0, f"first differing products in the interval ending at {first.get('t_s')} s: "
                           f"{first['differ']} product(s), {first.get('differ_elements')} element(s)")
        total = len(points) * int(data["gemms_per_interval"])
        return failed(f"{what}: {products} of {total} repeats of the same product differ bitwise from the first "
                      f"on {ctx.label()} (in {len(differing)} of {len(points)} intervals)", _WRONG_FIX, evidence,
                      **info, id=ID)
    if grew:
        return failed(f"{what}: GPU memory errors appeared during the run on {ctx.label()} ({grew[0]})",
                      memory_errors_fix(ctx.vendor), evidence, **info, id=ID)
    judged = len(rates) >= MIN_INTERVALS_JUDGED
    if judged and stability < STABILITY_FAIL_BELOW:
        return failed(f"{what}: the rate does not hold on {ctx.label()}: the slowest interval is {stability:.0%} of "
                      f"the median {median:,.4g} TFLOP/s (< {STABILITY_FAIL_BELOW:.0%})", _slowdown_fix(ctx),
                      evidence, **info, id=ID)
    if slowed:
        reasons = sorted({r for _, s in slowed for r in s})
        return warned(f"{what}: slowed by {', '.join(reasons)} in {len(slowed)} of {len(points)} intervals on "
                      f"{ctx.label()}", _slowdown_fix(ctx), evidence, **info, id=ID)
    if judged and stability < STABILITY_WARN_BELOW:
        return warned(f"{what}: the rate wavers on {ctx.label()}: the slowest interval is {stability:.0%} of the "
                      f"median {median:,.4g} TFLOP/s (< {STABILITY_WARN_BELOW:.0%})", _slowdown_fix(ctx), evidence,
                      **info, id=ID)
    held = f"slowest interval {stability:.0%} of the median" if judged else "too short to judge its stability"
    return passed(f"{what}: median {median:,.4g} TFLOP/s, {held}, every repeat bitwise identical, no slowdown "
                  f"reason", evidence, **info, id=ID)


def _slowdown_fix(ctx: DeviceContext):
    why = ("under load: look for a slowdown reason, a lowered power cap or a hot GPU; check cooling (fans, airflow, "
           "inlet temperature) and power delivery; another process on the GPU also takes its share")
    if ctx.vendor == "amd":
        return shell("amd-smi metric --power --clock --temperature", why)
    return shell("nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER,CLOCK", why)


PROBE = Probe(ID, "bf16 GEMM at full load holds its rate, computes the same bits every time, no new memory errors",
              60, judge, run=run, run_cpu=run_cpu, level=3, duration_share=0.7)
