"""The processes a command became (launchers fork: torchrun, deepspeed, accelerate start one worker per GPU) and
the GPUs *_VISIBLE_DEVICES selects. Linux /proc only; every reader returns empty on failure, never raises."""

from __future__ import annotations

import os
from typing import Mapping


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    close = text.rfind(")")
    return text[close + 2:].split() if close > 0 else None


def start_time(pid: int) -> int | None:
    """Clock ticks since boot when PID started: with the pid, it names one process (pids are reused)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None  # field 22 of stat; [0] here is field 3 (state)
    except (IndexError, ValueError):
        return None


def is_running(pid: int, started: int | None = None) -> bool:
    """PID exists, is not a zombie, and (when `started` is given) is still the same process."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return started is None or start_time(pid) == started


def is_stopped(pid: int) -> bool:
    """PID is stopped by a signal (state T) or at a tracer's stop (t)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] in ("T", "t")


def descendants(pid: int) -> set[int]:
    """PID and every process below it, from one scan of /proc."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return {pid}
    for child in entries:
        fields = _stat_fields(child)
        if fields and len(fields) > 1 and fields[1].lstrip("-").isdigit():
            children.setdefault(int(fields[1]), []).append(child)
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _tokens(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [t.strip() for t in value.split(",") if t.strip()]


def visible_gpus(env: Mapping[str, str], vendor: str, uuids: Mapping[int, str] | None = None) -> set[int] | None:
    """Indices (as NVML / nvidia-smi / amd-smi number them) the environment lets a program use; None: all.

    NVIDIA: CUDA_VISIBLE_DEVICES holds indices or UUIDs ("GPU-8368a6a8-..."; CUDA accepts a unique prefix).
    Indices are taken as PCI order, which is CUDA's order under CUDA_DEVICE_ORDER=PCI_BUS_ID and, on servers
    of one GPU model, also under the default FASTEST_FIRST. AMD: ROCR_VISIBLE_DEVICES (indices or UUIDs) first,
    then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, which HIP honours too) indexes within what ROCR left.
    A token that cannot be resolved makes the answer None (watch all) rather than a wrong subset."""
    uuids = dict(uuids or {})

    def resolve(tokens: list[str], pool: list[int] | None) -> list[int] | None:
        out = []
        for tok in tokens:
            if tok.lstrip("-").isdigit():
                n = int(tok)
                if n < 0:
                    break  # CUDA stops at the first invalid index ("-1" hides every GPU)
                if pool is not None:
                    if n >= len(pool):
                        break
                    out.append(pool[n])
                else:
                    out.append(n)
            else:
                match = [i for i, u in uuids.items() if u and u.lower().startswith(tok.lower())]
                if len(match) != 1:
                    return None
                out.append(match[0])
        return out

    if vendor == "nvidia":
        tokens = _tokens(env.get("CUDA_VISIBLE_DEVICES"))
        if tokens is None:
            return None
        got = resolve(tokens, None)
        return set(got) if got is not None else None
    pool: list[int] | None = None
    rocr = _tokens(env.get("ROCR_VISIBLE_DEVICES"))
    if rocr is not None:
        pool = resolve(rocr, None)
        if pool is None:
            return None
    hip = _tokens(env.get("HIP_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES")))
    if hip is not None:
        got = resolve(hip, pool)
        return set(got) if got is not None else None
    return set(pool) if pool is not None else None
