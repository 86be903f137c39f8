"""Where train.reload's save and verify go: a random-init LLaMA (fp32, on the GPU when there is one) saved by
save_pretrained to the temporary folder, beside its parts and the alternatives, measured in the same run:

  host copies       every tensor copied to the host: `.cpu()` (what safetensors does inside save_file), and into
                    fresh huge-page host buffers (anonymous mmap with MADV_HUGEPAGE, one per tensor)
  save_pretrained   of the model as it is (GPU tensors), and with state_dict= the huge-page host copies
  verify            the saved file against the model: on the device (each file tensor moved there and compared, as
                    saved_weights.compare_files does), and on the host against the host copies
  GIL               how many Python loop turns another thread makes while save_pretrained writes from host copies
                    (whether the write lets other work run beside it)

    python benchmarks/bench_save_parts.py [--shapes 1.1b,7b] [--thp-child] [--variants]
    python benchmarks/bench_save_parts.py --reload-parts 7b   # the reload check's parts, in its order

--variants also times the huge-page copies made by 4 and 8 threads, and into huge-page buffers pinned with
cudaHostRegister first (the pinning and the DMA copy apart). --thp-child also times `.cpu()` in a child with
THP_MEM_ALLOC_ENABLE=1 (torch's CPU allocator asks for huge pages for allocations of 2 MB and more). Prints
one line per part as it ends (seconds and GB/s over the weights' bytes), and the machine's transparent huge
page settings first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SHAPES = {  # hidden, intermediate, layers, heads, kv heads (TinyLlama 1.1B, Llama-2 7B)
    "1.1b": (2048, 5632, 22, 32, 4),
    "7b": (4096, 11008, 32, 32, 32),
    "cpu": (1024, 2816, 4, 16, 4),  # a shape a CPU box runs in seconds
}


def sysfs(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        return f"not readable ({exc.strerror})"


def build(shape: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, layers, heads, kv = SHAPES[shape]
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, vocab_size=32000)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        return LlamaForCausalLM(cfg)


def timer(gb: float, on_gpu: bool):
    """part(label, fn): runs fn (the GPU synchronised before and after), prints its seconds and GB/s over `gb`, and
    returns what fn returned."""
    import torch

    def part(label: str, fn):
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if on_gpu:
            torch.cuda.synchronize()
        s = time.perf_counter() - t0
        print(f"  {label:<62} {s:7.2f} s  {gb / s:6.2f} GB/s", flush=True)
        return out

    return part


def hugepage_empty(like):
    """A host tensor shaped like `like`, in pageable memory (train.reload pins its host copies instead)."""
    import torch

    return torch.empty(tuple(like.shape), dtype=like.dtype)


def child_cpu_copy(shape: str) -> None:
    import torch

    model = build(shape)
    state = model.state_dict()
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    t0 = time.perf_counter()
    host = {k: v.cpu() for k, v in state.items()}
    s = time.perf_counter() - t0
    gb = sum(v.numel() * v.element_size() for v in host.values()) / 1e9
    print(f"  child THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE')}: .cpu() of every tensor "
          f"{s:7.2f} s {gb / s:6.2f} GB/s", flush=True)


def measure(shape: str, thp_child: bool, variants: bool) -> None:
    import torch
    from safetensors import safe_open

    model = build(shape)
    on_gpu = next(model.parameters()).is_cuda
    state = model.state_dict()
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    gb = nbytes / 1e9
    print(f"{shape}: {sum(p.numel() for p in model.parameters()) / 1e6:,.0f}M parameters, {gb:.2f} GB, "
          f"{'cuda' if on_gpu else 'cpu'}", flush=True)

    part = timer(gb, on_gpu)

    host_plain = part(".cpu() of every tensor (fresh 4 KiB pages)", lambda: {k: v.cpu() for k, v in state.items()})
    del host_plain

    def hugepage_copies():
        out = {}
        for k, v in state.items():
            h = hugepage_empty(v)
            h.copy_(v)
            out[k] = h
        return out

    host = part("copy into huge-page host buffers", hugepage_copies)
    if variants and on_gpu:
        from concurrent.futures import ThreadPoolExecutor

        for workers in (4, 8):
            def threaded(workers=workers):
                def one(item):
                    h = hugepage_empty(item[1])
                    h.copy_(item[1])
                    return item[0], h
                with ThreadPoolExecutor(workers) as pool:
                    return dict(pool.map(one, state.items()))
            part(f"copy into huge-page host buffers, {workers} threads", threaded)
        cudart = torch.cuda.cudart()
        bufs = part("huge-page buffers, each pinned (cudaHostRegister)", lambda: [
            (hugepage_empty(v), v) for v in state.values()])
        def register():
            for h, _ in bufs:
                cudart.cudaHostRegister(h.data_ptr(), h.numel() * h.element_size(), 0)
        part("  the pinning itself", register)
        part("  copy into them (DMA)", lambda: [h.copy_(v, non_blocking=True) for h, v in bufs])
        print(f"    equal: {all(torch.equal(h, v.cpu()) for h, v in bufs[:3])}", flush=True)
        part("  unpin", lambda: [cudart.cudaHostUnregister(h.data_ptr()) for h, _ in bufs])
        del bufs
    with tempfile.TemporaryDirectory(prefix="rocmcheck-save-") as tmp:
        part("save_pretrained of the model (GPU tensors), temporary folder",
             lambda: model.save_pretrained(Path(tmp) / "a", safe_serialization=True))
        shutil.rmtree(Path(tmp) / "a")
        part("save_pretrained state_dict=huge-page host copies",
             lambda: model.save_pretrained(Path(tmp) / "b", state_dict=dict(host), safe_serialization=True))
        files = sorted((Path(tmp) / "b").glob("*.safetensors"))

        def verify_device():
            ok = True
            for path in files:
                with safe_open(str(path), framework="pt") as f:
                    for key in f.keys():
                        ok &= torch.equal(f.get_tensor(key).to(state[key].device), state[key])
            return ok

        def verify_host():
            ok = True
            for path in files:
                with safe_open(str(path), framework="pt") as f:
                    for key in f.keys():
                        ok &= torch.equal(f.get_tensor(key), host[key])
            return ok

        print(f"    equal: {part('verify on the device (file tensor -> device, compare)', verify_device)}", flush=True)
        print(f"    equal: {part('verify on the host (file tensor vs host copy)', verify_host)}", flush=True)

        turns = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                turns[0] += 1

        base_t0 = time.perf_counter()
        th = threading.Thread(target=spin)
        th.start()
        time.sleep(0.5)
        stop.set()
        th.join()
        idle_rate = turns[0] / (time.perf_counter() - base_t0)
        turns[0] = 0
        stop.clear()
        th = threading.Thread(target=spin)
        th.start()
        t0 = time.perf_counter()
        model.save_pretrained(Path(tmp) / "c", state_dict=dict(host), safe_serialization=True)
        s = time.perf_counter() - t0
        stop.set()
        th.join()
        print(f"  GIL: another thread ran {turns[0] / s / idle_rate:.0%} of its idle rate during a {s:.2f} s "
              f"save_pretrained from host copies", flush=True)
    host = None  # the copies go before the next shape
    if thp_child:
        for value in ("0", "1"):
            env = dict(os.environ, THP_MEM_ALLOC_ENABLE=value)
            subprocess.run([sys.executable, __file__, "--child-cpu-copy", shape], env=env, timeout=300, check=False)


def reload_parts(shape: str) -> None:
    """The reload check's own parts in the order the run does them, for each place the checkpoint can go: the
    host copies (one thread, 8 threads), save_pretrained from them, the compare with them (one thread, 8 threads),
    and the removal of the folder; then the pinned-buffer variant of the copies."""
    from concurrent.futures import ThreadPoolExecutor

    import torch
    from safetensors import safe_open

    model = build(shape)
    state = model.state_dict()
    gb = sum(t.numel() * t.element_size() for t in state.values()) / 1e9
    print(f"{shape}: {gb:.2f} GB", flush=True)

    on_gpu = torch.cuda.is_available()

    part = timer(gb, on_gpu)

    def copy_one(item):
        h = hugepage_empty(item[1])
        h.copy_(item[1])
        return item[0], h

    for workers in (1, 8, 4, 1, 8):  # each twice apart: the first copy also faults the pages in for the first time
        host = None
        with ThreadPoolExecutor(workers) as pool:
            host = part(f"host copies, huge pages, {workers} thread(s)",
                        lambda: dict(pool.map(copy_one, state.items())))
    for where in (tempfile.gettempdir(), "/dev/shm"):
        folder = Path(tempfile.mkdtemp(prefix="rocmcheck-reload-parts-", dir=where))
        part(f"save_pretrained from the host copies, {where}",
             lambda: model.save_pretrained(folder / "ckpt", state_dict=dict(host), safe_serialization=True))
        files = sorted((folder / "ckpt").glob("*.safetensors"))

        def compare(workers: int) -> bool:
            handles = [safe_open(str(p), framework="pt") for p in files]
            pairs = [(h.get_tensor(k), host[k]) for h in handles for k in h.keys()]
            with ThreadPoolExecutor(workers) as pool:
                return all(pool.map(lambda ab: torch.equal(*ab), pairs))

        for workers in (1, 8):
            print(f"    equal: {part(f'compare with the host copies, {workers} thread(s)', lambda: compare(workers))}",
                  flush=True)
        part(f"remove the folder, {where}", lambda: shutil.rmtree(folder))
    host = None
    if not on_gpu:
        return
    cudart = torch.cuda.cudart()
    bufs = part("pinned: huge-page buffers", lambda: [(hugepage_empty(v), v) for v in state.values()])
    part("pinned: touch every page, 8 threads", lambda: list(ThreadPoolExecutor(8).map(
        lambda hv: hv[0].view(-1).view(torch.uint8)[::4096].fill_(0), bufs)))
    part("pinned: cudaHostRegister", lambda: [cudart.cudaHostRegister(h.data_ptr(), h.nbytes, 0) for h, _ in bufs])
    part("pinned: copy into them (DMA)", lambda: [h.copy_(v, non_blocking=True) for h, v in bufs])
    part("pinned: cudaHostUnregister", lambda: [cudart.cudaHostUnregister(h.data_ptr()) for h, _ in bufs])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="1.1b")
    ap.add_argument("--thp-child", action="store_true")
    ap.add_argument("--variants", action="store_true", help="also: threaded copies, pinned (registered) buffers")
    ap.add_argument("--child-cpu-copy", metavar="SHAPE")
    ap.add_argument("--reload-parts", metavar="SHAPE", help="the reload check's parts in its order (a GPU only)")
    args = ap.parse_args()
    if args.child_cpu_copy:
        child_cpu_copy(args.child_cpu_copy)
        return
    if args.reload_parts:
        reload_parts(args.reload_parts)
        return
    for name in ("enabled", "defrag", "khugepaged/defrag"):
        print(f"transparent_hugepage/{name}: {sysfs('/sys/kernel/mm/transparent_hugepage/' + name)}")
    print(f"temporary folder: {tempfile.gettempdir()}", flush=True)
    for shape in args.shapes.split(","):
        measure(shape, args.thp_child, args.variants)


if __name__ == "__main__":
    main()
