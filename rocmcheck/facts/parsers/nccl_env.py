"""Which NCCL/RCCL transports the environment switches off: NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_P2P_LEVEL.

Pure and total. The meanings are NCCL's (docs.nvidia.com/deeplearning/nccl, "Environment Variables"); RCCL reads
the same names:
- NCCL_P2P_DISABLE=1: no peer-to-peer transport, so no direct GPU-to-GPU copies over NVLink, XGMI or PCIe; the
  bytes go through host memory (the shared-memory or network transport) instead.
- NCCL_SHM_DISABLE=1: no shared-memory transport between processes on one node.
- NCCL_P2P_LEVEL: the farthest path on which P2P is still used: LOC (never), NVL (NVLink only), PIX, PXB, PHB,
  SYS, or the integers 0-5 of older releases (0 = LOC). LOC turns P2P off like NCCL_P2P_DISABLE=1; the other
  values limit it (a choice someone made, shown but not counted as turning P2P off).
A variable that was set to 0 (or LOC for SHM, which it does not take) switches nothing off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from rocmcheck.facts.parsers._text import to_int

DISABLE_VARS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")
LEVEL_VAR = "NCCL_P2P_LEVEL"
TRANSPORT_VARS = (*DISABLE_VARS, LEVEL_VAR)
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")


@dataclass(frozen=True)
class TransportSetting:
    name: str  # the variable
    value: str  # as set
    turns_off: str | None  # "p2p" | "shm" when it switches that transport off; None when it only limits P2P
    meaning: str  # one line for a person


def _level(value: str) -> str | None:
    text = value.strip().upper()
    if text in P2P_LEVELS:
        return text
    number = to_int(text)
    return P2P_LEVELS[number] if number is not None and 0 <= number < len(P2P_LEVELS) else None


def transport_settings(env: Mapping[str, str]) -> list[TransportSetting]:
    """The transport variables set in `env` that change what NCCL/RCCL may use, in TRANSPORT_VARS order."""
    found = []
    for name in DISABLE_VARS:
        value = env.get(name)
        number = to_int(value) if isinstance(value, str) else None
        if value is None or number == 0:
            continue
        transport = "p2p" if name == "NCCL_P2P_DISABLE" else "shm"
        if number is None:
            found.append(TransportSetting(name, value, None, f"{name}={value!r} is not a number NCCL reads"))
            continue
        meaning = ("no direct GPU-to-GPU copies (NVLink / XGMI / PCIe P2P): the bytes go through host memory"
                   if transport == "p2p" else "no shared-memory transport between the processes of one node")
        found.append(TransportSetting(name, value, transport, meaning))
    value = env.get(LEVEL_VAR)
    if value is not None:
        level = _level(value)
        if level == "LOC":
            found.append(TransportSetting(LEVEL_VAR, value, "p2p", "P2P is never used (level LOC)"))
        elif level is None:
            found.append(TransportSetting(LEVEL_VAR, value, None, f"{LEVEL_VAR}={value!r} is not a level NCCL reads"))
        else:
            found.append(TransportSetting(LEVEL_VAR, value, None, f"P2P only on paths up to {level}"))
    return found


def p2p_turned_off(env: Mapping[str, str]) -> list[TransportSetting]:
    """The settings that switch a transport off (what makes a collective slow for that reason)."""
    return [s for s in transport_settings(env) if s.turns_off is not None]
