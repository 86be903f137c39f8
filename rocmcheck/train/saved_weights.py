"""train.reload read from the files: whether the checkpoint save_pretrained just wrote holds the trained model,
without building the model a second time.

Loading the checkpoint back with from_pretrained (what reload.py does for small models) needs a second copy of the
model on the device and the time to build it: for a 7B in fp32, 27 GB more GPU memory next to the weights,
gradients and optimizer state. Here the saved
shards are read tensor by tensor (safetensors maps them: only one tensor in memory at a time), each moved to the
trained tensor's device and compared with it bit for bit, and the saved config.json, read back as from_pretrained
reads it, must equal the model's own. Together they say what the full reload says: the same
architecture with the same weights computes the same logits.

That holds only when the files are a one-to-one image of the model's state dict: the same names (a tied weight
saved once), dtypes and shapes. Anything else (a saver that renames or converts tensors, a tensor missing from the
files) is not judged here: `compare_files` says why, and the caller falls back to the full reload, which
decides (a missing tensor comes back from from_pretrained freshly initialised, so the weights differ there too).
A tensor whose bytes differ is a broken save either way.

A model checked this way is saved from host copies (host_copies), handed to save_pretrained as its state_dict as
Trainer hands it one, so save_pretrained writes the same bytes by its own code: from a GPU the copies are pinned, so
the copy engine fills them at once, where save_pretrained would move each tensor to fresh pageable host pages one by
one (benchmarks/RESULTS.md records both). The files are then compared with the host copies, which are the model's
bytes, on the host.
Imports torch.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

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


def host_copies(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
    """Every tensor of `state` copied once to the host (from a GPU into pinned memory by the copy engine, then
    waited for); names of one tensor (a tied weight) share one copy, as they share one tensor in the model, so
    save_pretrained finds the same ties. None when a copy would not be the same state dict (_sources)."""
    found = _sources(state)
    if found is None:
        return None
    names, sources = found
    copies = {}
    for ident, t in sources.items():
        on_gpu = t.device.type == "cuda"
        copies[ident] = torch.empty(t.shape, dtype=t.dtype, pin_memory=on_gpu).copy_(t, non_blocking=on_gpu)
    for device in {t.device for t in sources.values() if t.device.type == "cuda"}:
        torch.cuda.synchronize(device)
    return {key: copies[ident] for key, ident in names.items()}


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
                other = host[key] if host is not None else live
                if found.weights_equal and not torch.equal(saved.to(other.device), other):
                    found.weights_equal, found.first_difference = False, key
    aliases = _aliases(state)
    missing = [k for k in state if k not in seen and not (aliases.get(k, set()) & seen)]
    if missing:
        return FilesComparison(False, f"{len(missing)} tensor(s) of the model are not in the files, e.g. {missing[0]}")
    saved_config = AutoConfig.from_pretrained(folder, local_files_only=True).to_dict()
    found.config_differences = config_differences(saved_config, model.config.to_dict())
    found.config_equal = not found.config_differences
    return found
