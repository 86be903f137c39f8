"""bitsandbytes' 4-bit path as QLoRA uses it (probe.bitsandbytes's runner): quantize a bf16 weight to nf4 and fp4,
dequantize it back, and run bnb.matmul_4bit against the dequantized weight. Imports torch and bitsandbytes:
runs inside the probe child; rocmcheck/probes/catalog/bitsandbytes.py judges what it returns.

The block size follows the CDNA rule: on CDNA GPUs (64-wide wavefronts; MI100 to MI355X) bitsandbytes' ROCm
builds did not support blocksize 64 ("4bit is broken on CDNA gpus as they do not support 64 block size",
unslothai/unsloth PR 3279), so the probe quantizes with 128 there and also tries 64 (the default that
transformers' BitsAndBytesConfig and PEFT use) to report whether this build handles it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Any

import torch

from rocmcheck.knowledge import arch_info
from rocmcheck.probes.measure import error_line, finite_or_none, relative_error, seeded_normal
from rocmcheck.probes.spec import ProbeSkip

QUANT_TYPES = ("nf4", "fp4")
DEFAULT_BLOCKSIZE = 64  # bitsandbytes' own default (functional.quantize_4bit, nn.Params4bit)
CDNA_BLOCKSIZE = 128  # the smallest block size the CDNA rule allows
WEIGHT_SHAPE = (1024, 1024)  # (out features, in features)
TOKENS = 16
SEED = 4


def is_cdna(arch: str) -> bool:
    entry = arch_info(arch) if arch else None
    return entry is not None and entry.family.upper().startswith("CDNA")


def _libraries(bnb: Any) -> list[str]:
    """The native libraries this bitsandbytes ships (libbitsandbytes_rocm72.so ...)."""
    from pathlib import Path

    folder = Path(getattr(bnb, "__file__", "") or ".").parent
    return sorted(p.name for p in folder.glob("libbitsandbytes_*"))[:40]


def _round_trip(F: Any, bnb: Any, w: torch.Tensor, x: torch.Tensor, quant_type: str, blocksize: int) -> dict[str, Any]:
    try:
        q, state = F.quantize_4bit(w, blocksize=blocksize, quant_type=quant_type)
        back = F.dequantize_4bit(q, state)
        out: dict[str, Any] = {"blocksize": blocksize, "round_trip_rel_err": finite_or_none(relative_error(back, w))}
        y = bnb.matmul_4bit(x, q.t(), quant_state=state)
        ref = x.float() @ back.float().t()
        out["matmul_rel_err"] = finite_or_none(relative_error(y, ref))
        return out
    except Exception as exc:  # an unsupported block size, a missing native library, a kernel error
        return {"blocksize": blocksize, "error": error_line(exc)}


def bnb_4bit(device: torch.device, arch: str) -> dict[str, Any]:
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ProbeSkip("bitsandbytes is not installed (optional: only 4-bit / 8-bit training such as QLoRA uses it)")
    try:
        version = importlib.metadata.version("bitsandbytes")
    except importlib.metadata.PackageNotFoundError:
        version = None
    runtime = {"torch_hip": torch.version.hip, "torch_cuda": torch.version.cuda, "arch": arch}
    try:
        import bitsandbytes as bnb
        import bitsandbytes.functional as F
    except Exception as exc:  # the native library of another ROCm/CUDA, an undefined symbol
        return {"version": version, "import_error": error_line(exc), **runtime}
    cext = getattr(bnb, "cextension", None)
    cdna = is_cdna(arch)
    blocksize = CDNA_BLOCKSIZE if cdna else DEFAULT_BLOCKSIZE
    w = seeded_normal(WEIGHT_SHAPE, SEED).to(device=device, dtype=torch.bfloat16)
    x = seeded_normal((TOKENS, WEIGHT_SHAPE[1]), SEED + 1).to(device=device, dtype=torch.bfloat16)
    results = {qt: _round_trip(F, bnb, w, x, qt, blocksize) for qt in QUANT_TYPES}
    default_on_cdna = _round_trip(F, bnb, w, x, "nf4", DEFAULT_BLOCKSIZE) if cdna else None
    return {"version": version, "backend": getattr(cext, "BNB_BACKEND", None),
            "libraries": _libraries(bnb), "cdna": cdna, "blocksize": blocksize, "results": results,
            "default_blocksize_on_cdna": default_on_cdna, "shape": list(WEIGHT_SHAPE), "tokens": TOKENS, **runtime}
