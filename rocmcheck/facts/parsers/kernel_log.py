"""Kernel log text -> findings (GPU faults, resets, RAS/ECC, PCIe AER, OOM kills, NVIDIA Xids).

Pure and total: any text gives a list (possibly empty), never an exception. The patterns are data
(rocmcheck/knowledge/kernel_log.json, each with the public source of its text). Accepted line shapes, as
people paste them and as the doctor records them:

    2024-08-18T01:19:31.351160+00:00 host kernel: MSG      journalctl -o short-iso(-precise)
    2024-04-29T14:55:41,678628+02:00 MSG                   dmesg --time-format iso
    kern  :err   : 2024-10-07T10:17:15,145363-04:00 MSG    dmesg -x --time-format iso
    [  563.230818] MSG   /  [   36.764462][  T291] MSG     dmesg (seconds since boot)
    Jan 09 18:55:45 host kernel: [ 2237.944235] MSG        journalctl (short) / syslog
    [Sat Jan  7 14:25:56 2023] MSG                         dmesg -T
    kernel: MSG                                         syslog / journalctl with the time cut off

A process's crash in the ROCm runtime is read from the kernel's own line for it, "python3[40923]: segfault at 100 ip
... error 4 in libamdhip64.so[...]" and "traps: python[3097] general protection fault ip:... in
libamdhip64.so.7.2.70201[...]" (tests/fixtures/pastes/kernel_log/segfault-in-libamdhip64.so_... and
general-protection-fault-in-libamdhip64.so.7.2.70201_...).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rocmcheck.facts.parsers._text import to_int
from rocmcheck.knowledge import load

# Findings kept per (pattern, device): the first and last time and a count; the evidence never grows
# with a flooding log (a corrected-AER storm prints thousands of lines).
MAX_EXAMPLE_CHARS = 240

_ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
_LEVEL_PREFIX = re.compile(r"^\s*\w+\s*:\s*\w+\s*:\s*(?=\d{4}-)")  # "kern  :err   : " (dmesg -x)
_ISO_PREFIX = re.compile(r"^(?P<iso>" + _ISO + r")\s+(?:(?P<host>\S+)\s+kernel:\s*)?")
_SYSLOG_PREFIX = re.compile(r"^(?P<syslog>[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2})\s+\S+\s+kernel:\s*")
_CTIME_PREFIX = re.compile(r"^\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]\s*")
_UPTIME_PREFIX = re.compile(r"^\[\s*(?P<uptime>\d+\.\d+)\](?:\[\s*[TC]\d+\])?\s*")
_RELATIVE_PREFIX = re.compile(r"^\[\s*\+\d+\.\d+\]\s*")  # dmesg --reltime / -H: no absolute time
_KERNEL_PREFIX = re.compile(r"^kernel:\s*")
_PCI = re.compile(r"\b(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b")
_XID_PCI = re.compile(r"PCI:(?P<addr>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")
_PROCESS = re.compile(r"(?:[Pp]rocess|name=)\s*(?P<name>[\w.\-]+)(?:\s+pid\s+(?P<pid>\d+))?")


@dataclass
class LogLine:
    text: str  # the message, prefixes removed
    time_text: str | None = None  # the timestamp as printed
    epoch: float | None = None  # wall-clock seconds, when the line carries a zone (ISO formats)
    uptime_s: float | None = None  # seconds since boot, when the line carries them (plain dmesg)


@dataclass
class Finding:
    pattern_id: str
    severity: str  # "fail" | "warn" | "note"
    title: str
    meaning: str
    fix: dict[str, str]  # the next step as kernel_log.json writes it: {"shell", "why"} or {"note"}
    source: str
    device: str | None  # PCI address ("0000:0b:00.0", or "0000:cb:00" from an Xid), or "GPU node-N"
    example: str  # one matching line, shortened
    count: int = 1
    first: LogLine | None = None
    last: LogLine | None = None
    xid: int | None = None
    processes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern_id, "severity": self.severity, "title": self.title, "device": self.device,
                "count": self.count, "xid": self.xid, "example": self.example,
                "first": self.first.time_text if self.first else None,
                "last": self.last.time_text if self.last else None,
                "processes": self.processes}


def _iso_epoch(text: str) -> float | None:
    value = text.replace(",", ".")
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    value = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def split_line(raw: str) -> LogLine:
    """The message and its time, whatever of the accepted prefixes the line carries."""
    line = raw.rstrip("\r\n")
    line = _LEVEL_PREFIX.sub("", line, count=1)
    out = LogLine(text=line)
    m = _ISO_PREFIX.match(line)
    if m:
        out.time_text, out.epoch = m.group("iso"), _iso_epoch(m.group("iso"))
        line = line[m.end():]
    else:
        for prefix in (_SYSLOG_PREFIX, _CTIME_PREFIX):
            m = prefix.match(line)
            if m:
                out.time_text = m.group(1)
                line = line[m.end():]
                break
    line = _KERNEL_PREFIX.sub("", line, count=1)
    m = _UPTIME_PREFIX.match(line)
    if m:
        uptime = float(m.group("uptime"))  # digits, a point, digits: a number, infinite when absurdly long
        out.uptime_s = uptime if math.isfinite(uptime) else None
        if out.uptime_s is not None:
            out.time_text = out.time_text or f"{out.uptime_s:.0f} s after boot"
        line = line[m.end():]
    else:
        line = _RELATIVE_PREFIX.sub("", line, count=1)
    out.text = line.strip()
    return out


@dataclass(frozen=True)
class _Pattern:
    id: str
    regex: re.Pattern[str]
    severity: str
    title: str
    meaning: str
    fix: dict[str, str]
    source: str
    joins: tuple[str, ...] = ()  # findings this line belongs to when one was seen for its device (kernel_log.json)


def patterns() -> list[_Pattern]:
    data = load("kernel_log.json")
    return [_Pattern(p["id"], re.compile(p["regex"]), p["severity"], p["title"], p["meaning"], p["fix"], p["source"],
                     tuple(p.get("joins") or ()))
            for p in data["patterns"]]


def _device(pattern_id: str, match: re.Match[str], text: str) -> str | None:
    if pattern_id == "rocm_runtime_crash":
        return None  # a process's crash names no GPU (its hex addresses are not PCI addresses)
    if pattern_id == "nvidia_xid":
        m = _XID_PCI.search(text)
        return m.group("addr").lower() if m else None
    named = match.groupdict()
    if named.get("node"):
        return f"GPU node-{named['node']}"
    m = _PCI.search(text)
    return m.group(0).lower() if m else None


def parse_kernel_log(text: str | None) -> list[Finding]:
    """Findings in the order first seen, one per (pattern, device, Xid) with a count. Never raises."""
    if not text:
        return []
    pats = patterns()
    xids: dict[str, dict[str, str]] = load("kernel_log.json")["xids"]
    found: dict[tuple[str, str | None, int | None], Finding] = {}
    previous: Finding | None = None  # a fault names its process on the next line
    for raw in text.splitlines():
        if not raw.strip():
            continue
        try:
            line = split_line(raw)
        except Exception:  # a parser that never raises: a strange line is skipped, not fatal
            continue
        matched = False
        for pat in pats:
            match = pat.regex.search(line.text)
            if not match:
                continue
            device = _device(pat.id, match, line.text)
            xid = to_int(match.group("xid")) if pat.id == "nvidia_xid" else None
            severity, title, meaning, fix = pat.severity, pat.title, pat.meaning, pat.fix
            if xid is not None:
                info = xids.get(str(xid), {})
                severity = info.get("severity", "warn")
                title = f"NVIDIA Xid {xid}"
                meaning = info.get("meaning", "an Xid not in rocmcheck's table")
                fix = info.get("fix", pat.fix)
            joined = next((found[(j, device, None)] for j in pat.joins if (j, device, None) in found), None)
            if joined is not None:  # a line of a fault already counted (its status block after its header)
                joined.last = line
                previous, matched = joined, True
                break
            key = (pat.id, device, xid)
            finding = found.get(key)
            if finding is None:
                finding = found[key] = Finding(pat.id, severity, title, meaning, fix, pat.source, device,
                                               line.text[:MAX_EXAMPLE_CHARS], 0, line, line, xid)
            finding.count += 1
            finding.last = line
            proc = _PROCESS.search(line.text)
            if pat.id in ("oom_killer", "rocm_runtime_crash"):
                name = f"{match.group('process')} (pid {match.group('pid')})"
            elif proc and pat.id in ("amdgpu_page_fault", "amdgpu_ring_timeout", "nvidia_xid"):
                name = proc.group("name") + (f" (pid {proc.group('pid')})" if proc.group("pid") else "")
            else:
                name = None
            _add_process(finding, name)
            previous, matched = finding, True
            break  # one pattern per line: the list is ordered most specific first
        if not matched and previous is not None and previous.pattern_id in _NAMES_PROCESS_NEXT:
            proc = _NEXT_LINE_PROCESS.search(line.text)
            if proc and (previous.device is None or previous.device in line.text.lower()):
                _add_process(previous, f"{proc.group('name')} (pid {proc.group('pid')})")
            previous = None
    return list(found.values())


_NAMES_PROCESS_NEXT = ("amdgpu_page_fault", "amdgpu_fault_status", "amdgpu_fault_detail", "amdgpu_ring_timeout")
_NEXT_LINE_PROCESS = re.compile(r"\bProcess (?P<name>[\w.\-:]+) pid (?P<pid>\d+)")


def _add_process(finding: Finding, name: str | None) -> None:
    if name and name not in finding.processes and len(finding.processes) < 5:
        finding.processes.append(name)


def line_epoch(line: LogLine | None, boot_epoch: float | None) -> float | None:
    """Wall-clock time of a line: its own zone-qualified stamp, or boot time plus its uptime stamp."""
    if line is None:
        return None
    if line.epoch is not None:
        return line.epoch
    if line.uptime_s is not None and boot_epoch is not None:
        return boot_epoch + line.uptime_s
    return None
