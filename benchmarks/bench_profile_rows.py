"""train.kernels' rows from one profiled training step: the profiler's own key_averages() (the peer) beside
kernels.event_rows over the same raw events, timed in the same run, and every row compared (count, self CPU,
self device and device time). On a GPU when there is one, else the CPU.

    python benchmarks/bench_profile_rows.py [--layers 22] [--hidden 256] [--rows 4] [--seq 256]

Prints the two timings, the number of events and rows, and the largest difference per field (0 where the rows
agree to the microsecond; a name found on one side only is listed).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    args = ap.parse_args()
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    from transformers import LlamaConfig, LlamaForCausalLM

    from rocmcheck.train.kernels import event_rows

    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.hidden * 4, num_hidden_layers=args.layers,
                      num_attention_heads=max(1, args.hidden // 64), vocab_size=32000)
    with torch.device(device):
        model = LlamaForCausalLM(cfg)
    x = torch.randint(0, 32000, (args.rows, args.seq), device=device)

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        step()
        if on_gpu:
            torch.cuda.synchronize()
    events = prof.profiler.kineto_results.events()
    t0 = time.perf_counter()
    mine = event_rows(events, on_gpu, DeviceType.CPU)
    t_mine = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = prof.key_averages()
    t_theirs = time.perf_counter() - t0
    print(f"{device}: {len(events):,} raw events; key_averages() {t_theirs:.3f} s, {len(theirs)} rows; "
          f"event_rows {t_mine:.3f} s, {len(mine)} rows", flush=True)
    keyed = {(r["name"], r["on_device"]): r for r in mine}
    worst = {"count": 0.0, "self_cpu_us": 0.0, "self_device_us": 0.0, "device_us": 0.0}
    missing = []
    for evt in theirs:
        row = keyed.get((evt.key, evt.device_type != DeviceType.CPU))
        if row is None:
            missing.append(evt.key)
            continue
        got = {"count": evt.count, "self_cpu_us": evt.self_cpu_time_total,
               "self_device_us": getattr(evt, "self_device_time_total", 0.0),
               "device_us": getattr(evt, "device_time_total", 0.0)}
        for field, value in got.items():
            worst[field] = max(worst[field], abs(float(row[field]) - float(value)))
    print("largest difference: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()), flush=True)
    print(f"names key_averages has and event_rows not: {missing[:10] or 'none'}", flush=True)


if __name__ == "__main__":
    main()
