"""What lint knows of this machine's Python stack, for the rules that judge a value and not only a key (quantization
needs a bitsandbytes library for this torch's ROCm; `flash_attn: fa2` needs flash-attn): the doctor's cheap facts,
read from files (rocmcheck.facts.extensions: torch/version.py, bitsandbytes' library files), never by importing
torch. Anything that could not be read is "not known", and the rules say so instead of guessing.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any


@dataclass(frozen=True)
class Stack:
    torch_version: str | None = None  # None: torch not found here
    torch_hip: str | None = None  # torch.version.hip ("6.4.43482-..."); None for a CPU or CUDA build
    torch_cuda: str | None = None
    bitsandbytes: dict[str, Any] = field(default_factory=dict)  # {"version", "libraries", "dir"}; {}: not installed
    bitsandbytes_known: bool = True  # False: its facts could not be read (then "not known", never "absent")
    flash_attn: str | None = None  # the installed flash-attn's version, None when not installed
    env: dict[str, str] = field(default_factory=dict)  # BNB_ROCM_VERSION / BNB_CUDA_VERSION as set

    @property
    def is_rocm(self) -> bool:
        return bool(self.torch_hip)

    @property
    def gpu_torch(self) -> bool:
        """A ROCm or CUDA build of torch: this machine looks like one that trains."""
        return bool(self.torch_hip or self.torch_cuda)


def _version_of(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


@functools.lru_cache(maxsize=1)
def this_stack() -> Stack:
    """This machine's stack, read once per process (the files are read in milliseconds: headers only)."""
    from rocmcheck.facts.extensions import collect_extensions

    try:
        ext = collect_extensions(("bitsandbytes",), dict(os.environ), deadline_s=2.0)
        build, bnb, known = ext.get("torch_build") or {}, ext.get("bitsandbytes") or {}, True
    except Exception:  # a facts reader that broke must not break lint: the rules then say "not known"
        build, bnb, known = {}, {}, False
    torch_version = build.get("version") or _version_of("torch")
    return Stack(torch_version=torch_version, torch_hip=build.get("hip"), torch_cuda=build.get("cuda"),
                 bitsandbytes=dict(bnb), bitsandbytes_known=known,
                 flash_attn=_version_of("flash-attn", "flash_attn"),
                 env={k: v for k, v in os.environ.items() if k in ("BNB_ROCM_VERSION", "BNB_CUDA_VERSION")})
