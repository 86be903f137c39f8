"""What a freshly started machine adds to the own-model smoke-train runs, and where the scratch checkpoint is
fastest, measured apart on one machine (prints as it goes; GPU shapes of bench_time_to_verdict.py):

    python benchmarks/bench_first_runs.py [--models-dir DIR] [--budget 400] [--with-7b]

In this order, on a machine started for it:
  machine    the kernel, the filesystems of the temporary folder and /dev/shm, the kernel's dirty-page limits
  libraries  how much of torch's and the CUDA libraries' shared objects the page cache holds (mincore), before the
             first GPU run, after a first run of the 1.1B, and after reading the rest of them (timed): a first run
             on a machine that has not read them pays for it where it first uses a kernel
  first      the Mistral-shaped 2B's first run, after the libraries were read: its numerics pass beside the 1.1B's
             first run (read before) and its own later runs
  place      the 1.1B and the 2B again, the scratch checkpoint in /dev/shm and in the temporary folder (TMPDIR=/tmp),
             interleaved, with the reload's parts (info.reload); --with-7b adds the 7B once each way
  kernels    (--kernels, alone) a bf16 attention forward and backward at head sizes no shape here uses, and bf16
             GEMMs of odd sizes, each in three fresh processes: the machine's first, its second, and one with the
             driver's compiled-kernel cache off (CUDA_CACHE_DISABLE=1); and that cache's size before and after
Writes everything as JSON to --json, default $OUT/first_runs.json when OUT is set.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_time_to_verdict import GPU_SHAPES, Budget, base_env, make_folder, say, show_smoke, smoke_row, timed  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
READ_CHUNK = 8 << 20
READ_THREADS = 8


def shared_objects() -> list[Path]:
    """Every shared object of torch's package and of the nvidia-* wheels beside it."""
    import importlib.util

    roots = []
    for name in ("torch", "nvidia", "triton"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            roots += [Path(p) for p in spec.submodule_search_locations]
    return sorted({p for root in roots for p in root.rglob("*.so*") if p.is_file()})


def resident_bytes(path: Path) -> tuple[int, int]:
    """(bytes of the file in the page cache, its size), by mincore over a read-only mapping of it."""
    size = path.stat().st_size
    if size == 0:
        return 0, 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    if addr in (None, ctypes.c_void_p(-1).value):
        return -1, size
    try:
        vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
        if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
            return -1, size
        return sum(b & 1 for b in bytes(vec)) * PAGE, size
    finally:
        libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))


def residency(files: list[Path], label: str, record: dict) -> None:
    held = total = 0
    for p in files:
        r, s = resident_bytes(p)
        held, total = held + max(r, 0), total + s
    record.setdefault("libraries", {})[label] = {"resident_bytes": held, "bytes": total, "files": len(files)}
    say(f"libraries {label}: {held / 1e9:.2f} of {total / 1e9:.2f} GB in the page cache ({len(files)} files)")


def read_all(files: list[Path], record: dict) -> None:
    def read(p: Path) -> int:
        n = 0
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(READ_CHUNK):
                n += len(chunk)
        return n

    t0 = time.perf_counter()
    with ThreadPoolExecutor(READ_THREADS) as pool:
        n = sum(pool.map(read, files))
    dt = time.perf_counter() - t0
    record["libraries"]["read"] = {"bytes": n, "s": round(dt, 3)}
    say(f"libraries read by {READ_THREADS} threads: {n / 1e9:.2f} GB in {dt:.2f} s")


def machine(record: dict) -> None:
    found = {"kernel": platform.release()}
    for where in (tempfile.gettempdir(), "/dev/shm"):
        try:
            r = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,OPTIONS", "-T", where], capture_output=True,
                               text=True, timeout=10, check=False)
            found[where] = r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:  # no findmnt here, or it hung
            found[where] = f"not known: {exc}"
    for name in ("dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes",
                 "dirty_expire_centisecs"):
        try:
            found[name] = Path(f"/proc/sys/vm/{name}").read_text().strip()
        except OSError:
            found[name] = None
    record["machine"] = found
    say(f"machine: {json.dumps(found)}")


def run_own(record: dict, budget: Budget, name: str, path: Path, place: str) -> None:
    env = base_env({"TMPDIR": "/tmp"} if place == "tmp" else None)
    r = timed([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--model", str(path),
               *GPU_SHAPES[name]["flags"]], budget.cut(300), env)
    row = smoke_row(r) | {"place": place}
    record.setdefault("runs", []).append({"shape": name, **row})
    show_smoke(f"{name}, scratch checkpoint in {place}", row)


FIRST_USE = r"""
import json, time, torch
import torch.nn.functional as F
t0 = time.perf_counter()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
found = {"device init": time.perf_counter() - t0}
for hd in (80, 96):
    t0 = time.perf_counter()
    q, k, v = (torch.randn(4, 16, 64, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    torch.cuda.synchronize()
    found[f"attention hd{hd}"] = time.perf_counter() - t0
t0 = time.perf_counter()
lin = torch.nn.Linear(1536, 4608, device="cuda")
x = torch.randn(200, 1536, device="cuda", requires_grad=True)
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = lin(x)
y.float().sum().backward()
torch.cuda.synchronize()
found["gemm 1536x4608"] = time.perf_counter() - t0
print(json.dumps({k: round(v, 3) for k, v in found.items()}))
"""


def cache_bytes() -> int:
    folder = Path(os.environ.get("CUDA_CACHE_PATH") or Path.home() / ".nv" / "ComputeCache")
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def kernels(record: dict, budget: Budget) -> None:
    found = record["kernels"] = {"cache_bytes_before": cache_bytes()}
    for label, extra in (("first", None), ("second", None), ("cache off", {"CUDA_CACHE_DISABLE": "1"})):
        r = timed([sys.executable, "-c", FIRST_USE], budget.cut(120), base_env(extra))
        try:
            found[label] = json.loads((r.get("stdout") or "").strip().splitlines()[-1])
        except (ValueError, IndexError):
            found[label] = {"failed": (r.get("stderr_tail") or r.get("skipped") or "")[-300:]}
        found[label]["process_s"] = r.get("wall_s")
        say(f"kernels, {label}: {json.dumps(found[label])}")
    found["cache_bytes_after"] = cache_bytes()
    say(f"the driver's kernel cache: {found['cache_bytes_before']} bytes before, {found['cache_bytes_after']} after")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, default=Path(tempfile.gettempdir()) / "rocmcheck-bench-models")
    ap.add_argument("--budget", type=float, default=400.0)
    ap.add_argument("--with-7b", action="store_true")
    ap.add_argument("--kernels", action="store_true", help="only the first use of kernels (see above)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    budget = Budget(args.budget)
    out_json = args.json or (Path(os.environ["OUT"]) / "first_runs.json" if os.environ.get("OUT") else None)
    record: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    args.models_dir.mkdir(parents=True, exist_ok=True)
    shapes = ["llama-1.1b", "mistral-2b"] + (["llama-7b"] if args.with_7b else [])
    try:
        machine(record)
        if args.kernels:
            kernels(record, budget)
            return
        paths = {n: make_folder(args.models_dir, n, GPU_SHAPES[n], budget, base_env()) for n in shapes}
        files = shared_objects()
        residency(files, "before any GPU run", record)
        run_own(record, budget, "llama-1.1b", paths["llama-1.1b"], "shm")
        residency(files, "after the 1.1B's first run", record)
        read_all(files, record)
        residency(files, "after reading them", record)
        run_own(record, budget, "mistral-2b", paths["mistral-2b"], "shm")
        for name in ("mistral-2b", "llama-1.1b"):
            for place in ("tmp", "shm", "tmp"):
                run_own(record, budget, name, paths[name], place)
        if args.with_7b:
            for place in ("tmp", "shm"):
                run_own(record, budget, "llama-7b", paths["llama-7b"], place)
    finally:
        if out_json:
            out_json.write_text(json.dumps(record, indent=1))
            say(f"wrote {out_json}")


if __name__ == "__main__":
    main()
