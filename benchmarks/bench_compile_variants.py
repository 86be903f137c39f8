"""Which torch.compile set-up makes `smoke-train --compile` fastest on the 1.1B shape (GPU only):

    python benchmarks/bench_compile_variants.py [VARIANT ...]      # writes $OUT/compile_variants.json

Each variant runs in its own child process (a timeout each, so a slow max-autotune cannot eat the call),
on the same shape, data, seed and settings as `smoke-train --bench` (fp32 weights, bf16 autocast, AdamW,
clip 1.0, no checkpointing). Prints tokens/s, the ratio to HF Trainer, the loss gap to the eager loop and
the compile time. `--profile` adds the top GPU kernels of one steady-state step of each variant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from _child import child, last_json  # noqa: E402

VARIANTS = {
    # name: (model compile kwargs or None, compile the optimizer step, inductor config overrides)
    "eager": (None, False, {}),
    "hf_trainer": (None, False, {}),
    "compile": ({}, False, {}),
    "compile_opt": ({}, True, {}),
    "compile_cdt": ({}, True, {"coordinate_descent_tuning": True}),
    "compile_autotune": ({"mode": "max-autotune-no-cudagraphs"}, True, {}),
}
STEPS = 30
WARMUP = 5


def run_variant(name: str, profile: bool, shape_name: str, ckpt: bool) -> dict:
    import torch

    from rocmcheck.train import bench
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.device import pick_device, synchronize
    from rocmcheck.train.run import lr_at

    model_kwargs, compile_opt, inductor = VARIANTS[name]
    dev = pick_device("auto").device
    shape = dict(bench.SHAPES[shape_name], steps=STEPS)
    cfg = replace(TrainConfig(), seq_len=shape["seq_len"], micro_batch=shape["micro_batch"], steps=STEPS, lr=3e-4,
                  warmup_steps=3, min_lr_ratio=0.0, gradient_checkpointing=ckpt)
    if name == "hf_trainer":
        run = bench.bench_trainer(shape, cfg, dev)
        return {"step_times": run["step_times"], "losses": run["losses"], "peak_gib": run["peak_gib"], "compile_s": 0.0}
    for key, value in inductor.items():
        setattr(torch._inductor.config, key, value)
    model = bench._model(shape, cfg, dev)
    data = bench._data(shape, cfg, dev)
    mb = shape["micro_batch"]
    # A tensor lr: a compiled optimizer step would recompile on every new Python float.
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(cfg.lr, device=dev), betas=(0.9, 0.95),
                                  weight_decay=cfg.weight_decay, fused=not compile_opt, foreach=compile_opt or None,
                                  capturable=compile_opt)
    forward = torch.compile(model, **model_kwargs) if model_kwargs is not None else model
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16)

    def update():
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        return norm

    update_fn = torch.compile(update) if compile_opt else update

    def step(i: int):
        x = data[i * mb:][:mb]
        with autocast:
            loss = forward(input_ids=x, labels=x).loss
        loss.backward()
        update_fn()
        optimizer.zero_grad(set_to_none=True)
        return loss

    times, losses = [], []
    for i in range(STEPS):
        for group in optimizer.param_groups:
            group["lr"].fill_(lr_at(i, cfg))
        t0 = time.perf_counter()
        loss = step(i)
        losses.append(loss.item())
        synchronize(dev)
        times.append(time.perf_counter() - t0)
    out = {"step_times": times, "losses": losses, "peak_gib": bench._peak(dev) or 0.0}
    if profile:
        from rocmcheck.train.kernels import profile_step

        rows = profile_step(lambda: step(STEPS - 1), dev.type == "cuda")
        kernels = sorted((r for r in rows if r["self_device_us"] > 0), key=lambda r: -r["self_device_us"])
        total = sum(r["self_device_us"] for r in kernels)
        out["kernels"] = [{"name": r["name"][:90], "count": r["count"], "ms": r["self_device_us"] / 1e3,
                           "share": r["self_device_us"] / total} for r in kernels[:15]]
        out["device_ms"] = total / 1e3
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="*", default=list(VARIANTS))
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--ckpt", action="store_true", help="gradient checkpointing on (on every variant alike)")
    ap.add_argument("--shape", choices=["1.1b", "tiny"], default="1.1b", help="tiny: a CPU-sized check of this script")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_variant(args.child, args.profile, args.shape, args.ckpt)))
        return
    out_dir = Path(os.environ.get("OUT") or REPO / "bench-out")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokens = bench_tokens(args.shape)
    results: dict[str, dict] = {}
    print(f"{'variant':<17} {'tok/s':>9} {'vs Trainer':>10} {'step ms':>8} {'peak GiB':>8} {'compile s':>9} "
          f"{'max |loss-eager|':>16}", flush=True)
    for name in args.variants:  # each row is printed and saved as it lands: a call cut short keeps what ran
        wall, rc, stdout, stderr = child([str(Path(__file__).resolve()), "--child", name, "--shape", args.shape]
                                         + (["--profile"] if args.profile else []) + (["--ckpt"] if args.ckpt else []),
                                         args.timeout,
                                         {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")})
        run = last_json(stdout)
        results[name] = {"wall_s": wall, "rc": rc, **(run or {"error": stderr.strip().splitlines()[-3:]})}
        (out_dir / "compile_variants.json").write_text(json.dumps(results, indent=1) + "\n")
        print(_row(name, results, tokens) + f"   [{wall:.0f} s]", flush=True)
        if results[name].get("kernels"):
            print(f"  top kernels of one step ({results[name]['device_ms']:.1f} ms of GPU time):")
            for k in results[name]["kernels"]:
                print(f"  {k['ms']:7.2f} ms {k['share']:6.1%} x{k['count']:<4} {k['name']}", flush=True)


def _row(name: str, results: dict[str, dict], tokens: int) -> str:
    run = results[name]
    if "error" in run:
        return f"{name:<17} failed (rc {run['rc']}): {run['error']}"
    trainer = _tok_s(results.get("hf_trainer"), tokens)
    eager_losses = (results.get("eager") or results.get("hf_trainer") or {}).get("losses")
    tok = _tok_s(run, tokens)
    steady = statistics.median(run["step_times"][WARMUP:])
    comp = sum(run["step_times"][:WARMUP]) - WARMUP * steady
    gap = max(abs(a - b) for a, b in zip(run["losses"], eager_losses)) if eager_losses else float("nan")
    return (f"{name:<17} {tok:>9,.0f} {tok / trainer if trainer else float('nan'):>9.2f}x {steady * 1e3:>8.1f} "
            f"{run['peak_gib'] or 0:>8.1f} {comp:>9.1f} {gap:>16.3f}")


def bench_tokens(shape: str) -> int:
    from rocmcheck.train.bench import SHAPES

    return SHAPES[shape]["seq_len"] * SHAPES[shape]["micro_batch"]


def _tok_s(run: dict | None, tokens: int) -> float | None:
    if not run or "error" in run:
        return None
    return tokens / statistics.median(run["step_times"][WARMUP:])


if __name__ == "__main__":
    main()
