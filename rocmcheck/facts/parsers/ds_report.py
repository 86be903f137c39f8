"""`ds_report` (DeepSpeed's env report) -> dict, so `rocmcheck doctor` can read a person's pasted copy.

Layout (deepspeed/env_report.py): an op table of "name ...... [YES|NO] ...... [OKAY|NO]" rows with
[WARNING] lines between them, then "DeepSpeed general environment info:" and "key ....... value" lines.
ds_report colours its brackets with ANSI codes even when piped; those are stripped first.
"""

from __future__ import annotations

import re
from typing import Any

from rocmcheck.facts.parsers._text import clean_lines

# Names longer than the dot column get no dots: "deepspeed_not_implemented  [NO] ....... [OKAY]".
_OP_ROW = re.compile(r"^(\w+)\s+(?:\.+\s*)?\[(YES|NO)\]\s*\.*\s*\[(OKAY|NO)\]\s*$", re.IGNORECASE)
_NINJA = re.compile(r"^ninja\s+\.{2,}\s*\[(OKAY|FAIL)\]", re.IGNORECASE)
_INFO_ROW = re.compile(r"^(\S.*?)\s+\.{3,}\s*(.*)$")
_ACCELERATOR = re.compile(r"Setting (?:ds_)?accelerator to (\w+)", re.IGNORECASE)
_WARNING = re.compile(r"^\s*\[WARNING\]\s*(.*)$")

# "DeepSpeed general environment info" keys -> our names.
_INFO_KEYS = {
    "torch install path": "torch_install_path",
    "torch version": "torch_version",
    "deepspeed install path": "deepspeed_install_path",
    "deepspeed info": "deepspeed_info",
    "torch cuda version": "torch_cuda_version",
    "torch hip version": "torch_hip_version",
    "nvcc version": "nvcc_version",
    "deepspeed wheel compiled w.": "compiled_with",
    "shared memory (/dev/shm) size": "shm_size",
}


def parse_ds_report(text: str) -> dict[str, Any]:
    """Returns {
        "ops": {"cpu_adam": {"installed": True, "compatible": True}, ...},
        "ninja": True | False | None,
        "accelerator": "cuda" | "cpu" | ... | None,   # from "Setting ds_accelerator to cuda (auto detect)"
        "torch_version", "deepspeed_version", "torch_hip_version", "torch_cuda_version", "nvcc_version",
        "compiled_with" ("torch 2.5, hip 6.2"), "shm_size" ("503.75 GB"), ...: str | None,
        "shm_warnings": [...],   # "/dev/shm size might be too small ..."
        "op_warnings": {"async_io": ["async_io requires the dev libaio .so object ..."]},
        "warnings": [...],       # every other [WARNING] line
    }. Missing sections (a truncated paste) leave their keys None or empty. Never raises."""
    out: dict[str, Any] = {"ops": {}, "ninja": None, "accelerator": None, "shm_warnings": [],
                           "op_warnings": {}, "warnings": []}
    out.update({name: None for name in _INFO_KEYS.values()})
    out["deepspeed_version"] = None
    pending_warnings: list[str] = []
    in_info = False
    for line in clean_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        m = _ACCELERATOR.search(stripped)
        if m and out["accelerator"] is None:
            out["accelerator"] = m.group(1).lower()
            continue
        m = _WARNING.match(stripped)
        if m:
            message = m.group(1).strip()
            if "/dev/shm" in message or "NCCL requirements" in message:
                out["shm_warnings"].append(message)
            elif in_info:
                out["warnings"].append(message)
            else:
                pending_warnings.append(message)  # belongs to the op row that follows it
            continue
        if stripped.startswith("DeepSpeed general environment info"):
            in_info = True
            out["warnings"].extend(pending_warnings)
            pending_warnings = []
            continue
        m = _NINJA.match(stripped)
        if m:
            out["ninja"] = m.group(1).upper() == "OKAY"
            continue
        m = _OP_ROW.match(stripped)
        if m:
            op = m.group(1)
            out["ops"][op] = {"installed": m.group(2).upper() == "YES", "compatible": m.group(3).upper() == "OKAY"}
            if pending_warnings:
                out["op_warnings"][op] = pending_warnings
                pending_warnings = []
            continue
        m = _INFO_ROW.match(stripped)
        if m and m.group(1).strip().lower() in _INFO_KEYS:
            value = m.group(2).strip()
            out[_INFO_KEYS[m.group(1).strip().lower()]] = None if value in ("", "None") else value
    out["warnings"].extend(pending_warnings)
    if out["deepspeed_info"]:
        out["deepspeed_version"] = out["deepspeed_info"].split(",")[0].strip() or None
    return out
