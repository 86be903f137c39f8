"""Where train.reload's scratch checkpoint is written when the run has no --out: the temporary folder (TMPDIR, or
/tmp) when the kernel would keep the checkpoint in its page cache there for the check's short life; else in memory
(/dev/shm) when it fits there with room to spare; else the temporary folder all the same.

Why: the check needs the files, not a disk. A file smaller than the kernel's background writeback threshold
(vm.dirty_background_bytes, or vm.dirty_background_ratio of the memory, 10% by default) is not written back until
it is 30 s old (vm.dirty_expire_centisecs); removed before that, it never reaches the disk, and the page cache of
a disk file system was the faster place. On one H200 VM (Linux 6.18, /tmp on ext4, 128 GiB; the runs interleaved,
benchmarks/bench_first_runs.py, RESULTS.md section 18), the temporary folder against /dev/shm:
  the 1.1B's 4.4 GB: save 1.27-1.29 s against 1.95 s, compare 0.17-0.19 s against 0.47 s, removal 0.24-0.26 s
  against 0.54 s; the Mistral-shaped 2B's 7.5 GB: save 2.26-2.27 s against 3.29 s, compare 0.30 s against 0.87 s.
A checkpoint above the threshold is written back while it is saved: the 7B's 27 GB in the temporary folder took
12.08 s to save and 6.87 s to remove (the removal waits for the pages being written), against 10.19 s and 2.94 s
in /dev/shm. That kernel gives ext4's page cache large folios (tmpfs keeps 4 KiB pages): an older kernel may narrow
the difference, which was not measured.

A folder in /dev/shm takes memory until it is removed, so it is used only when, after the checkpoint, the host
(or the container's cgroup limit) still has SHM_HEADROOM_BYTES free. A stopped run removes its own on the way out
(rocmcheck/cli.py, _stop); one left by a run killed outright (SIGKILL, the OOM killer) is removed by the next run
that asks for a place, before the free memory is measured, since that folder is holding some of it (only
rocmcheck's own folders, of this user, whose process is gone: rocmcheck/safe/scratch_folders.py names and sweeps
them). A TMPDIR the person set is their choice and is always used."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping

from rocmcheck.facts.host_resources import available_memory, writeback_threshold
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
                   memory: Callable[[], tuple[int | None, str]] | None = None,
                   writeback: Callable[[int], int | None] | None = None,
                   temporary: Path | None = None) -> Path | None:
    """None (the temporary folder) when a checkpoint of size_bytes stays under the kernel's writeback threshold
    and the temporary folder has room for it; else /dev/shm when it fits there and leaves SHM_HEADROOM_BYTES of
    memory; None otherwise, when the size or the free memory is not known, and whenever TMPDIR is set. Whichever
    it is, the folders that runs now gone left in /dev/shm are removed first. shm, env, memory, writeback and
    temporary default to SHM, os.environ, available_memory, writeback_threshold (host_resources.py) and the
    temporary folder."""
    env = os.environ if env is None else env
    shm = SHM if shm is None else shm
    memory = available_memory if memory is None else memory
    writeback = writeback_threshold if writeback is None else writeback
    try:
        usable = shm.is_dir() and not shm.is_symlink() and os.access(shm, os.W_OK | os.X_OK)
    except OSError:
        usable = False
    if usable:
        sweep(shm)
    if size_bytes is None or env.get("TMPDIR"):
        return None
    need = size_bytes + FILES_OVERHEAD_BYTES
    free, _ = memory()
    if free is None:
        return None
    threshold = writeback(free)
    if threshold is not None and need <= threshold and _room(temporary or Path(tempfile.gettempdir())) >= need:
        return None  # the disk's page cache, which keeps it until it is removed
    if not usable or _room(shm) < need or free - need < SHM_HEADROOM_BYTES:
        return None
    return shm


def _room(folder: Path) -> int:
    """Bytes a non-root writer may still put in the file system holding `folder`; 0 when it cannot be asked."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 0
    return stats.f_bavail * stats.f_frsize
