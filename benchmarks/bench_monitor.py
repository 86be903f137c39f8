"""rocmcheck monitor and the leak finder on a real GPU. Prints as it goes; writes under $OUT (or ./bench-out).

    python benchmarks/bench_monitor.py            # on an NVIDIA (or ROCm) GPU machine, ~4 min

1. Records the monitor's own nvidia-smi queries (csv with header) while a GPU process runs, for fixtures.
2. A deliberately leaking training loop (it keeps every loss tensor in a list, the graph with it) under
   `rocmcheck monitor`: the verdict must be monitor.memory_curve = fail (staircase).
3. The same loop under the leak finder (leak_watch(optimizer)): the report must name `losses.append(loss)`.
4. A loop that does not leak under the monitor: verdict pass, and its median step time with and without the
   monitor (interval 1 s, NVML) -- the monitor's overhead.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT") or ROOT / "bench-out")
OUT.mkdir(parents=True, exist_ok=True)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
       "PYTHONUNBUFFERED": "1"}

# The training loop: a stack of bf16 MLP blocks big enough that each step's saved activations are ~0.5 GiB.
LOOP = textwrap.dedent("""
    import json, sys, time, torch
    LEAK, STEPS, WATCH = sys.argv[1] == "leak", int(sys.argv[2]), sys.argv[3] == "watch"
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU())
                                  for _ in range(8)]).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    losses, times = [], []

    def run():
        for step in range(STEPS):
            t0 = time.perf_counter()
            x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if LEAK:
                # The loss logged for the step comes from a forward with autograd on and no backward after it:
                # keeping the tensor keeps its whole graph, every saved activation (~64 MiB a step here).
                loss = model(x[:512]).float().pow(2).mean()
                losses.append(loss)
            else:
                losses.append(loss.item())
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            time.sleep(0.25)  # a data loader's pause: the curve gets several readings per step

    if WATCH:
        from rocmcheck.monitor.leak import leak_watch
        with leak_watch(opt, out_dir=sys.argv[4]) as w:
            run()
        print("LEAK_REPORT " + json.dumps(w.report.result().to_dict() if w.report else None))
    else:
        run()
    print("STEP_TIMES " + json.dumps(times))
""")


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    say("$ " + " ".join(argv))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=OUT)
    tail = (proc.stdout[-1500:] + proc.stderr[-3000:]).strip()
    print(tail, flush=True)
    return proc


def step_times(stdout: str) -> list[float]:
    line = next((l for l in stdout.splitlines() if l.startswith("STEP_TIMES ")), None)
    return json.loads(line.split(" ", 1)[1]) if line else []


def main() -> int:
    import torch

    from rocmcheck.units import GIB

    if not torch.cuda.is_available():
        say("no GPU: nothing to measure")
        return 0
    say(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
        f"{torch.cuda.get_device_properties(0).total_memory / GIB:.0f} GiB")
    loop = OUT / "loop.py"
    loop.write_text(LOOP)
    failures = []

    # 1. the monitor's nvidia-smi queries, recorded while a GPU process holds memory
    if shutil.which("nvidia-smi"):
        from rocmcheck.monitor.sampler import NVIDIA_QUERY
        from rocmcheck.runner import run_command

        holder = subprocess.Popen([sys.executable, "-c", "import torch, time; x = torch.ones(2**28, device='cuda');"
                                   " time.sleep(20)"], env=ENV)
        time.sleep(12)
        for name, argv in (("query-gpu-monitor-csv-nounits", ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_QUERY)}",
                                                                 "--format=csv,nounits"]),
                           ("query-compute-apps-csv-nounits", ["nvidia-smi",
                                                                "--query-compute-apps=gpu_uuid,pid,used_memory",
                                                                "--format=csv,nounits"])):
            result = run_command(argv, 20)
            (OUT / f"nvidia-smi-{name}.txt").write_text(result.stdout)
            say(f"{' '.join(argv)} ->\n{result.stdout}")
        holder.kill()

    # 2. the leaking loop under the monitor
    mon_leak = OUT / "monitor-leak"
    proc = run([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--out", str(mon_leak), "--",
                sys.executable, str(loop), "leak", "250", "no"])
    verdict = json.loads(next(mon_leak.glob("verdict-*.json")).read_text()) if mon_leak.exists() else {"results": []}
    curve = next((r for r in verdict["results"] if r["id"] == "monitor.memory_curve"), None)
    say(f"leaking loop: exit {proc.returncode}; "
        f"memory_curve = {curve and curve['status']}: {curve and curve['summary']}")
    if not curve or curve["status"] != "fail" or "staircase" not in curve["summary"]:
        failures.append("leaking loop: verdict is not a staircase")

    # 3. the leaking loop under the leak finder
    proc = run([sys.executable, str(loop), "leak", "12", "watch", str(OUT)])
    line = next((l for l in proc.stdout.splitlines() if l.startswith("LEAK_REPORT ")), "LEAK_REPORT null")
    report = json.loads(line.split(" ", 1)[1])
    say(f"leak report: {report and report['summary']}")
    if not report or "losses.append(loss)" not in report["summary"]:
        failures.append("leak finder: the report does not name losses.append(loss)")
    if report and report.get("data", {}).get("groups"):
        say("largest surviving allocation groups: " + json.dumps(report["data"]["groups"][:3], default=str)[:800])

    # 4. the clean loop: verdict, and step time with and without the monitor
    clean_mon = OUT / "monitor-clean"
    with_mon = run([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--out", str(clean_mon), "--",
                    sys.executable, str(loop), "clean", "150", "no"])
    without = run([sys.executable, str(loop), "clean", "150", "no"])
    verdict = json.loads(next(clean_mon.glob("verdict-*.json")).read_text()) if clean_mon.exists() else {"results": []}
    curve = next((r for r in verdict["results"] if r["id"] == "monitor.memory_curve"), None)
    say(f"clean loop: memory_curve = {curve and curve['status']}: {curve and curve['summary']}")
    if not curve or curve["status"] != "pass":
        failures.append("clean loop: verdict is not pass")
    a, b = step_times(with_mon.stdout)[5:], step_times(without.stdout)[5:]
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        say(f"step time, median of {len(a)} steps: with monitor {ma * 1000:.2f} ms, without {mb * 1000:.2f} ms, "
            f"overhead {100 * (ma - mb) / mb:+.2f}% (reader: {verdict.get('reader')}, interval 1 s)")
    for f in sorted(OUT.rglob("*")):
        if f.is_file():
            say(f"file: {f.relative_to(OUT)} ({f.stat().st_size} bytes)")
    say("FAILURES: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
