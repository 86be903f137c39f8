"""What each fixed cost of a smoke-train is, one after the other in one fresh process (a table per run):

    python benchmarks/bench_startup_parts.py            # 2 runs in order, then 2 with the GPU warmed in a thread
    python benchmarks/bench_startup_parts.py --runs 1 --modes serial

The parts are what the default run pays before and around its 120 steps: importing torch, the CUDA
context, torch._dynamo (every torch optimizer imports it on first use), transformers' model and tokenizer
classes, loading the bundled model, the first bf16 and fp32 forward+backward, greedy generation of the
held-out prompts, one profiled step, and save_pretrained + from_pretrained. "threaded" mode starts the CUDA
context, cuBLAS and torch._dynamo in a background thread as soon as torch is imported, while the main thread
imports transformers: what overlapping them saves. Each run is a child process; prints as it goes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, threading, tempfile
t0 = time.perf_counter()
marks = []
def mark(name):
    marks.append((name, time.perf_counter()))
threaded = sys.argv[1] == "threaded"
import torch
mark("import torch")
cuda = torch.cuda.is_available()
dev = torch.device("cuda" if cuda else "cpu")

def warm():
    if cuda:
        a = torch.ones(64, 64, device=dev, dtype=torch.bfloat16)
        (a @ a).float().sum().item()
    import torch._dynamo  # noqa: F401
    p = torch.nn.Parameter(torch.zeros(2, device=dev)); p.grad = torch.zeros_like(p)
    torch.optim.AdamW([p], fused=True).step()

if threaded:
    th = threading.Thread(target=warm, daemon=True); th.start()
else:
    if cuda:
        torch.zeros(1, device=dev); torch.cuda.synchronize(); mark("CUDA context")
        a = torch.ones(64, 64, device=dev, dtype=torch.bfloat16)
        (a @ a).float().sum().item(); mark("first bf16 GEMM (cuBLAS)")
    import torch._dynamo  # noqa: F401
    mark("import torch._dynamo")
    p = torch.nn.Parameter(torch.zeros(2, device=dev)); p.grad = torch.zeros_like(p)
    torch.optim.AdamW([p], fused=True).step(); mark("fused AdamW step")
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
mark("import transformers (model, tokenizer)")
if threaded:
    th.join(); mark("join the warming thread")
model_dir = sys.argv[2]
tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True); mark("load tokenizer")
where = {"device_map": str(dev)} if cuda else {}
model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32,
                                             attn_implementation="sdpa", **where).to(dev)
model.config.use_cache = False
model.train(); mark("load model")
x = torch.randint(4, 100, (16, 64), device=dev)
with torch.autocast(dev.type, dtype=torch.bfloat16):
    loss = model(input_ids=x, labels=x).loss
loss.backward(); float(loss); mark("first bf16 forward+backward")
model.zero_grad()
loss = model(input_ids=x, labels=x).loss; loss.backward(); float(loss); mark("first fp32 forward+backward")
model.zero_grad()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
for _ in range(10):
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); opt.zero_grad(set_to_none=True)
    float(loss)
mark("10 training steps")
model.eval()
prompts = torch.randint(4, 100, (64, 12), device=dev)
with torch.no_grad():
    model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=8, do_sample=False,
                   pad_token_id=3, eos_token_id=2, use_cache=True)
mark("generate 64 prompts x 8 tokens")
model.train()
from torch.profiler import ProfilerActivity, profile
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
with profile(activities=acts) as prof:
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    loss.backward()
    if cuda: torch.cuda.synchronize()
prof.key_averages(); model.zero_grad(); mark("one profiled step")
with tempfile.TemporaryDirectory() as d:
    model.save_pretrained(d)
    again = AutoModelForCausalLM.from_pretrained(d, local_files_only=True, dtype=torch.float32,
                                                 attn_implementation="sdpa", **where)
mark("save_pretrained + from_pretrained")
rows, prev = [], t0
for name, t in marks:
    rows.append([name, round(t - prev, 3)]); prev = t
print(json.dumps({"rows": rows, "total": round(prev - t0, 3)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--modes", default="serial,threaded")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from rocmcheck.train.config import BUNDLED_MODEL

    for mode in args.modes.split(","):
        for i in range(args.runs):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(BUNDLED_MODEL)],
                                  capture_output=True, text=True, timeout=600)
            wall = time.perf_counter() - t0
            try:
                doc = json.loads(proc.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                print(f"{mode} #{i + 1}: exit {proc.returncode}\n{proc.stderr[-3000:]}", flush=True)
                continue
            print(f"\n{mode} #{i + 1}: process wall {wall:.2f} s, parts sum {doc['total']:.2f} s\n"
                  "| part | s |\n|---|---|", flush=True)
            for name, secs in doc["rows"]:
                print(f"| {name} | {secs:.2f} |", flush=True)


if __name__ == "__main__":
    main()
