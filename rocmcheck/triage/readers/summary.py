"""`rocmcheck doctor --summary` -> Summary: the block of a machine's facts and failed or warned verdicts that the
doctor prints to paste into an issue, read back without loss (rocmcheck triage reads it; rocmcheck/triage/
summary.py writes it, with the labels below, so the two agree by construction). Never raises; a line it does not
know is left out.

    == rocmcheck summary 1 (rocmcheck 0.1.0) ==
    os: Ubuntu 22.04.5 LTS | id ubuntu | version 22.04
    kernel: 5.15.0-161-generic
    python: 3.11.7
    rocm: 6.2.3 | /opt/rocm
    gpu 0: gfx942 | AMD Instinct MI300X | 192.0 GiB
    torch: 2.5.1+rocm6.2 | hip 6.2.41133-dd7f95766 | cuda none | gpus 8 | archs gfx900,gfx906,gfx942
    packages: torch 2.5.1+rocm6.2, transformers 4.46.0
    not installed: flash-attn, deepspeed
    env: HSA_OVERRIDE_GFX_VERSION=10.3.0
    /dev/shm: 64.0 GiB
    container: yes
    FAIL torch.arch_list: torch has no kernels for gfx1151
      fix: pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.2  # ...
    == end of rocmcheck summary ==

A fix that several verdicts share is written once, below all of them, and read back as the fix of each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import read_lines
from rocmcheck.units import GIB, MIB

SUMMARY_VERSION = 1
HEADER = "== rocmcheck summary {version} (rocmcheck {tool}) =="
FOOTER = "== end of rocmcheck summary =="
SEP = " | "
NONE = "none"  # a value that is known and absent (torch.version.hip on a CUDA build)
EMPTY = "(empty)"  # a list that is known and empty
NO_ENV = "(none of rocmcheck's variables set)"
VERDICT_WORDS = ("FAIL", "WARN", "CRASH")
FIX_LABEL = "fix: "
# Labels, in the order they are written.
OS, KERNEL, PYTHON, ROCM, TORCH, PACKAGES, NOT_INSTALLED, ENV, SHM, CONTAINER = (
    "os", "kernel", "python", "rocm", "torch", "packages", "not installed", "env", "/dev/shm", "container")
TORCH_KEYS = ("hip", "cuda", "gpus", "archs")  # the parts after torch's version, "<key> <value>"

_HEADER = re.compile(r"^== rocmcheck summary (\d+) \(rocmcheck ([^)]*)\) ==$")
_GPU = re.compile(r"^gpu (\d+): (.*)$")
_VERDICT = re.compile(r"^(FAIL|WARN|CRASH) ([a-z0-9_][a-z0-9_.]*): (.*)$")
_LABEL = re.compile(r"^(os|kernel|python|rocm|torch|packages|not installed|env|/dev/shm|container): (.*)$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?) (GiB|MiB)$")
MAX_LINES = 10_000


@dataclass
class SummaryGpu:
    index: int
    arch: str | None
    name: str | None
    memory_bytes: int | None


@dataclass
class SummaryVerdict:
    status: str  # "fail" | "warn" | "crash"
    id: str
    summary: str
    fix: str | None = None  # the fix as it prints (Fix.line())
    line: str = ""  # the verdict's line as pasted


@dataclass
class Summary:
    version: int | None = None
    tool_version: str | None = None
    complete: bool = False  # the footer line was there
    os_name: str | None = None
    os_id: str | None = None
    os_version: str | None = None
    kernel: str | None = None
    python: str | None = None
    rocm_version: str | None = None
    rocm_root: str | None = None
    gpus: list[SummaryGpu] = field(default_factory=list)
    torch: dict[str, Any] | None = None  # version, hip, cuda, device_count, arch_list (the keys shown)
    torch_shown: bool = False  # a torch line was there ("torch: none" says torch gave no answer)
    packages: dict[str, str | None] = field(default_factory=dict)  # installed -> version, not installed -> None
    env: dict[str, str] = field(default_factory=dict)
    env_shown: bool = False
    shm_bytes: int | None = None
    shm_shown: bool = False
    container: bool | None = None
    verdicts: list[SummaryVerdict] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.version is not None


def size_text(n: int) -> str:
    """A size as the summary writes it: GiB with one decimal from 1 GiB, whole MiB below."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def size_bytes(text: str) -> int | None:
    m = _SIZE.match(text.strip())
    if not m or len(m.group(1)) > 12:
        return None
    return round(float(m.group(1)) * (GIB if m.group(2) == "GiB" else MIB))


def value(text: str) -> str | None:
    return None if text == NONE else text


def parse_summary(text: Any) -> Summary:
    s = Summary()
    started = False
    for raw in read_lines(text)[:MAX_LINES]:
        line = raw.strip()
        if not started:
            m = _HEADER.match(line)
            if m:
                started = True
                s.version, s.tool_version = int(m.group(1)), m.group(2)
            continue
        if line == FOOTER:
            s.complete = True
            break
        try:
            _line(s, line, raw)
        except (ValueError, IndexError):  # a damaged line: left out
            continue
    return s


def _line(s: Summary, line: str, raw: str) -> None:
    if line.startswith(FIX_LABEL) and s.verdicts and s.verdicts[-1].fix is None:
        for verdict in reversed(s.verdicts):  # a fix shared by several verdicts follows all of them
            if verdict.fix is not None:
                break
            verdict.fix = line[len(FIX_LABEL):]
        return
    m = _VERDICT.match(line)
    if m:
        s.verdicts.append(SummaryVerdict(m.group(1).lower(), m.group(2), m.group(3), line=line))
        return
    m = _GPU.match(line)
    if m:
        parts = m.group(2).split(SEP)
        arch = value(parts[0]) if parts else None
        name = value(parts[1]) if len(parts) > 1 else None
        memory = size_bytes(parts[2]) if len(parts) > 2 else None
        s.gpus.append(SummaryGpu(int(m.group(1)), arch, name, memory))
        return
    m = _LABEL.match(line)
    if not m:
        return
    label, rest = m.group(1), m.group(2)
    if label == OS:
        parts = rest.split(SEP)
        s.os_name = value(parts[0])
        for part in parts[1:]:
            key, _, v = part.partition(" ")
            if key == "id":
                s.os_id = value(v)
            elif key == "version":
                s.os_version = value(v)
    elif label == KERNEL:
        s.kernel = value(rest)
    elif label == PYTHON:
        s.python = value(rest)
    elif label == ROCM:
        version, _, root = rest.partition(SEP)
        s.rocm_version, s.rocm_root = value(version), value(root) if root else None
    elif label == TORCH:
        s.torch_shown = True
        _torch(s, rest)
    elif label == PACKAGES:
        for item in rest.split(", "):
            name, _, version = item.partition(" ")
            if name and version:
                s.packages[name] = version
    elif label == NOT_INSTALLED:
        for name in rest.split(", "):
            if name:
                s.packages[name] = None
    elif label == ENV:
        s.env_shown = True
        if rest != NO_ENV and "=" in rest:
            name, _, v = rest.partition("=")
            s.env[name] = v
    elif label == SHM:
        s.shm_shown = True
        s.shm_bytes = size_bytes(rest) if rest != NONE else None
    elif label == CONTAINER:
        s.container = True if rest == "yes" else False if rest == "no" else None


def _torch(s: Summary, rest: str) -> None:
    if rest == NONE:
        s.torch = None
        return
    parts = rest.split(SEP)
    t: dict[str, Any] = {"version": parts[0]}
    for part in parts[1:]:
        key, _, v = part.partition(" ")
        if key == "hip":
            t["hip"] = value(v)
        elif key == "cuda":
            t["cuda"] = value(v)
        elif key == "gpus":
            t["device_count"] = int(v) if v.isdigit() and len(v) < 7 else None
        elif key == "archs":
            t["arch_list"] = [] if v == EMPTY else [a for a in v.split(",") if a]
    s.torch = t
