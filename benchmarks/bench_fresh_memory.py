"""What host memory a machine has never used costs to touch, and whether touching it once makes it cheap later
(prints a table as it goes). Run it first on a freshly started VM: a hypervisor that backs a guest's memory on
first use makes every never-used page slow the first time, whoever touches it.

    python benchmarks/bench_fresh_memory.py --gib 16

Rows, each over --gib GiB of memory not used before in this run unless it says "again":
  tmpfs write      one thread writes a file in /dev/shm in 64 MiB chunks (what save_pretrained does there)
  anon touch       an anonymous mapping (MADV_HUGEPAGE) with one write per 4 KiB, by 1 thread or by 8
  tmpfs after      a /dev/shm file written right after an anonymous mapping of the same size was touched by 8 threads
                   and unmapped, --pause seconds before (do pages given back come back cheap?)
  tmpfs again      the same write after every file here was removed (memory used before)
  remove           the same bytes as 6 files in a folder in /dev/shm, removed by shutil.rmtree (one thread) and by
                   rocmcheck's remove_folder (the large files by several threads at once)
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rocmcheck.safe.scratch_folders import make_folder, remove_folder  # noqa: E402

CHUNK = 64 << 20
SHM = Path("/dev/shm")


def write_file(path: Path, nbytes: int, chunk: memoryview) -> float:
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def anon(nbytes: int) -> tuple[mmap.mmap, torch.Tensor]:
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        buf.madvise(mmap.MADV_HUGEPAGE)
    return buf, torch.frombuffer(buf, dtype=torch.uint8)


def touch(t: torch.Tensor, threads: int) -> float:
    t0 = time.perf_counter()
    parts = t.chunk(threads)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda p: p[::4096].fill_(1), parts))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=16.0)
    ap.add_argument("--pause", type=float, default=3.0)
    a = ap.parse_args()
    n = int(a.gib * (1 << 30))
    gb = n / 1e9
    chunk = memoryview(bytearray(os.urandom(1 << 20)) * (CHUNK >> 20))
    files = []

    def row(name: str, seconds: float) -> None:
        print(f"{name:<44} {seconds:7.2f} s  {gb / seconds:6.2f} GB/s", flush=True)

    meminfo = {line.split(":")[0]: line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()}
    print(f"MemTotal {int(meminfo['MemTotal']) >> 20} GiB, MemFree {int(meminfo['MemFree']) >> 20} GiB, "
          f"{gb:.1f} GB per row", flush=True)
    f1 = SHM / "rocmcheck-bench-fresh-1"
    files.append(f1)
    row("tmpfs write, fresh", write_file(f1, n, chunk))
    buf, t = anon(n)
    row("anon touch, 8 threads, fresh", touch(t, 8))
    del t
    buf.close()
    time.sleep(a.pause)
    f2 = SHM / "rocmcheck-bench-fresh-2"
    files.append(f2)
    row(f"tmpfs after anon touched+unmapped ({a.pause:.0f} s)", write_file(f2, n, chunk))
    buf, t = anon(n)
    row("anon touch, 1 thread, fresh", touch(t, 1))
    del t
    buf.close()
    for f in files:
        f.unlink()
    f3 = SHM / "rocmcheck-bench-fresh-3"
    row("tmpfs write, again (after removal)", write_file(f3, n, chunk))
    f3.unlink()
    buf, t = anon(n)
    row("anon touch, 8 threads, again", touch(t, 8))
    del t
    buf.close()
    buf, t = anon(n)
    row("anon touch, 1 thread, again", touch(t, 1))
    del t
    buf.close()
    for name, remove in (("remove 6 files: shutil.rmtree", shutil.rmtree),
                         ("remove 6 files: remove_folder", remove_folder)):
        folder = make_folder("bench", SHM)
        for i in range(6):
            write_file(folder / f"shard-{i}", n // 6, chunk)
        t0 = time.perf_counter()
        remove(folder)
        row(name, time.perf_counter() - t0)
        remove_folder(folder)


if __name__ == "__main__":
    main()
