"""probe.fp8_gemm alone on a GPU, in one call (well under a minute on an H100):

    python benchmarks/bench_fp8_probe.py          # in this process, then as `rocmcheck probe fp8_gemm --json`
    python benchmarks/bench_fp8_probe.py --cpu    # CPU test mode (small sizes, OCP formats): the script itself

1. In this process: torch's device, the arch and the fp8 formats picked for it, the probe's runner timed, each
   case's error beside its limits, the fp8 and bf16 rates and their ratio, and the verdict.
2. As a person runs it: `rocmcheck probe fp8_gemm --json` in a fresh process (wall time with torch's import).
Writes bench_fp8_probe.json to $OUT (or /tmp)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import child, last_json  # noqa: E402

from rocmcheck.probes.catalog import fp8_gemm as probe  # noqa: E402
from rocmcheck.probes.fp8_formats import fp8_gemm_limit, fp8_quantized_limit  # noqa: E402
from rocmcheck.probes.spec import ProbeSkip, RunOptions  # noqa: E402


def in_process(cpu: bool) -> dict:
    import torch

    from rocmcheck.facts.torch_devices import describe_devices
    from rocmcheck.probes.context import DeviceContext

    devices = [] if cpu else describe_devices(torch)
    if not cpu and not devices:
        return {"error": f"torch {torch.__version__} sees no GPU"}
    device = torch.device("cpu") if cpu else torch.device("cuda", 0)
    ctx = (DeviceContext(vendor="cpu") if cpu else
           DeviceContext.from_device_event({"devices": devices, "count": len(devices), "hip": torch.version.hip,
                                            "torch": torch.__version__}))
    t0 = time.perf_counter()
    try:
        data = (probe.run_cpu if cpu else probe.run)(device, RunOptions())
    except ProbeSkip as skip:
        return {"arch": ctx.arch, "skip": str(skip), "seconds": time.perf_counter() - t0}
    seconds = time.perf_counter() - t0
    verdict = probe.judge(data, ctx)
    return {"device": ctx.label(), "arch": ctx.arch, "seconds": seconds, "data": data,
            "verdict": {"status": verdict.status.value, "summary": verdict.summary}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="CPU test mode (small sizes)")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT") or "/tmp")
    out_dir.mkdir(parents=True, exist_ok=True)

    report = {"in_process": in_process(args.cpu)}
    r = report["in_process"]
    if r.get("error") or r.get("skip"):
        print(f"in process: {r.get('error') or 'skip: ' + r['skip']}")
    else:
        data = r["data"]
        k = data["shape"][2]
        print(f"{r['device']}: {data['family']} ({data['e4m3']} / {data['e5m2']}), runner {r['seconds']:.2f} s, "
              f"torch {data['torch']} hip {data['hip']}")
        for name, c in data["cases"].items():
            if c.get("error"):
                print(f"  {name:20s} {c['a']} x {c['b']}: {c['error']}")
                continue
            print(f"  {name:20s} {c['a']} x {c['b']}: rel err {c['rel_err']:.2e} (limit {fp8_gemm_limit(k):.1e}), "
                  f"after the cast {c['quantized_rel_err']:.3f} (limit {fp8_quantized_limit(c['a'], c['b'], k):.3f})")
        rate = data["rate"]
        if rate.get("error"):
            print(f"  rate: {rate['error']}")
        else:
            print(f"  rate at {rate['shape'][0]}^3: fp8 {rate['fp8_tflops']:.1f} TFLOP/s ({rate['fp8_ms']:.3f} ms), "
                  f"bf16 {rate['bf16_tflops']:.1f} ({rate['bf16_ms']:.3f} ms): "
                  f"{rate['fp8_tflops'] / rate['bf16_tflops']:.2f}x")
        print(f"verdict: {r['verdict']['status']}: {r['verdict']['summary']}")
    if not args.cpu:
        wall, code, out, err = child(["-m", "rocmcheck", "probe", "fp8_gemm", "--json"], args.timeout)
        doc = last_json(out) or {}
        results = [x for x in doc.get("results", []) if x.get("id") == probe.ID]
        report["cli"] = {"wall_s": wall, "exit": code, "result": results[0] if results else None,
                         "stderr_tail": err.strip().splitlines()[-3:]}
        got = results[0] if results else {}
        print(f"rocmcheck probe fp8_gemm --json: {wall:.1f} s, exit {code}: {got.get('status')} {got.get('summary')}")
    (out_dir / "bench_fp8_probe.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
