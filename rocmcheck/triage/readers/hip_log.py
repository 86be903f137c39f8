"""The HIP runtime's own log (`AMD_LOG_LEVEL=1..7`) -> HipLog: which HIP calls returned an error, and which
GPU ISAs a library has no code object for.

Written against tests/fixtures/pastes/hip_log/: a ROCm SDK build whose libmagma.so has no gfx1101 code object
(":3:hip_platform.cpp :703 : 3169198286 us: [pid:9111  tid:0x79a41865cb80] init: Returned
hipErrorNoBinaryForGpu : continue parsing remaining modules", ":1:hip_fatbin.cpp :272 : ... Cannot find CO in
the bundle /opt/rocm_sdk_612/lib/libmagma.so for ISA: amdgcn-amd-amdhsa--gfx1101", "Missing CO for these ISAs -"
followed by one ISA per line) and WSL2's "hipGetDeviceCount: Returned hipErrorNoDevice". Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import read_lines

MAX_KEPT = 200
# :level:file.cpp   :line : timestamp us: [pid:N  tid:0x...] message
_LINE = re.compile(r"^:(\d):([\w.]+)\s*:\s*(\d+)\s*:\s*\d+\s*us:\s*(?:\[pid:\s*(\d+)\s+tid:\s*\S+\]\s*)?(.*)$")
_RETURNED = re.compile(r"(\w+)\s*(?:\([^)]*\))?\s*:?\s*Returned\s+(hip\w+)")
_CANNOT_FIND = re.compile(r"Cannot find CO in the bundle (\S+) for ISA:\s*(\S+)")
_ISA = re.compile(r"^(amdgcn-amd-amdhsa--gfx[0-9a-f]+\S*)$")


@dataclass
class HipLog:
    lines: int = 0
    returned: dict[str, str] = field(default_factory=dict)  # API -> the last error it returned (not hipSuccess)
    errors: list[str] = field(default_factory=list)  # the hipError* names returned, in order first seen
    missing_isas: list[str] = field(default_factory=list)  # "amdgcn-amd-amdhsa--gfx1101"
    bundles_without_isa: list[str] = field(default_factory=list)  # "/opt/rocm_sdk_612/lib/libmagma.so"
    messages: list[str] = field(default_factory=list)  # level 1 (error) and 2 (warning) messages, de-duplicated
    pids: list[int] = field(default_factory=list)

    @property
    def missing_gfx(self) -> list[str]:
        """The gfx names of missing_isas ("gfx1101")."""
        out = []
        for isa in self.missing_isas:
            m = re.search(r"gfx[0-9a-f]+", isa)
            if m and m.group(0) not in out:
                out.append(m.group(0))
        return out

    @property
    def found(self) -> bool:
        return self.lines > 0


def parse_hip_log(text: Any) -> HipLog:
    """Never raises. Written against tests/fixtures/pastes/corpus/33-lamikr-rocm_sdk_builder-246.paste.txt and
    corpus/45-ROCm-hip-3710.paste.txt."""
    log = HipLog()
    missing_list = False
    for raw in read_lines(text):
        line = raw.strip()
        m = _LINE.match(line)
        if not m:
            continue
        log.lines += 1
        level, message = m.group(1), m.group(5).strip()
        pid = int(m.group(4)) if m.group(4) and len(m.group(4)) < 9 else None
        if pid is not None and pid not in log.pids and len(log.pids) < 100:
            log.pids.append(pid)
        if missing_list:
            isa = _ISA.match(message)
            if isa:
                _once(log.missing_isas, isa.group(1))
                continue
            missing_list = False
        if message.startswith("Missing CO for these ISAs"):
            missing_list = True
            continue
        r = _RETURNED.search(message)
        if r and r.group(2) != "hipSuccess":
            log.returned[r.group(1)] = r.group(2)
            _once(log.errors, r.group(2))
        c = _CANNOT_FIND.search(message)
        if c:
            _once(log.bundles_without_isa, c.group(1))
            _once(log.missing_isas, c.group(2))
        if level in ("1", "2"):
            _once(log.messages, message[:500])
    return log


def _once(items: list, value: Any) -> None:
    if value not in items and len(items) < MAX_KEPT:
        items.append(value)
