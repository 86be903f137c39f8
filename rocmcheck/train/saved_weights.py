"""train.reload read from the files: whether the checkpoint save_pretrained just wrote holds the trained model,
without building the model a second time.

Loading the checkpoint back with from_pretrained (what `_reload` in run.py does for small models) needs a second
copy of the model on the device and the time to build it: for a 7B in fp32, 27 GB more GPU memory next to the
weights, gradients and optimizer state, within the 44 s the save and reload took on one H200. Here the saved
shards are read tensor by tensor (safetensors maps them: only one tensor in memory at a time), each moved to the
trained tensor's device and compared with it bit for bit, and the saved config.json, read back as from_pretrained
reads it, must equal the model's own. Together they say what the full reload says: the same
architecture with the same weights computes the same logits.

That holds only when the files are a one-to-one image of the model's state dict: the same names (a tied weight
saved once), dtypes and shapes. Anything else (a saver that renames or converts tensors, a tensor missing from the
files) is not judged here: `compare_files` says why, and the caller falls back to the full reload, which
decides (a missing tensor comes back from from_pretrained freshly initialised, so the weights differ there too).
A tensor whose bytes differ is a broken save either way.

A model checked this way is saved from host copies (host_copies): save_pretrained moves every tensor of a shard
to the host before it writes (safetensors' save_file does), into fresh 4 KiB pages, and those page faults made
the copy, not the disk, most of the save's time: on one H200, a 7B in fp32 (26.95 GB) took 21.35 s to copy that
way, 8.27 s into pageable buffers that ask for huge pages, and 1.93 s into such buffers pinned first (their pages
faulted in by 8 threads, then registered with the driver, then filled by the copy engine); save_pretrained took
34.90 s from the GPU and 8.19 s from host copies (benchmarks/bench_save_parts.py, RESULTS.md section 18).
save_pretrained is handed the copies as its state_dict, as Trainer hands it one, so it writes the same bytes by its
own code. The write runs in a thread of its own (BackgroundSave): it holds no GIL while it writes (another thread
ran at 91-146% of its idle rate beside it), so the run's other verdicts and its profile go on meanwhile. The
files are then compared with the host copies, which are the model's bytes (on the H200: 0.88 s for the 7B, 4.00 s
moving each file tensor to the GPU).
Imports torch.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

import torch

from rocmcheck.train.modeling import save_checkpoint

# Below this many bytes of weights the reload check builds the model again with from_pretrained: a second copy
# that small costs a fraction of a second and proves the loader too. Above it the files are read back instead (a
# second copy of a 7B in fp32 is 27 GB of device memory). Measured on the 2-core CPU box, a random-init 201M LLaMA
# in fp32 (0.75 GiB): the full reload's verify 0.63-0.64 s (from_pretrained, the state dicts, a forward), the
# files' 0.09-0.17 s; the save 0.16-1.64 s either way.
FULL_RELOAD_MAX_BYTES = 1 << 30
# ROCMCHECK_RELOAD_CHECK=full or =files chooses the method whatever the size and device (docs/smoke-train.md).
METHOD_ENV = "ROCMCHECK_RELOAD_CHECK"
METHODS = ("full", "files")
# Keys of a config that say where it was read from and by which version, not what the model computes.
PROVENANCE_KEYS = ("_name_or_path", "transformers_version")
# A host copy at least this large gets its own mapping advised to use huge pages (the x86-64 and arm64 huge page
# size: a smaller one could not use one anyway).
HUGE_PAGE_BYTES = 2 << 20
# Pages of the buffers to pin are faulted in by this many threads first, one write every PAGE_TOUCH_STRIDE bytes
# (a 4 KiB page's size, so it holds for buffers that got no huge pages too). On one H200 (16 cores), a 7B in fp32:
# the faulting 0.59 s, the registration 0.85 s and the DMA copy 0.49 s, where the copy into pageable huge pages
# took 8.25 s (8 threads copying there: 8.56 s; benchmarks/bench_save_parts.py --reload-parts, RESULTS.md
# section 18).
PIN_THREADS = 8
PAGE_TOUCH_STRIDE = 4096
# Buffers made ahead (HostBuffers, while the steps run) are faulted in by this many threads: fewer than
# PIN_THREADS, since the GPU run's own thread is busy meanwhile.
PREFAULT_THREADS = 4
# The files are compared with the host copies by this many threads (torch.equal lets the GIL go). The 7B on one
# H200: 0.88 s instead of 1.30 s from the disk's page cache, 1.33 s instead of 2.62 s from /dev/shm (the same
# bench_save_parts.py --reload-parts run).
COMPARE_THREADS = 8


@dataclass
class FilesComparison:
    """What the saved files say. one_to_one False: not judged here (why_not says why); weights_equal and
    config_equal are then meaningless."""

    one_to_one: bool
    why_not: str | None = None
    weights_equal: bool = True
    first_difference: str | None = None  # the first tensor whose bytes differ
    config_equal: bool = True
    config_differences: list[str] = field(default_factory=list)
    tensors: int = 0
    bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"tensors": self.tensors, "bytes": self.bytes, "config_equal": self.config_equal,
                "config_differences": self.config_differences[:10], "first_difference": self.first_difference}


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def choose_method(nbytes: int, asked: str | None) -> str:
    """"full" (from_pretrained, then compare) or "files" (compare_files). asked: METHOD_ENV's value, if any."""
    if asked in METHODS:
        return asked
    return "files" if nbytes > FULL_RELOAD_MAX_BYTES else "full"


def shard_files(folder: Path) -> list[Path]:
    """The safetensors files of a checkpoint: the index's shards when there is one, else every *.safetensors."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        return [folder / name for name in sorted(set(weight_map.values()))]
    return sorted(folder.glob("*.safetensors"))


def config_differences(saved: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """The keys whose values differ between two config dicts (provenance keys left out), as "key: saved != live"."""
    keys = sorted((set(saved) | set(live)) - set(PROVENANCE_KEYS))
    return [f"{k}: {saved.get(k)!r} != {live.get(k)!r}" for k in keys if saved.get(k) != live.get(k)]


def _storage(t: torch.Tensor) -> tuple:
    return str(t.device), t.untyped_storage().data_ptr()


def _identity(t: torch.Tensor) -> tuple:
    """What makes two state-dict entries one tensor (a tied weight): the same storage, offset, shape, strides and
    dtype."""
    return (*_storage(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _aliases(state: dict[str, torch.Tensor]) -> dict[str, set[str]]:
    """For each key, the other keys that are the same tensor (_identity)."""
    groups: dict[tuple, set[str]] = {}
    for key, t in state.items():
        groups.setdefault(_identity(t), set()).add(key)
    return {key: group - {key} for group in groups.values() for key in group}


def host_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised host tensor; from HUGE_PAGE_BYTES up, in a private anonymous mapping of its own with
    MADV_HUGEPAGE (honoured where transparent huge pages are "always" or "madvise", the usual settings; a
    shared mapping would follow shmem_enabled instead, mostly "never")."""
    nbytes = math.prod(shape) * dtype.itemsize
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    if nbytes < HUGE_PAGE_BYTES or not flags:
        return torch.empty(shape, dtype=dtype)
    buf = mmap.mmap(-1, nbytes, flags=flags)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        buf.madvise(mmap.MADV_HUGEPAGE)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).view(shape)  # the tensor keeps the mapping alive


class HostCopies:
    """A state dict's host copies (host_copies): `tensors` by name. Those that came from a GPU are pinned
    (registered with the driver) so the copy engine writes them at full speed: unpin() gives the pages back to the
    kernel's usual care and must come before they are freed; release() unpins and lets every copy go. Both may be
    called again."""

    def __init__(self, tensors: dict[str, torch.Tensor], pinned: list[int]) -> None:
        self.tensors = tensors
        self._pinned = pinned

    def unpin(self) -> None:
        pinned, self._pinned = self._pinned, []
        if pinned:
            cudart = torch.cuda.cudart()
            for ptr in pinned:
                cudart.cudaHostUnregister(ptr)

    def release(self) -> None:
        self.unpin()
        self.tensors = {}


def _touch(buffers: list[torch.Tensor]) -> None:
    """Fault every page of the buffers in, from up to PIN_THREADS threads at once (fill_ lets the GIL go)."""
    if buffers:
        with ThreadPoolExecutor(max(1, min(PIN_THREADS, os.cpu_count() or 1))) as pool:
            list(pool.map(lambda b: b.view(-1).view(torch.uint8)[::PAGE_TOUCH_STRIDE].fill_(0), buffers))


def _touch_aside(buffers: list[torch.Tensor]) -> bool:
    """Fault every page of the buffers in, one write per PAGE_TOUCH_STRIDE bytes, from up to PREFAULT_THREADS
    threads, by numpy (its strided write lets the GIL go and uses no thread pool of torch's, which would compete
    with the training thread). Page faults leave the training thread alone where madvise(MADV_POPULATE_WRITE)
    did not: it holds the process's memory-map lock, which the training thread's own allocations wait for. 30
    steps of a 1.1B on one H200: 2.92-3.13 s alone, 2.85 s beside this touching 24 GiB, 3.25-3.36 s beside
    MADV_POPULATE_WRITE (benchmarks/bench_step_parts.py --only prefault, RESULTS.md section 18). False when numpy
    cannot view them (the pages then come in when first written). Never raises."""
    try:
        import numpy
    except ImportError:
        return False
    try:
        parts = [part for b in buffers for part in numpy.array_split(b.view(-1).view(torch.uint8).numpy(),
                                                                      PREFAULT_THREADS)]
        with ThreadPoolExecutor(max(1, min(PREFAULT_THREADS, os.cpu_count() or 1))) as pool:
            list(pool.map(lambda part: part.__setitem__(slice(None, None, PAGE_TOUCH_STRIDE), 0), parts))
    except (RuntimeError, TypeError, ValueError):  # a torch built without numpy
        return False
    return True


def _pin(buffers: list[torch.Tensor], touched: Collection[int] = ()) -> list[int]:
    """Register each buffer with the GPU driver (cudaHostRegister; hipHostRegister under ROCm, the same torch
    call), after faulting its pages in from several threads at once (registration would fault them in one);
    buffers whose data_ptr is in `touched` were faulted in already (HostBuffers). Returns the addresses
    registered; a buffer the driver refuses stays pageable, still copied correctly."""
    try:
        cudart = torch.cuda.cudart()
        success = cudart.cudaError.success
    except (AttributeError, RuntimeError, AssertionError):  # a torch without these bindings
        return []
    _touch([b for b in buffers if b.data_ptr() not in touched])
    pinned = []
    for b in buffers:
        if cudart.cudaHostRegister(b.data_ptr(), b.nbytes, 0) == success:
            pinned.append(b.data_ptr())
    return pinned


def _sources(state: dict[str, torch.Tensor]) -> tuple[dict[str, tuple], dict[tuple, torch.Tensor]] | None:
    """(each key's _identity, one tensor per identity), or None when a copy would not be the same state dict: two
    different tensors within one storage (save_pretrained decides what to do with those), or an entry that is not
    a dense tensor."""
    names: dict[str, tuple] = {}
    sources: dict[tuple, torch.Tensor] = {}
    storages: set[tuple] = set()
    for key, t in state.items():
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            return None
        storage, ident = _storage(t), _identity(t)
        names[key] = ident
        if ident in sources:
            continue
        if t.numel() and storage in storages:
            return None
        storages.add(storage)
        sources[ident] = t
    return names, sources


def _own_mapping(t: torch.Tensor) -> bool:
    """A source whose host copy gets a mapping of its own (host_empty), pinned when the source is on a GPU."""
    return t.numel() * t.element_size() >= HUGE_PAGE_BYTES


Spec = tuple[tuple[int, ...], torch.dtype]  # a tensor's shape and dtype: what a host buffer is made and matched by


def state_specs(state: dict[str, torch.Tensor]) -> list[Spec]:
    """One spec per tensor of the state dict (a tied weight once, as host_copies copies it), [] when host_copies
    would not copy it (_sources)."""
    found = _sources(state)
    return [(tuple(t.shape), t.dtype) for t in found[1].values()] if found else []


def file_specs(folder: Path, dtype: torch.dtype) -> list[Spec]:
    """One spec per tensor of the checkpoint in `folder`, as a load in `dtype` will make it (floating tensors
    become `dtype`, the others keep theirs), read from the safetensors headers alone; [] when a header cannot be
    read (the load then says what is wrong with the files). Never raises."""
    from safetensors import SafetensorError, safe_open

    specs: list[Spec] = []
    try:
        for path in shard_files(folder):
            with safe_open(str(path), framework="pt") as f:
                for key in f.keys():
                    part = f.get_slice(key)
                    saved = _SAFETENSORS_DTYPES.get(part.get_dtype())
                    if saved is None:
                        return []
                    specs.append((tuple(part.get_shape()), dtype if saved.is_floating_point else saved))
    except (OSError, ValueError, SafetensorError):
        return []
    return specs


def specs_bytes(specs: list[Spec]) -> int:
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype in specs)


# safetensors' dtype names (its format's header) as torch's
_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                       "BOOL": torch.bool}


class HostBuffers:
    """The host buffers host_copies will fill, made ahead in a thread of their own (during the model's load and
    the first steps): for each spec whose copy gets a mapping of its own, host_empty, its pages faulted in
    (_touch_aside, which leaves the training thread alone). On
    memory a machine has not used before, that faulting is most of the copies' cost: one H200 VM touched such
    memory at 7.9 GB/s with 8 threads and memory it had used at 47 GB/s (benchmarks/bench_fresh_memory.py,
    RESULTS.md section 18); the 7B's host copies took 5.84 s on a fresh VM and 1.52 s later on the same one.
    The specs come from a state dict (state_specs) or, before the model exists, from its checkpoint's headers
    (file_specs); host_copies gives each tensor a buffer of its shape and dtype, and makes its own where none is
    left. `ready` says whether they are made; take() waits and hands the buffers over, by spec; release() lets them
    go. Nothing here touches the GPU."""

    def __init__(self, specs: list[Spec]) -> None:
        self._specs = [spec for spec in specs if math.prod(spec[0]) * spec[1].itemsize >= HUGE_PAGE_BYTES]
        self._buffers: dict[Spec, list[torch.Tensor]] = {}
        self.faulted_in = False  # their pages are in (else _pin faults them in, as for buffers made there)
        self._thread = threading.Thread(target=self._make, daemon=True, name="rocmcheck-host-buffers")
        self._thread.start()

    def _make(self) -> None:
        try:
            buffers: dict[Spec, list[torch.Tensor]] = {}
            for shape, dtype in self._specs:
                buffers.setdefault((shape, dtype), []).append(host_empty(shape, dtype))
            self.faulted_in = _touch_aside([b for same in buffers.values() for b in same])
            self._buffers = buffers
        except (MemoryError, OSError, RuntimeError):  # no room now: host_copies makes its own, as without these
            self._buffers = {}

    @property
    def ready(self) -> bool:
        """The buffers are made (or could not be): take() will not wait."""
        return not self._thread.is_alive()

    def take(self) -> dict[Spec, list[torch.Tensor]]:
        self._thread.join()
        buffers, self._buffers = self._buffers, {}
        return buffers

    def release(self) -> None:
        self.take()


@torch.no_grad()
def host_copies(state: dict[str, torch.Tensor], ready: HostBuffers | None = None) -> HostCopies | None:
    """Every tensor of `state` copied once to the host (into the buffers `ready` made ahead where it has one, else
    host_empty; from a GPU, into pinned buffers by the copy engine, then waited for); names of one tensor (a tied
    weight) share one copy, as they share one tensor in the model, so save_pretrained finds the same ties. None
    when a copy would not be the same state dict (_sources)."""
    pool = ready.take() if ready is not None else {}
    faulted_in = bool(ready and ready.faulted_in)
    found = _sources(state)
    if found is None:
        return None
    names, sources = found
    prepared: set = set()  # the identities whose copy is a buffer made ahead
    copies = {}
    for ident, t in sources.items():
        spare = pool.get((tuple(t.shape), t.dtype))
        if spare:
            copies[ident] = spare.pop()
            prepared.add(ident)
        else:
            copies[ident] = host_empty(tuple(t.shape), t.dtype)
    pool.clear()  # buffers no tensor took go now
    on_gpu = [ident for ident, t in sources.items() if t.device.type == "cuda"]
    touched = {copies[i].data_ptr() for i in on_gpu if i in prepared} if faulted_in else set()
    pinned = _pin([copies[i] for i in on_gpu if _own_mapping(sources[i])], touched) if on_gpu else []
    for ident, t in sources.items():
        copies[ident].copy_(t, non_blocking=t.device.type == "cuda")
    for device in {sources[i].device for i in on_gpu}:
        torch.cuda.synchronize(device)
    return HostCopies({key: copies[ident] for key, ident in names.items()}, pinned)


def _thread_usage() -> tuple[float, int, int] | None:
    """This thread's (user + system CPU seconds, minor page faults, voluntary context switches); None where the
    platform does not count per thread."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:
        return None
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt, usage.ru_nvcsw


class BackgroundSave:
    """model.save_pretrained(folder, state_dict=the host copies) in a thread of its own, started at once, which
    unpins the copies when the write is done; join() waits for it, raises what save_pretrained raised, and returns
    the seconds it took. copies: the host copies by name, to compare the files with; release() lets them go."""

    def __init__(self, model: torch.nn.Module, folder: Path, copies: HostCopies) -> None:
        self._copies = copies
        self._error: BaseException | None = None
        self._seconds = 0.0
        self.usage: dict[str, float] = {}  # the writing thread's CPU seconds, minor page faults, voluntary waits
        # save_pretrained pops what it wrote from the dict it is given: a copy, so the copies stay whole for the compare
        self._thread = threading.Thread(target=self._save, args=(model, folder, dict(copies.tensors)), daemon=True,
                                        name="rocmcheck-save-pretrained")
        self._thread.start()

    @property
    def copies(self) -> dict[str, torch.Tensor]:
        return self._copies.tensors

    def _save(self, model: torch.nn.Module, folder: Path, state: dict[str, torch.Tensor]) -> None:
        t0, before = time.perf_counter(), _thread_usage()
        try:
            save_checkpoint(model, folder, state)
        except BaseException as exc:  # noqa: BLE001 - handed to join(), on the run's own thread
            self._error = exc
        finally:
            self._seconds = round(time.perf_counter() - t0, 3)
            after = _thread_usage()
            if before and after:  # where a slow save's time went: CPU, page faults, or waiting
                self.usage = {"cpu_s": round(after[0] - before[0], 3), "minor_faults": after[1] - before[1],
                              "waits": after[2] - before[2]}
            try:
                self._copies.unpin()
            except Exception as exc:  # noqa: BLE001 - a driver that cannot unregister: join() raises it
                self._error = self._error or exc

    def join(self) -> float:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._seconds

    def release(self) -> None:
        self._thread.join()
        self._copies.release()


@torch.no_grad()
def compare_files(folder: Path, model: torch.nn.Module, host: dict[str, torch.Tensor] | None = None) \
        -> FilesComparison:
    """The checkpoint in `folder` against `model`, tensor by tensor: each saved tensor against its host copy when
    `host` (host_copies of this model) is given, else moved to the model's device and compared there. Raises
    what safetensors or the config reader raise on a damaged file (the caller turns that into a failed
    train.reload)."""
    from safetensors import safe_open
    from transformers import AutoConfig

    state = model.state_dict()
    files = shard_files(folder)
    if not files:
        return FilesComparison(False, "no safetensors files were saved")
    found = FilesComparison(True)
    seen: set[str] = set()
    against_host: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    with contextlib.ExitStack() as handles:  # the file tensors map their files: open until compared
        for path in files:
            f = handles.enter_context(safe_open(str(path), framework="pt"))
            for key in f.keys():
                live = state.get(key)
                if live is None:
                    return FilesComparison(False, f"{path.name} holds {key}, which the model does not have")
                saved = f.get_tensor(key)
                if saved.dtype != live.dtype or saved.shape != live.shape:
                    return FilesComparison(False, f"{key} was saved as {saved.dtype} {tuple(saved.shape)}, the "
                                                  f"model has {live.dtype} {tuple(live.shape)}")
                seen.add(key)
                found.tensors += 1
                found.bytes += saved.numel() * saved.element_size()
                if host is not None:
                    against_host.append((key, saved, host[key]))
                elif found.weights_equal and not torch.equal(saved.to(live.device), live):
                    found.weights_equal, found.first_difference = False, key
        if against_host:
            with ThreadPoolExecutor(COMPARE_THREADS) as pool:
                same = list(pool.map(lambda item: torch.equal(item[1], item[2]), against_host))
            differs = [key for (key, _, _), ok in zip(against_host, same) if not ok]
            if differs:
                found.weights_equal, found.first_difference = False, differs[0]
    aliases = _aliases(state)
    missing = [k for k in state if k not in seen and not (aliases.get(k, set()) & seen)]
    if missing:
        return FilesComparison(False, f"{len(missing)} tensor(s) of the model are not in the files, e.g. {missing[0]}")
    saved_config = AutoConfig.from_pretrained(folder, local_files_only=True).to_dict()
    found.config_differences = config_differences(saved_config, model.config.to_dict())
    found.config_equal = not found.config_differences
    return found
