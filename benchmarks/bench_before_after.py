"""Wall time a person waits for, with an older rocmcheck and this one, in one run on one machine (prints as it goes):

    python benchmarks/bench_before_after.py --before DIR [--rounds 2] [--shape llama-1.1b]

DIR holds an older rocmcheck package (DIR/rocmcheck, e.g. `git archive OLD rocmcheck | tar -x -C DIR`). Each round
runs, for the older package and this one in turn (the order swapped every round), what a person runs:
  smoke      `rocmcheck smoke-train --json`, the bundled model
  own        `rocmcheck smoke-train --json --model FOLDER --steps 30`, a random-init folder of --shape made once (the
             shapes of bench_time_to_verdict.py): the user's own model, its reload check read back from the files
  doctor     `rocmcheck doctor`, start to verdict (the fine-tune included)
Every package's bytecode is written first (python -m compileall, as pip does at install), so no run compiles.
Then, with --save-parts, the reload check's one kept speed-up on its own: the --shape model saved with
save_pretrained from the GPU, against host copies first (train/saved_weights.host_copies, pinned) and
save_pretrained from them, each twice, interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_time_to_verdict as ttv  # noqa: E402

REPO = ttv.REPO

SAVE_PARTS = r"""
import shutil, sys, tempfile, time, torch, transformers
from rocmcheck.train import modeling, saved_weights
folder = sys.argv[1]
model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).cuda()
def timed(label, fn):
    out = tempfile.mkdtemp(prefix="save-parts-")
    torch.cuda.synchronize(); t0 = time.perf_counter(); fn(out); took = time.perf_counter() - t0
    shutil.rmtree(out)
    print(f"  {label:<52} {took:6.2f} s", flush=True)
def from_copies(out):
    host = saved_weights.host_copies(model.state_dict())
    modeling.save_checkpoint(model, out, dict(host))
for _ in range(2):
    timed("save_pretrained from the GPU", lambda out: modeling.save_checkpoint(model, out))
    timed("pinned host copies, then save_pretrained from them", from_copies)
"""


def compile_all(roots: list[str]) -> None:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *roots], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ttv.say(f"bytecode written for {len(roots)} folders in {time.perf_counter() - t0:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="a folder holding an older rocmcheck package")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shape", default="llama-1.1b", choices=sorted(ttv.GPU_SHAPES | ttv.QUICK_SHAPES))
    ap.add_argument("--only", default="smoke,own,doctor")
    ap.add_argument("--save-parts", action="store_true")
    ap.add_argument("--budget", type=float, default=560.0)
    a = ap.parse_args()
    a.before = a.before.resolve()  # the children run from a folder of their own (below)
    budget = ttv.Budget(a.budget)
    want = a.only.split(",")
    site = [sysconfig.get_paths()["purelib"]] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    compile_all([*dict.fromkeys(site), str(REPO / "rocmcheck"), str(a.before / "rocmcheck")])
    variants = {"before": ttv.base_env({"PYTHONPATH": os.pathsep.join([str(a.before), *site[1:]])}),
                "after": ttv.base_env()}
    # Each child runs from a folder of its own: `python -m` puts its working folder first on the path, and the
    # repository's would shadow the older package.
    ttv.REPO = Path(tempfile.mkdtemp(prefix="rocmcheck-before-after-"))
    models = Path(tempfile.gettempdir()) / "rocmcheck-bench-models"
    spec = (ttv.GPU_SHAPES | ttv.QUICK_SHAPES)[a.shape]
    folder = ttv.make_folder(models, a.shape, spec, budget, variants["after"]) if "own" in want else None
    walls: dict[tuple[str, str], list[float]] = {}
    for i in range(a.rounds):
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        for name in order:
            env = variants[name]
            for part in want:
                if part == "smoke":
                    r = ttv.timed([sys.executable, "-m", "rocmcheck", "smoke-train", "--json"], budget.cut(300), env)
                elif part == "own" and folder is not None:
                    r = ttv.timed([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--model", str(folder),
                                   *spec["flags"]], budget.cut(400), env)
                elif part == "doctor":
                    r = ttv.timed([sys.executable, "-m", "rocmcheck", "doctor"], budget.cut(400), env)
                else:
                    continue
                if part == "doctor":
                    ttv.say(f"round {i + 1} {name} doctor: {r.get('wall_s')} s (exit {r.get('rc')})")
                else:
                    ttv.show_smoke(f"round {i + 1} {name} {part}", ttv.smoke_row(r))
                if r.get("wall_s") is not None and r.get("rc") in (0, 1):
                    walls.setdefault((part, name), []).append(r["wall_s"])
    ttv.say("\n| run | before (s) | after (s) | change |\n|---|---|---|---|")
    for part in want:
        old, new = walls.get((part, "before")), walls.get((part, "after"))
        if old and new:
            m_old, m_new = statistics.median(old), statistics.median(new)
            ttv.say(f"| {part} | {', '.join(f'{w:.2f}' for w in old)} | {', '.join(f'{w:.2f}' for w in new)} | "
                    f"{100 * (m_new - m_old) / m_old:+.1f}% (medians) |")
    if a.save_parts and folder is not None:
        ttv.say("\nsave parts (the reload check's host copies):")
        r = ttv.timed([sys.executable, "-c", SAVE_PARTS, str(folder)], budget.cut(300), variants["after"])
        ttv.say(r.get("stdout", "") or r.get("stderr_tail", "")[-800:])
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "before_after.json").write_text(
            json.dumps({f"{p}/{n}": w for (p, n), w in walls.items()}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
