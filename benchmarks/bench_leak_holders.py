"""The leak finder's held-back variants on a GPU, and a fast climb shorter than 30 s under `rocmcheck monitor`.
Prints each verdict; writes the logs under $OUT (or ./bench-out).

    python benchmarks/bench_leak_holders.py            # on an NVIDIA (or ROCm) GPU machine, ~3 min

1. Every held-back variant of tests/test_monitor_leak_heldback.py (never used to tune the finder), its model and
   batches moved to the GPU (the Trainer variant on the GPU too): the holder, the line, the advice (a view's copy
   is `.detach().cpu()` there), and whether they are the ones the test expects. First the torch version and how
   it hands autograd nodes to Python (torch <= 2.11 made a node's wrapper anew: what the GPU runs of RESULTS 23
   and 26 missed graphs by, tests/test_monitor_leak_gpu_path.py).
2. A running loss kept as a tensor at scale (`total = total + val_loss`, a loss computed with its graph and never
   backpropagated: every step keeps its activations), under leak_watch(optimizer) as a person adds it: no
   `always`, the watch starts when the allocator's baseline rises.
3. The same loop, 2 GiB a step, under `rocmcheck monitor --interval 0.2 --`: it stops on its own at 50 GiB or
   25 s, well before 30 s of readings: monitor.memory_curve must fail with its rate in GiB/s. Then the loop
   without the kept loss: a short flat run, skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package (print_readings imports it) and the variants
OUT = Path(os.environ.get("OUT") or ROOT / "bench-out")
OUT.mkdir(parents=True, exist_ok=True)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
       "PYTHONUNBUFFERED": "1"}

import test_monitor_leak_heldback as heldback  # noqa: E402

CUDA_HEAD = heldback.HEAD.replace(
    "torch.nn.Linear(128, 6))", "torch.nn.Linear(128, 6)).cuda()").replace(
    "return torch.randn(16, 32), torch.randint(0, 6, (16,))",
    "return torch.randn(16, 32, device='cuda'), torch.randint(0, 6, (16,), device='cuda')")

AT_SCALE = """
    import sys, time
    import torch
    from rocmcheck.monitor.leak import leak_watch

    keep, watch_it = sys.argv[1] == "keep", sys.argv[2] == "watch"
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8192, 8192) for _ in range(8)]
    model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.GELU())]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    total, start = 0, time.monotonic()

    def train(watch=None):
        global total
        for step in range(200):
            x = torch.randn(4096, 8192, device="cuda")
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            val_loss = model(torch.randn(4096, 8192, device="cuda")).pow(2).mean()  # with its graph
            if keep:
                total = total + val_loss
            torch.cuda.synchronize()
            if watch is None:
                time.sleep(0.5)
            if torch.cuda.memory_allocated() > 50 * 2**30 or time.monotonic() - start > 25 or \\
                    (watch is not None and watch.report is not None):
                break
        print(f"steps {step + 1}, allocated {torch.cuda.memory_allocated() / 2**30:.1f} GiB, "
              f"{time.monotonic() - start:.1f} s", flush=True)

    if watch_it:
        with leak_watch(opt, out_dir=sys.argv[3]) as watch:
            train(watch)
        r = watch.report.result() if watch.report else None
        print("RESULT", r.status.value if r else None, "|", r.summary if r else "", "|", r.fix.line() if r else "")
    else:
        train()
"""


def run(argv: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=ENV)


def result_line(proc: subprocess.CompletedProcess) -> str:
    return next((x for x in proc.stdout.splitlines() if x.startswith("RESULT")), f"no result: {proc.stderr[-1500:]}")


NODE_WRAPPERS = """
import sys, torch
y = (torch.ones(2, requires_grad=True) * 2).sum()
print("torch", torch.__version__, "python", sys.version.split()[0], "autograd node wrappers",
      "kept while the node lives" if sys.getrefcount(y.grad_fn) > 1 else "made anew once let go (torch <= 2.11)")
"""


def held_back() -> None:
    print("== 1. held-back variants on the GPU", flush=True)
    print(run([sys.executable, "-c", NODE_WRAPPERS], OUT).stdout.strip(), flush=True)
    for name, (body, holder, line, advice) in sorted(heldback.VARIANTS.items()):
        work = OUT / f"variant-{name}"
        work.mkdir(exist_ok=True)
        body = textwrap.dedent(body).replace("torch.zeros(0, dtype=torch.long)",  # the predictions on the GPU
                                             "torch.zeros(0, dtype=torch.long, device='cuda')")
        (work / "loop.py").write_text(textwrap.dedent(CUDA_HEAD) + body + textwrap.dedent(heldback.TAIL))
        got = result_line(run([sys.executable, "loop.py"], work))
        advice = advice and advice.replace(".detach().clone()", ".detach().cpu()")  # a view's copy, off the GPU
        ok = got.startswith("RESULT fail") and holder in got and f"(`{line}`)" in got and (not advice or advice in got)
        known = " (missed on CPU too: tests/test_monitor_leak_heldback.py MISSED)" if name in heldback.MISSED else ""
        print(f"{name}: {'as expected' if ok else 'NOT as expected'}{known}\n  {got}", flush=True)
    work = OUT / "variant-trainer"
    work.mkdir(exist_ok=True)
    (work / "hf.py").write_text(textwrap.dedent(heldback.HF_SCRIPT).replace("use_cpu=True", "use_cpu=False"))
    got = result_line(run([sys.executable, "hf.py"], work))
    ok = "`self.running` of Keeping" in got and "(`self.running = self.running + loss`)" in got
    print(f"trainer: {'as expected' if ok else 'NOT as expected'}\n  {got}", flush=True)


def at_scale() -> None:
    work = OUT / "at-scale"
    work.mkdir(exist_ok=True)
    (work / "loop.py").write_text(textwrap.dedent(AT_SCALE))
    print("== 2. a running loss kept as a tensor at scale, under leak_watch(opt)", flush=True)
    proc = run([sys.executable, "loop.py", "keep", "watch", str(work)], work)
    print(proc.stdout.strip() or proc.stderr[-2000:], flush=True)
    print("== 3. the same loop under rocmcheck monitor (a run shorter than 30 s)", flush=True)
    for keep in ("keep", "clean"):
        out = OUT / f"monitor-{keep}"
        proc = run([sys.executable, "-m", "rocmcheck", "monitor", "--quiet", "--interval", "0.2", "--force",
                    "--out", str(out), "--", sys.executable, "loop.py", keep, "nowatch"], work)
        verdict = [x for x in proc.stderr.splitlines() if x.strip()]
        print(f"-- {keep}: exit {proc.returncode}\n{proc.stdout.strip()}\n" + "\n".join(verdict[-14:]), flush=True)
        print_readings(out)


def print_readings(out: Path) -> None:
    """The recorded curve, a reading a line: what the memory curve's judge was given."""
    from rocmcheck.monitor.recording import read_recordings

    try:
        samples = read_recordings([out])
    except Exception as exc:  # noqa: BLE001 - a benchmark's diagnostics: say why and go on
        print(f"   no readings: {exc}", flush=True)
        return
    for s in samples:
        used = f"{s.used_bytes / 2**30:6.2f}" if s.used_bytes is not None else "     ?"
        print(f"   t={s.t:6.2f} gpu{s.gpu} used {used} GiB util {s.util_pct}", flush=True)


if __name__ == "__main__":
    held_back()
    at_scale()
