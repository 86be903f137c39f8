"""Where train.reload's scratch checkpoint goes without --out (rocmcheck/train/scratch.py): the disk's page cache
while the kernel would not write it back, else in memory only with room to spare, never past a TMPDIR the person
set, and a folder a killed run left in memory removed by the next before it measures the free memory (the naming
and the sweep: tests/test_scratch_folders.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rocmcheck.facts.host_resources import writeback_threshold
from rocmcheck.safe import scratch_folders
from rocmcheck.train import scratch
from rocmcheck.train.outputs import checkpoint_folder
from rocmcheck.units import GIB


def plenty() -> tuple[int, str]:
    return 1 << 50, "MemAvailable"


def written_back_at_once(available: int) -> int:
    """A kernel that writes back any dirty page at once: the disk's page cache keeps nothing."""
    return 0


def scratch_parent(size, **kw):
    """scratch_parent where the page cache would not keep the checkpoint, so memory or the folder decides."""
    return scratch.scratch_parent(size, writeback=kw.pop("writeback", written_back_at_once), **kw)


def test_memory_is_used_when_the_checkpoint_fits_with_room(tmp_path):
    assert scratch_parent(1000, shm=tmp_path, env={}, memory=plenty) == tmp_path


def test_too_little_free_memory_or_not_known_falls_back_to_the_temporary_folder(tmp_path):
    tight = lambda: (scratch.SHM_HEADROOM_BYTES + 2 * GIB, "cgroup memory.max - memory.current")  # noqa: E731
    assert scratch_parent(3 * GIB, shm=tmp_path, env={}, memory=tight) is None
    assert scratch_parent(1 * GIB, shm=tmp_path, env={}, memory=tight) == tmp_path
    assert scratch_parent(1000, shm=tmp_path, env={}, memory=lambda: (None, "unknown")) is None
    assert scratch_parent(None, shm=tmp_path, env={}, memory=plenty) is None


def test_a_tmpdir_the_person_set_wins(tmp_path):
    assert scratch_parent(1000, shm=tmp_path, env={"TMPDIR": "/scratch/me"}, memory=plenty) is None


def test_no_shm_or_a_link_there_is_not_used(tmp_path):
    assert scratch_parent(1000, shm=tmp_path / "absent", env={}, memory=plenty) is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert scratch_parent(1000, shm=link, env={}, memory=plenty) is None


def test_the_file_system_must_have_the_room_too(tmp_path):
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    assert scratch_parent(free + GIB, shm=tmp_path, env={}, memory=plenty) is None


def test_a_killed_runs_folder_is_swept_first_even_where_memory_is_not_used(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    namespace = scratch_folders.pid_namespace()
    for room, env in ((plenty, {}), (lambda: (1, "MemAvailable"), {}), (plenty, {"TMPDIR": "/scratch/me"})):
        left = tmp_path / f".rocmcheck-checkpoint-{gone}-{namespace}-abc"  # what it holds: memory
        (left / "checkpoint").mkdir(parents=True)
        (left / "checkpoint" / "model.safetensors").write_bytes(b"x" * 10)
        live = tmp_path / f"{scratch_folders.folder_prefix(scratch.KIND, hidden=True)}def"
        live.mkdir(exist_ok=True)
        scratch_parent(1000, shm=tmp_path, env=env, memory=room)
        assert not left.exists() and live.is_dir()


def test_the_folder_without_out_is_named_for_its_process_and_removed_after(monkeypatch, tmp_path):
    monkeypatch.setattr(scratch, "SHM", tmp_path)
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(scratch, "available_memory", plenty)
    with checkpoint_folder(None, size_bytes=1000) as save_dir:
        parent = save_dir.parent
        assert parent.name.startswith(scratch_folders.folder_prefix(scratch.KIND, hidden=True))
    assert not parent.exists()


# ------------------------------------------- the disk's page cache, while the kernel would not write it back

def test_a_checkpoint_under_the_writeback_threshold_goes_to_the_temporary_folder(tmp_path):
    shm, temporary = tmp_path / "shm", tmp_path / "tmp"
    shm.mkdir()
    temporary.mkdir()
    tenth = lambda available: available // 10  # noqa: E731 - the kernel's default ratio, 10%
    room = lambda: (100 * GIB, "MemAvailable")  # noqa: E731
    kw = dict(shm=shm, env={}, memory=room, writeback=tenth, temporary=temporary)
    assert scratch.scratch_parent(4 * GIB, **kw) is None  # the 1.1B's weights: 4 GiB under 10 GiB
    assert scratch.scratch_parent(27 * GIB, **kw) == shm  # a 7B's: the kernel would write it back while saved
    assert scratch.scratch_parent(4 * GIB, **kw | {"writeback": lambda available: None}) == shm  # not known
    # under the threshold, but a temporary folder whose file system cannot say it has room
    assert scratch.scratch_parent(4 * GIB, **kw | {"temporary": tmp_path / "absent"}) == shm


def test_the_writeback_threshold_is_read_from_the_kernel(tmp_path):
    (tmp_path / "dirty_background_ratio").write_text("10\n")
    (tmp_path / "dirty_background_bytes").write_text("0\n")
    assert writeback_threshold(100 * GIB, tmp_path) == 10 * GIB  # the ratio, when no byte count is set
    (tmp_path / "dirty_background_bytes").write_text(f"{3 * GIB}\n")
    assert writeback_threshold(100 * GIB, tmp_path) == 3 * GIB  # a byte count wins
    assert writeback_threshold(100 * GIB, tmp_path / "absent") is None
    vm = Path("/proc/sys/vm")
    if (vm / "dirty_background_ratio").is_file():  # this machine's own settings, where Linux has them
        fixed, ratio = (int((vm / name).read_text()) for name in ("dirty_background_bytes", "dirty_background_ratio"))
        assert writeback_threshold(100 * GIB) == (fixed or 100 * GIB * ratio // 100)
