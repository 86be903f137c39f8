"""Where train.reload's scratch checkpoint is written when the run has no --out: in memory (/dev/shm) when the
checkpoint fits there with room to spare, else the temporary folder (TMPDIR, or /tmp).

Why: the check needs the files, not a disk. On one H200, save_pretrained of a 7B's fp32 weights (26.95 GB) from
their host copies took 11.85 s to the temporary folder on disk (the kernel holds the writer back once a fifth of the
memory is dirty) and 8.33 s to /dev/shm, and removing the folder afterwards 4.93 s and 2.78 s (the disk's waits for
the pages it is writing back); the compare with the copies 0.88 s and 1.33 s (benchmarks/bench_save_parts.py
--reload-parts, RESULTS.md section 18). Before the host copies, when save_pretrained copied every tensor to fresh
host memory itself, memory was the slower place and this was not used.

A folder in /dev/shm takes memory until it is removed, so it is used only when, after the checkpoint, the host
(or the container's cgroup limit) still has SHM_HEADROOM_BYTES free. A stopped run removes its own on the way out
(rocmcheck/cli.py, _stop); one left by a run killed outright (SIGKILL, the OOM killer) is removed by the next run
that asks for a place, before the free memory is measured, since that folder is holding some of it (only
rocmcheck's own folders, of this user, whose process is gone: rocmcheck/safe/scratch_folders.py names and sweeps
them). A TMPDIR the person set is their choice and is always used."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

from rocmcheck.facts.host_resources import available_memory
from rocmcheck.safe.scratch_folders import SHM, sweep
from rocmcheck.units import GIB, MIB

KIND = "checkpoint"  # the scratch folder's kind (scratch_folders.make_folder), hidden inside an --out
# Memory that must stay free after the checkpoint is written to /dev/shm: the training process itself, the
# reader's page cache and whatever else runs on the host. A GPU host that can hold a 25 GiB checkpoint in memory
# usually has hundreds of GiB; a small one falls back to disk.
SHM_HEADROOM_BYTES = 8 * GIB
# safetensors adds a header per shard and transformers a few small files (config, generation config, index).
FILES_OVERHEAD_BYTES = 64 * MIB


def scratch_parent(size_bytes: int | None, *, shm: Path | None = None, env: Mapping[str, str] | None = None,
                   memory: Callable[[], tuple[int | None, str]] | None = None) -> Path | None:
    """/dev/shm when a checkpoint of size_bytes fits there and leaves SHM_HEADROOM_BYTES of memory; None (the
    temporary folder) otherwise, when the size or the free memory is not known, and whenever TMPDIR is set.
    Whichever it is, the folders that runs now gone left in /dev/shm are removed first.
    shm, env and memory default to SHM, os.environ and available_memory (host_resources.py)."""
    env = os.environ if env is None else env
    shm = SHM if shm is None else shm
    memory = available_memory if memory is None else memory
    try:
        usable = shm.is_dir() and not shm.is_symlink() and os.access(shm, os.W_OK | os.X_OK)
    except OSError:
        usable = False
    if usable:
        sweep(shm)
    if size_bytes is None or env.get("TMPDIR") or not usable:
        return None
    need = size_bytes + FILES_OVERHEAD_BYTES
    try:
        stats = os.statvfs(shm)
    except OSError:
        return None
    if stats.f_bavail * stats.f_frsize < need:
        return None
    free, _ = memory()
    if free is None or free - need < SHM_HEADROOM_BYTES:
        return None
    return shm
