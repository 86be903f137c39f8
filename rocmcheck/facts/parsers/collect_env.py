"""`python -m torch.utils.collect_env` (and vLLM's superset of it) -> dict, for pasted copies.

The report is "Key: value" lines, a "CPU:" block of lscpu output, "GPU N: name" lines under "GPU models
and configuration:" on multi-GPU NVIDIA machines, then "[pip3] name==version" and "[conda] name version
build channel" package lines. Warnings printed to stderr before it (runpy, amdsmi) are kept apart.
"""

from __future__ import annotations

import re
from typing import Any

from rocmcheck.facts.parsers._text import clean_lines

# A key is a label, not a path or a line of Python: no leading "/" or quotes (those are stderr noise).
_KEY_VALUE = re.compile(r"^([A-Za-z][\w .()/+,'-]*?):(?:\s+(.*))?$")
_GPU_LINE = re.compile(r"^GPU (\d+): (.+)$")
_PIP = re.compile(r"^\[(pip\d?|conda)\]\s+(.*)$")
_WARNING = re.compile(r"\b\w*Warning\b:")


def parse_collect_env(text: str) -> dict[str, Any]:
    """Returns {
        "fields": {"PyTorch version": "2.4.1+rocm6.1", "ROCM used to build PyTorch": "...", ...},
        "gpus": ["NVIDIA H100 80GB HBM3", ...],   # "GPU N: name" lines, when collect_env lists them
        "cpu": {"Architecture": "x86_64", "Model name": "...", ...},   # the lscpu block
        "pip": {"torch": "2.4.1+rocm6.1", ...},
        "conda": {"torch": "2.4.1", ...},
        "warnings": ["... UserWarning: Can't initialize amdsmi - Error code: 34", ...],
    }. Keys keep collect_env's own spelling. Never raises."""
    out: dict[str, Any] = {"fields": {}, "gpus": [], "cpu": {}, "pip": {}, "conda": {}, "warnings": []}
    in_cpu = False
    for line in clean_lines(text):
        if not line.strip():
            in_cpu = False  # the lscpu block ends at the blank line before "Versions of relevant libraries"
            continue
        if _WARNING.search(line) and not line.startswith("["):
            out["warnings"].append(line.strip())
            continue
        m = _PIP.match(line)
        if m:
            _package(out["conda" if m.group(1) == "conda" else "pip"], m.group(2), conda=m.group(1) == "conda")
            continue
        m = _GPU_LINE.match(line)
        if m:
            out["gpus"].append(m.group(2).strip())
            continue
        m = _KEY_VALUE.match(line)
        if not m:
            continue
        key, value = m.group(1).strip(), (m.group(2) or "").strip()
        if key == "CPU" and not value:
            in_cpu = True
            continue
        if value:  # empty values are section headings ("Versions of relevant libraries:")
            (out["cpu"] if in_cpu else out["fields"])[key] = value
    return out


def _package(into: dict[str, str], spec: str, conda: bool) -> None:
    """"torch==2.4.1+rocm6.1" (pip) or "torch  2.4.1  pypi_0  pypi" (conda); ignores "No relevant packages"."""
    spec = spec.strip()
    if "==" in spec:
        name, _, version = spec.partition("==")
        into[name.strip()] = version.strip()
    elif conda:
        parts = spec.split()
        if len(parts) >= 2 and re.match(r"^\d", parts[1]):
            into[parts[0]] = parts[1]
