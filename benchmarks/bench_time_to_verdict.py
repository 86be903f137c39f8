"""Time to verdict, each figure beside its floor and its peers measured in the same run (prints as it goes):

    python benchmarks/bench_time_to_verdict.py            # a GPU machine: the real shapes (1.1B, Mistral-shaped 2B, 7B)
    python benchmarks/bench_time_to_verdict.py --quick    # CPU-sized shapes, one run of each
    python benchmarks/bench_time_to_verdict.py --only smoke,doctor --runs 3

Every figure is a child process timed from its spawn to its exit (what a person waits for):
  floor       bare `import torch, transformers` and the device's first use (CUDA: a tensor on the GPU, synchronized)
  peers       `accelerate test`, `python -m torch.utils.collect_env`, `ds_report`, `accelerate env` (those installed)
  smoke       `rocmcheck smoke-train --json`, the bundled model: wall, its own parts (info.timings_s), the reload's
              save and verify seconds (info.reload), its verdicts
  own         `smoke-train --json --model DIR --steps 30` on random-init folders made once from a config.json and
              saved as several safetensors shards in --models-dir (GPU: TinyLlama's 1.1B, a Mistral-shaped 2B, and
              Llama-2's 7B with --gradient-checkpointing; --quick: shapes a CPU runs in seconds)
  doctor      `rocmcheck doctor --verbose` start to verdict, and when each GPU probe verdict was printed (seconds from
              the doctor's start and from the probe stage's), read line by line as it prints
  With --compile-bytecode, where torch has no bytecode (an image built with PYTHONDONTWRITEBYTECODE=1), it is
              written once first (python -m compileall, as pip does at install), so every figure is what a person
              with an installed stack waits for.

Bounded: --budget seconds in all (default 570); each child's timeout is cut to what is left, and a part that no longer
fits is skipped and named. Writes every figure as JSON to --json, default $OUT/time_to_verdict.json when OUT is set.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "rocmcheck" / "train" / "assets" / "tiny-llama"
PARTS = ("floor", "smoke", "doctor", "own", "peers")

FLOOR_CODE = ("import torch, transformers\n"
              "if torch.cuda.is_available():\n"
              "    torch.zeros(1, device='cuda'); torch.cuda.synchronize()\n"
              "else:\n"
              "    torch.zeros(1)\n")

# Random-init folders: model_type, the config's sizes, the smoke-train flags. vocab 32000 (LLaMA-2's, and Mistral's)
# for the real shapes; the bundled tokenizer's ids all lie below it.
GPU_SHAPES: dict[str, dict[str, Any]] = {
    "llama-1.1b": {"model_type": "llama", "flags": ["--steps", "30"], "shard": "2GB",
                   "config": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                  num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                  max_position_embeddings=2048)},
    # Mistral's proportions (GQA 4:1, MLP 3.5x, sliding window) at about 1.9B parameters
    "mistral-2b": {"model_type": "mistral", "flags": ["--steps", "30"], "shard": "2GB",
                   "config": dict(hidden_size=2048, intermediate_size=7168, num_hidden_layers=32,
                                  num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                  max_position_embeddings=4096, sliding_window=4096)},
    # The 1.1B's folder again, trained as a LoRA adapter (the reload check saves and reloads the adapter)
    "llama-1.1b-lora": {"folder_of": "llama-1.1b", "flags": ["--steps", "30", "--lora-rank", "16"]},
    "llama-7b": {"model_type": "llama", "flags": ["--steps", "30", "--gradient-checkpointing"], "shard": "5GB",
                 "config": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                                num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)},
}
QUICK_SHAPES: dict[str, dict[str, Any]] = {
    "llama-tiny": {"model_type": "llama", "flags": ["--steps", "30"], "shard": "500KB",
                   "config": dict(hidden_size=96, intermediate_size=256, num_hidden_layers=3, num_attention_heads=6,
                                  num_key_value_heads=2, max_position_embeddings=128)},
    "mistral-small": {"model_type": "mistral", "flags": ["--steps", "30"], "shard": "5MB",
                      "config": dict(hidden_size=256, intermediate_size=896, num_hidden_layers=4, num_attention_heads=8,
                                     num_key_value_heads=2, max_position_embeddings=256, sliding_window=128)},
    "llama-small": {"model_type": "llama", "flags": ["--steps", "30", "--gradient-checkpointing"], "shard": "20MB",
                    "config": dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                                   num_key_value_heads=8, max_position_embeddings=256)},
}

MAKE_MODEL = r"""
import json, shutil, sys, torch, transformers
from pathlib import Path
out, spec, bundled = Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
tok = transformers.AutoTokenizer.from_pretrained(bundled)
sizes = dict(spec["config"]); sizes.setdefault("vocab_size", len(tok))
conf = transformers.AutoConfig.for_model(spec["model_type"], **sizes, bos_token_id=tok.bos_token_id,
                                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                         tie_word_embeddings=False)
torch.manual_seed(0)
where = "cuda" if torch.cuda.is_available() else "cpu"
with torch.device(where):
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
model.save_pretrained(out, max_shard_size=spec["shard"])
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(bundled / name, out / name)
print(json.dumps({"params": sum(p.numel() for p in model.parameters()),
                  "shards": len(list(out.glob("*.safetensors")))}))
"""


class Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def cut(self, timeout: float) -> float:
        return max(0.0, min(timeout, self.left() - 5.0))


def say(text: str = "") -> None:
    print(text, flush=True)


def base_env(extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1",
               COLUMNS="220")
    for key in drop:
        env.pop(key, None)
    env.update(extra or {})
    return env


def timed(argv: list[str], timeout: float, env: dict[str, str], on_line=None) -> dict[str, Any]:
    """Run argv (its own session, ended whole at the timeout); wall seconds, exit code (None: timed out), stdout,
    stderr's tail, and (on_line) each stdout line handed over with its time from the start as it arrives."""
    if timeout <= 0:
        return {"skipped": "no time left in the budget"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                            start_new_session=True)
    out: list[str] = []
    err: list[str] = []

    def read_out() -> None:
        for line in proc.stdout:
            out.append(line)
            if on_line is not None:
                on_line(time.perf_counter() - t0, line.rstrip("\n"))

    def read_err() -> None:
        for line in proc.stderr:
            err.append(line)
            del err[:-200]

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for r in readers:
        r.start()
    try:
        rc: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = None
    wall = time.perf_counter() - t0
    for r in readers:
        r.join(timeout=10)
    return {"wall_s": round(wall, 3), "rc": rc, "stdout": "".join(out), "stderr_tail": "".join(err)[-3000:]}


def tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else None


# ------------------------------------------------------------------------------------------------ the parts

def floor(record: dict, budget: Budget, runs: int, env: dict[str, str], label: str = "floor") -> None:
    rows = [timed([sys.executable, "-c", FLOOR_CODE], budget.cut(120), env) for _ in range(runs)]
    walls = [r["wall_s"] for r in rows if r.get("rc") == 0]
    record[label] = {"runs": [r.get("wall_s") for r in rows], "min_s": min(walls) if walls else None}
    say(f"{label}: import torch, transformers + device init: " + ", ".join(f"{w:.2f} s" for w in walls)
        + ("" if len(walls) == len(rows) else f" ({len(rows) - len(walls)} failed)"))


def peers(record: dict, budget: Budget, env: dict[str, str]) -> None:
    found = {}
    for label, argv, timeout in (("accelerate test", [tool("accelerate"), "test"], 180),
                                 ("collect_env", [sys.executable, "-m", "torch.utils.collect_env"], 120),
                                 ("ds_report", [tool("ds_report")], 120),
                                 ("accelerate env", [tool("accelerate"), "env"], 120)):
        if argv[0] is None:
            found[label] = {"skipped": "not installed"}
            say(f"peer {label}: not installed")
            continue
        r = timed([str(a) for a in argv], budget.cut(timeout), env)
        found[label] = {k: r[k] for k in ("wall_s", "rc", "skipped") if k in r}
        say(f"peer {label}: " + (r["skipped"] if "skipped" in r else f"{r['wall_s']:.2f} s (exit {r['rc']})"))
    record["peers"] = found


def smoke_row(r: dict[str, Any]) -> dict[str, Any]:
    """The figures of one smoke-train --json child."""
    row = {k: r[k] for k in ("wall_s", "rc", "skipped") if k in r}
    try:
        doc = json.loads(r.get("stdout") or "")
    except ValueError:
        row["no_report"] = (r.get("stderr_tail") or "")[-600:]
        return row
    info = doc.get("info", {})
    row.update(parts=info.get("timings_s", {}), reload=info.get("reload"), numerics=info.get("numerics_s"),
               warmup=info.get("attention_warmup"),
               run_s=info.get("wall_s"),
               device=info.get("device", {}).get("name"),
               verdicts={x["id"]: x["status"] for x in doc.get("results", [])},
               step_s=[round(m["step_s"], 4) for m in doc.get("metrics", []) if "step_s" in m][:3] + [
                   round(statistics.median(m["step_s"] for m in doc["metrics"]), 4)] if doc.get("metrics") else None,
               params=info.get("model", {}).get("params"))
    after = (info.get("reload") or {}).get("saved_after_step")
    times = [m["step_s"] for m in doc.get("metrics", []) if "step_s" in m]
    if after and len(times) > after:  # do the steps beside the save (step_save.py) run slower than the ones before?
        row["step_s_before_and_beside_save"] = [round(statistics.median(times[1:after]), 4) if after > 1 else None,
                                                round(statistics.median(times[after:]), 4)]
    return row


def show_smoke(label: str, row: dict[str, Any]) -> None:
    if "skipped" in row:
        say(f"{label}: skipped ({row['skipped']})")
        return
    if row.get("wall_s") is None:
        say(f"{label}: no figure")
        return
    parts = row.get("parts") or {}
    shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v >= 0.01)
    start_up = row["wall_s"] - (row.get("run_s") or 0)  # the interpreter and the CLI, before smoke_train starts
    rest = (row.get("run_s") or 0) - sum(v for v in parts.values() if isinstance(v, (int, float)))
    verdicts = row.get("verdicts") or {}
    bad = {k: v for k, v in verdicts.items() if v not in ("pass", "skip")}
    say(f"{label}: **{row['wall_s']:.2f} s** (exit {row['rc']}) = start-up {start_up:.2f} s + import torch and the "
        f"rest {rest:.2f} s + {shown}")
    if row.get("reload"):
        rl = row["reload"]
        say(f"    reload: {rl.get('method')} ({(rl.get('weight_bytes') or 0) / 2**30:.2f} GiB of weights): host "
            f"copies {rl.get('host_copy_s')} s, save {rl.get('save_s')} s, verify {rl.get('verify_s')} s (compare "
            f"{rl.get('compare_s')} s), removal {rl.get('remove_s')} s"
            + (f"; fell back: {rl['fallback']}" if rl.get("fallback") else "")
            + (f"; saved after step {rl['saved_after_step']}, step median before / beside the save "
               f"{row.get('step_s_before_and_beside_save')} s" if rl.get("saved_after_step") else ""))
    if row.get("numerics"):
        say(f"    numerics passes: {row['numerics']}; steps 1-3 and the median {row.get('step_s')} s")
    if row.get("warmup"):
        say(f"    attention warm-up: {row['warmup']}, waited for {parts.get('attention warm-up (wait)', 0):.2f} s")
    say(f"    {len(verdicts)} verdicts" + (f", not passing: {bad}" if bad else ", all pass or skip")
        + (f"; no report: {row['no_report'][-300:]}" if row.get("no_report") else ""))


def smoke(record: dict, budget: Budget, runs: int, env: dict[str, str], label: str = "smoke",
          flags: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rows = []
    for i in range(runs):
        r = timed([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", *flags], budget.cut(300), env)
        row = smoke_row(r)
        rows.append(row)
        show_smoke(f"{label} #{i + 1}", row)
    record.setdefault(label, []).extend(rows)
    return rows


def make_folder(root: Path, name: str, spec: dict[str, Any], budget: Budget, env: dict[str, str]) -> Path | None:
    path = root / name
    if (path / "config.json").is_file():
        return path
    shutil.rmtree(path, ignore_errors=True)
    r = timed([sys.executable, "-c", MAKE_MODEL, str(path), json.dumps(spec), str(BUNDLED)], budget.cut(900), env)
    if r.get("rc") != 0:
        say(f"made {name}: failed ({r.get('skipped') or r.get('stderr_tail', '')[-500:]})")
        return None
    made = json.loads(r["stdout"].strip().splitlines()[-1])
    size = sum(f.stat().st_size for f in path.glob("*.safetensors")) / 1e9
    # The folder was just written: its dirty pages go to the disk now, not during the runs timed next (on one H200,
    # a 7B's first run right after its 13.5 GB folder was made saved its checkpoint in 17.3 s, the next runs 8.1 s).
    t0 = time.perf_counter()
    os.sync()
    say(f"  {name}: written back to the disk (sync) in {time.perf_counter() - t0:.1f} s")
    say(f"made {name}: {made['params'] / 1e6:,.1f}M parameters, {made['shards']} shards, {size:.2f} GB, "
        f"{r['wall_s']:.0f} s")
    return path


def own(record: dict, budget: Budget, shapes: dict[str, dict[str, Any]], root: Path, env: dict[str, str]) -> None:
    found = record.setdefault("own", {})
    for name, spec in shapes.items():
        made = spec.get("folder_of", name)  # a shape that trains another shape's folder another way
        path = make_folder(root, made, (GPU_SHAPES | QUICK_SHAPES)[made], budget, env)
        if path is None:
            found[name] = {"skipped": "the folder could not be made"}
            continue
        r = timed([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--model", str(path), *spec["flags"]],
                  budget.cut(600), env)
        found[name] = smoke_row(r) | {"flags": spec["flags"]}
        show_smoke(f"own {name} {' '.join(spec['flags'])}", found[name])


PROBE_ID = re.compile(r"\bprobe\.[a-z0-9_]+")


def doctor(record: dict, budget: Budget, env: dict[str, str], label: str = "doctor") -> None:
    lines: list[tuple[float, str]] = []
    r = timed([sys.executable, "-m", "rocmcheck", "doctor", "--verbose"], budget.cut(400), env,
              on_line=lambda t, line: lines.append((t, line)))
    if "skipped" in r:
        record[label] = r
        say(f"{label}: skipped ({r['skipped']})")
        return
    stage = next((t for t, line in lines if "GPU probes" in line and line.lstrip().startswith("doctor")), None)
    printed: list[dict[str, Any]] = []
    for t, line in lines:  # the first line naming each probe's id is its verdict's row (the fixes come later)
        found = PROBE_ID.search(line)
        if found and not line.lstrip().startswith("doctor") and found.group(0) != "probe.stage" \
                and all(p["id"] != found.group(0) for p in printed):
            printed.append({"id": found.group(0), "at_s": round(t, 2),
                            "after_stage_start_s": round(t - stage, 2) if stage is not None else None})
    record[label] = {"wall_s": r["wall_s"], "rc": r["rc"], "probe_stage_started_s": stage, "probe_verdicts": printed}
    say(f"{label}: **{r['wall_s']:.2f} s** start to verdict (exit {r['rc']})")
    if printed:
        spread = printed[-1]["at_s"] - printed[0]["at_s"]
        say("    GPU probe verdicts printed at (s from the probe stage's start): "
            + ", ".join(f"{p['id']} {p['after_stage_start_s']}" for p in printed)
            + f"; first to last {spread:.1f} s apart")
    elif stage is None:
        say("    no GPU probe stage (no GPU, or --no-gpu-probes)")


def torch_bytecode_installed() -> bool:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return False
    return os.path.isfile(importlib.util.cache_from_source(spec.origin))


def compile_bytecode(record: dict, budget: Budget) -> None:
    """Write the bytecode of torch's site-packages once, as pip does at install time."""
    import torch  # noqa: F401 - only to find the folder; this process's own bytecode does not matter

    site = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
    r = timed([sys.executable, "-m", "compileall", "-q", "-j", "0", site], budget.cut(600), base_env())
    record["compile_bytecode"] = {"site": site, "wall_s": r.get("wall_s"), "rc": r.get("rc")}
    say(f"wrote the bytecode of {site}: {r.get('wall_s')} s (exit {r.get('rc')})")


def summary(record: dict) -> None:
    """The table of the goals: each figure beside its floor and peers."""
    def best(rows: list[dict] | None) -> float | None:
        walls = [r["wall_s"] for r in rows or [] if r.get("rc") in (0, 1) and r.get("wall_s")]
        return min(walls) if walls else None

    # The floor the smoke-train runs were measured beside: after compileall, where --compile-bytecode wrote it.
    fl = (record.get("floor_after_compile") or record.get("floor") or {}).get("min_s")
    say("\n| figure | seconds | beside |\n|---|---|---|")
    st = best(record.get("smoke"))
    if st is not None:
        say(f"| smoke-train (bundled), best of {len(record.get('smoke', []))} | {st:.2f} | floor {fl} s: "
            f"{st / fl:.2f}x |" if fl else f"| smoke-train (bundled) | {st:.2f} | |")
    for name, row in (record.get("own") or {}).items():
        if row.get("wall_s"):
            rl = row.get("reload") or {}
            load = (row.get("parts") or {}).get("load")
            say(f"| own {name} {' '.join(row.get('flags', []))} | {row['wall_s']:.2f} | reload {rl.get('method')}: "
                f"save {rl.get('save_s')} + verify {rl.get('verify_s')} s; load {load} s |")
    doc = record.get("doctor") or {}
    if doc.get("wall_s"):
        pe = record.get("peers") or {}
        shown = "; ".join(f"{k} {v['wall_s']:.2f} s" for k, v in pe.items() if v.get("wall_s"))
        say(f"| doctor | {doc['wall_s']:.2f} | {shown} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CPU-sized own models, one run of each")
    ap.add_argument("--runs", type=int, default=None, help="runs of the floor and the bundled smoke-train (2; quick 1)")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts: {', '.join(PARTS)}")
    ap.add_argument("--budget", type=float, default=570.0, help="seconds for everything")
    ap.add_argument("--models-dir", type=Path, default=None, help="where the random-init folders are made and kept")
    ap.add_argument("--compile-bytecode", action="store_true",
                    help="where torch has no bytecode: write it first (compileall), as pip does")
    ap.add_argument("--shapes", default=None, help="comma-separated own-model shapes to run (default: all)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    asked = set(args.shapes.split(",")) if args.shapes else set()
    if asked - set(GPU_SHAPES) - set(QUICK_SHAPES):  # before anything is made or imported
        ap.error(f"--shapes: no shape {', '.join(sorted(asked - set(GPU_SHAPES) - set(QUICK_SHAPES)))} (there are "
                 f"{', '.join([*GPU_SHAPES, *QUICK_SHAPES])})")
    budget = Budget(args.budget)
    want = set(args.only.split(","))
    runs = args.runs or (1 if args.quick else 2)
    out_json = args.json or (Path(os.environ["OUT"]) / "time_to_verdict.json" if os.environ.get("OUT") else None)
    scratch = Path(tempfile.mkdtemp(prefix="rocmcheck-ttv-"))
    models = args.models_dir or Path(tempfile.gettempdir()) / "rocmcheck-bench-models"
    models.mkdir(parents=True, exist_ok=True)
    import torch

    gpu = torch.cuda.is_available()
    installed = torch_bytecode_installed()
    record: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                              "device": torch.cuda.get_device_name(0) if gpu else "cpu", "quick": args.quick,
                              "torch_bytecode_installed": installed,
                              "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
                              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    say(f"time to verdict on {record['device']}, Python {record['python']}, torch {record['torch']}; torch's bytecode "
        f"{'installed' if installed else 'NOT installed'}; PYTHONDONTWRITEBYTECODE="
        f"{record['PYTHONDONTWRITEBYTECODE'] or 'unset'}; budget {args.budget:g} s")
    env = base_env()
    shapes = QUICK_SHAPES if args.quick or not gpu else GPU_SHAPES
    if asked:  # this machine's shapes among those asked (a GPU's, or the CPU-sized ones)
        shapes = {k: v for k, v in shapes.items() if k in asked}
    try:
        if "floor" in want:
            floor(record, budget, runs, env)
        if not installed and args.compile_bytecode:
            compile_bytecode(record, budget)
            installed = torch_bytecode_installed()
            if "floor" in want:
                floor(record, budget, runs, env, "floor_after_compile")
        if not installed:
            say("note: torch has no bytecode here, so every process below compiles it; --compile-bytecode writes it")
            record["figures_without_bytecode"] = True
        if "smoke" in want:
            smoke(record, budget, runs, env)
        if "doctor" in want:
            doctor(record, budget, env)
        if "own" in want:
            own(record, budget, shapes, models, env)
        if "peers" in want:
            peers(record, budget, env)
    finally:
        record["budget_left_s"] = round(budget.left(), 1)
        summary(record)
        if out_json is not None:
            out_json.parent.mkdir(parents=True, exist_ok=True)
            out_json.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
            say(f"\nwrote {out_json}")
        shutil.rmtree(scratch, ignore_errors=True)
        walls = [r["wall_s"] for r in record.get("smoke", []) if r.get("wall_s")]
        if len(walls) > 1:
            say(f"smoke-train spread: median {statistics.median(walls):.2f} s over {len(walls)} runs")


if __name__ == "__main__":
    main()
