"""Where a smoke-train's seconds go inside its parts (prints as it goes; a GPU when there is one):

    python benchmarks/bench_step_parts.py                 # every section
    python benchmarks/bench_step_parts.py --only steps,numerics

  steps     the bundled model's training step as train.run.train_steps takes it (PlainStrategy, the task's rows),
            120 steps: the loop as it runs; without the memory sampler; without the per-step wait; then the step's
            parts apart (forward, backward, clip, optimizer step), and the Python functions that take the time
  numerics  train.numerics.measure on a random-init model (--numerics-shape: the Mistral-shaped 1.9B of
            bench_time_to_verdict.py, or "bundled"), twice, with its bf16 pass, fp32 pass and block norms apart
  save      the bundled model's save_pretrained to /dev/shm, three times (the first pays for what it imports)
  overlap   a child that imports the model classes after the device's first use, and one that starts the
            device's first use in a thread meanwhile
  graph     (GPU) the bundled model's 120 steps as train_steps takes them, against the same steps with the forward,
            backward and clipping captured once as a CUDA graph and replayed (the optimizer step eager, as before):
            what the step's kernel launches cost, from the same weights, rows and lr schedule. The first
            --graph-eager-steps steps run eagerly on a side stream before the capture (as PyTorch's whole-network
            capture recipe does); the losses of the two runs are compared step by step. A measurement, not the
            run's: smoke-train trains eagerly, as the person's own fine-tune does (docs/smoke-train.md)
  prefault  30 steps of a random-init 1.1B LLaMA (fp32 weights, bf16 autocast, 16 x 64 tokens) alone, and beside
            a thread that faults --prefault-gib GiB of never-used host memory in: by madvise(MADV_POPULATE_WRITE)
            in 256 MiB and in 16 MiB pieces (4 threads), and by one write per 4 KiB page from numpy (4 threads).
            Run it first on a fresh VM: each variant gets memory of its own, kept until the end
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def steps_section(device) -> None:
    import torch

    from rocmcheck.monitor.step_memory import MemorySampler
    from rocmcheck.train import modeling
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.distributed import World
    from rocmcheck.train.plain_strategy import PlainStrategy
    from rocmcheck.train.run import lr_at

    modeling.offline_and_quiet()
    modeling.import_model_classes()
    cfg = TrainConfig(device=device.type)
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(4, 100, (cfg.steps, cfg.micro_batch, cfg.seq_len), generator=gen)

    def fresh():
        s = PlainStrategy(cfg, device, World(0, 1, 0))
        s.build(lambda step, micro: (rows[step].to(device), rows[step].to(device)))
        return s

    def loop(strategy, sample: bool, wait: bool) -> float:
        sampler = MemorySampler(device)
        sync(device)
        t0 = time.perf_counter()
        for step in range(cfg.steps):
            strategy.set_lr(lr_at(step, cfg))
            if sample:
                sampler.start_step()
            loss, norm = strategy.train_step(step)
            if wait:
                torch.stack([loss.float(), loss.float(), norm.float()]).tolist()
                sync(device)
            if sample:
                sampler.sample()
        sync(device)
        return time.perf_counter() - t0

    warm = fresh()
    loop(warm, True, True)  # first use: kernels loaded, the allocator's pools made
    for name, sample, wait in (("as train_steps runs it", True, True), ("without the memory sampler", False, True),
                               ("without the per-step wait", True, False), ("neither", False, False)):
        s = fresh()
        print(f"  {cfg.steps} steps, {name:<32} {loop(s, sample, wait):6.3f} s", flush=True)
    s = fresh()
    parts = {"forward": 0.0, "backward": 0.0, "clip": 0.0, "optimizer step + zero_grad": 0.0, "memory sampler": 0.0}
    sampler = MemorySampler(device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    for step in range(cfg.steps):
        x = rows[step].to(device)
        sync(device)
        t0 = time.perf_counter()
        with autocast:
            loss = s.forward(input_ids=x, labels=x).loss
        sync(device)
        t1 = time.perf_counter()
        loss.backward()
        sync(device)
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(s.model.parameters(), cfg.grad_clip)
        sync(device)
        t3 = time.perf_counter()
        s.optimizer.step()
        s.optimizer.zero_grad(set_to_none=True)
        sync(device)
        t4 = time.perf_counter()
        sampler.start_step()
        sampler.sample()
        t5 = time.perf_counter()
        for k, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            parts[k] += dt
    for k, v in parts.items():
        print(f"  {k:<40} {v:6.3f} s over {cfg.steps} steps ({1000 * v / cfg.steps:.2f} ms each)", flush=True)
    s = fresh()
    prof = cProfile.Profile()
    prof.enable()
    loop(s, True, True)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print("\n".join(out.getvalue().splitlines()[:45]), flush=True)


def graph_section(device, eager_steps: int) -> None:
    import torch

    from rocmcheck.monitor.step_memory import MemorySampler
    from rocmcheck.train import modeling
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.distributed import World
    from rocmcheck.train.plain_strategy import PlainStrategy
    from rocmcheck.train.run import lr_at

    if device.type != "cuda":
        print("  needs a GPU: CUDA graphs capture device work", flush=True)
        return
    modeling.offline_and_quiet()
    modeling.import_model_classes()
    cfg = TrainConfig(device=device.type)
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(4, 100, (cfg.steps, cfg.micro_batch, cfg.seq_len), generator=gen).to(device)

    def fresh():
        s = PlainStrategy(cfg, device, World(0, 1, 0))
        s.build(lambda step, micro: (rows[step], rows[step]))
        return s

    def eager(strategy) -> tuple[float, list[float]]:
        sampler, losses = MemorySampler(device), []
        sync(device)
        t0 = time.perf_counter()
        for step in range(cfg.steps):
            strategy.set_lr(lr_at(step, cfg))
            sampler.start_step()
            loss, norm = strategy.train_step(step)
            # one read of three numbers, as train_steps reads its loss, the ranks' mean and the norm
            losses.append(torch.stack([loss.float(), loss.float(), norm.float()]).tolist()[0])
            sync(device)
            sampler.sample()
        return time.perf_counter() - t0, losses

    def graphed(strategy) -> tuple[float, float, list[float]]:
        model, optimizer = strategy.model, strategy.optimizer
        static_x = rows[0].clone()
        # autocast's cast cache may not outlive a capture (torch.cuda.make_graphed_callables' rule)
        autocast = torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)

        def forward_backward() -> tuple[torch.Tensor, torch.Tensor]:
            with autocast:
                loss = model(input_ids=static_x, labels=static_x).loss
            loss.backward()
            return loss.detach(), torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)

        sampler, losses = MemorySampler(device), []
        sync(device)
        t0 = time.perf_counter()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for step in range(eager_steps):
                strategy.set_lr(lr_at(step, cfg))
                static_x.copy_(rows[step])
                loss, norm = forward_backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(torch.stack([loss.float(), norm.float()]).tolist()[0])
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        t_capture = time.perf_counter()
        with torch.cuda.graph(graph):  # the gradients it makes stay in the graph's pool, replay after replay
            static_loss, static_norm = forward_backward()
        capture_s = time.perf_counter() - t_capture
        for step in range(eager_steps, cfg.steps):
            strategy.set_lr(lr_at(step, cfg))
            sampler.start_step()
            static_x.copy_(rows[step])
            graph.replay()
            optimizer.step()  # no zero_grad: the next replay writes the gradients afresh
            losses.append(torch.stack([static_loss.float(), static_norm.float()]).tolist()[0])
            sync(device)
            sampler.sample()
        return time.perf_counter() - t0, capture_s, losses

    warm = fresh()
    eager(warm)  # first use: kernels loaded, the allocator's pools made
    warm.close()
    for round_ in range(2):
        s = fresh()
        eager_s, eager_losses = eager(s)
        s.close()
        s = fresh()
        try:
            graph_s, capture_s, graph_losses = graphed(s)
        except Exception as exc:  # noqa: BLE001 - a capture this stack refuses is the finding
            print(f"  round {round_ + 1}: the capture failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            return
        finally:
            s.close()
        diffs = [abs(a - b) for a, b in zip(eager_losses, graph_losses)]
        print(f"  round {round_ + 1}: {cfg.steps} steps eager {eager_s:6.3f} s; graphed {graph_s:6.3f} s (the first "
              f"{eager_steps} eager, capture {capture_s:.3f} s); loss first {eager_losses[0]:.4f} / "
              f"{graph_losses[0]:.4f}, last {eager_losses[-1]:.4f} / {graph_losses[-1]:.4f}, largest step "
              f"difference {max(diffs):.2e} (step {diffs.index(max(diffs))})", flush=True)


def numerics_section(device, shape: str) -> None:
    import torch
    import transformers

    from rocmcheck.train import modeling, numerics

    modeling.offline_and_quiet()
    modeling.import_model_classes()
    if shape == "bundled":
        conf = transformers.AutoConfig.from_pretrained(REPO / "rocmcheck" / "train" / "assets" / "tiny-llama")
    else:
        conf = transformers.MistralConfig(hidden_size=2048, intermediate_size=7168, num_hidden_layers=32,
                                          num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                          max_position_embeddings=4096, sliding_window=4096, tie_word_embeddings=False)
    conf.use_cache = False
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32, attn_implementation="sdpa")
    model.train()
    x = torch.randint(4, 100, (4, 64), device=device)
    for i in range(2):
        sync(device)
        t0 = time.perf_counter()
        numerics.measure(model, x, x, pure_bf16=False)
        sync(device)
        print(f"  numerics.measure, run {i + 1}: {time.perf_counter() - t0:.3f} s", flush=True)
    for name, on in (("bf16 autocast pass", True), ("fp32 pass", False)):
        sync(device)
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=on):
            loss = model(input_ids=x, labels=x).loss
        sync(device)
        t1 = time.perf_counter()
        loss.backward()
        sync(device)
        t2 = time.perf_counter()
        numerics._block_norms(model)
        t3 = time.perf_counter()
        print(f"  {name}: forward {t1 - t0:.3f}, backward {t2 - t1:.3f}, block norms {t3 - t2:.3f} s", flush=True)
    model.zero_grad(set_to_none=True)


def save_section(device) -> None:
    import torch

    from rocmcheck.train import modeling
    from rocmcheck.train.config import TrainConfig

    modeling.offline_and_quiet()
    modeling.import_model_classes()
    cfg = TrainConfig(device=device.type)
    model = modeling.load_model(Path(cfg.model), cfg, device)
    for i in range(3):
        folder = Path(tempfile.mkdtemp(prefix="rocmcheck-bench-save-", dir="/dev/shm" if Path("/dev/shm").is_dir()
                                       else None))
        t0 = time.perf_counter()
        model.save_pretrained(folder, safe_serialization=True)
        t1 = time.perf_counter()
        shutil.rmtree(folder)
        print(f"  save_pretrained of the bundled model, run {i + 1}: {t1 - t0:.3f} s", flush=True)
    del model, torch


OVERLAP = r"""
import sys, threading, time
t0 = time.perf_counter()
import torch
t_torch = time.perf_counter()
def first_use():
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda"); torch.cuda.synchronize()
mode = sys.argv[1]
if mode == "thread":
    th = threading.Thread(target=first_use); th.start()
else:
    first_use()
t_use = time.perf_counter()
sys.path.insert(0, sys.argv[2])
from rocmcheck.train import modeling
modeling.offline_and_quiet(); modeling.import_model_classes()
t_import = time.perf_counter()
if mode == "thread":
    th.join()
t_end = time.perf_counter()
print(f"  {mode:<7} import torch {t_torch - t0:.3f}, first use {t_use - t_torch:.3f}, model classes "
      f"{t_import - t_use:.3f}, joined {t_end - t_import:.3f}, total {t_end - t0:.3f} s", flush=True)
"""


def overlap_section() -> None:
    for _ in range(2):
        for mode in ("inline", "thread"):
            subprocess.run([sys.executable, "-c", OVERLAP, mode, str(REPO)], timeout=120, check=False)


def prefault_section(device, gib: float, small: bool) -> None:
    import ctypes
    import mmap
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import torch
    import transformers

    from rocmcheck.train import modeling
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.distributed import World
    from rocmcheck.train.plain_strategy import PlainStrategy
    from rocmcheck.train.run import lr_at

    modeling.offline_and_quiet()
    modeling.import_model_classes()
    sizes = (dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4) if small else
             dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32))
    conf = transformers.LlamaConfig(**sizes, num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                                    tie_word_embeddings=False, use_cache=False)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32, attn_implementation="sdpa")
    cfg = TrainConfig(device=device.type, steps=30, lr=1e-4)
    rows = torch.randint(4, 30000, (cfg.steps, cfg.micro_batch, cfg.seq_len))
    s = PlainStrategy(cfg, device, World(0, 1, 0), model=model)
    s.build(lambda step, micro: (rows[step].to(device), rows[step].to(device)))
    libc = ctypes.CDLL(None, use_errno=True)
    madvise = libc.madvise
    madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    n = int(gib * (1 << 30))
    kept = []

    def region() -> tuple[int, mmap.mmap]:
        buf = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf.madvise(mmap.MADV_HUGEPAGE)
        kept.append(buf)
        return ctypes.addressof(ctypes.c_char.from_buffer(buf)), buf

    def populate(piece: int):
        def run() -> None:
            addr, _ = region()
            parts = [(addr + at, min(piece, n - at)) for at in range(0, n, piece)]
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda p: madvise(p[0], p[1], 23), parts))
        return run

    def numpy_touch() -> None:
        _, buf = region()
        arr = np.frombuffer(buf, dtype=np.uint8)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda part: part.__setitem__(slice(None, None, 4096), 0), np.array_split(arr, 4)))

    def steps() -> float:
        sync(device)
        t0 = time.perf_counter()
        for step in range(cfg.steps):
            s.set_lr(lr_at(step, cfg))
            loss, norm = s.train_step(step)
            torch.stack([loss.float(), norm.float()]).tolist()
        sync(device)
        return time.perf_counter() - t0

    steps()  # first use
    print(f"  30 steps alone: {steps():.3f} s", flush=True)
    for name, work in (("populate 256 MiB pieces", populate(256 << 20)), ("populate 16 MiB pieces", populate(16 << 20)),
                       ("numpy, one write a page", numpy_touch)):
        took: list[float] = []

        def timed_work(work=work, took=took) -> None:
            t0 = time.perf_counter()
            work()
            took.append(time.perf_counter() - t0)

        thread = threading.Thread(target=timed_work)
        thread.start()
        wall = steps()
        thread.join()
        print(f"  30 steps beside {name} of {gib:g} GiB: {wall:.3f} s (the faulting took {took[0]:.2f} s)", flush=True)
    print(f"  30 steps alone again: {steps():.3f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="steps,numerics,save,overlap")
    ap.add_argument("--numerics-shape", default="mistral-2b", choices=("mistral-2b", "bundled"))
    ap.add_argument("--graph-eager-steps", type=int, default=3)
    ap.add_argument("--prefault-gib", type=float, default=20.0)
    ap.add_argument("--prefault-small", action="store_true", help="a 2-layer 128-wide model (checks the script)")
    a = ap.parse_args()
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"device {torch.cuda.get_device_name(0) if device.type == 'cuda' else 'cpu'}, torch {torch.__version__}",
          flush=True)
    for part in a.only.split(","):
        print(f"== {part}", flush=True)
        t0 = time.perf_counter()
        if part == "steps":
            steps_section(device)
        elif part == "numerics":
            numerics_section(device, a.numerics_shape)
        elif part == "save":
            save_section(device)
        elif part == "overlap":
            overlap_section()
        elif part == "graph":
            graph_section(device, a.graph_eager_steps)
        elif part == "prefault":
            prefault_section(device, a.prefault_gib, a.prefault_small)
        print(f"== {part} done in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
