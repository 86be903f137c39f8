"""rocminfo output -> RocminfoReport: every HSA agent, the runtime version, and the failure text when it fails.

rocminfo prints "Key:   value" lines, padded with trailing spaces to fixed columns (or not, when a person
pasted it through something that trims them). Nested blocks (Cache Info, Pool Info, ISA Info) reuse keys
such as "Name:" and "Size:", so the parser tracks which block it is in by its header lines rather than by
indentation, which pastes often mangle.
"""

from __future__ import annotations

import re

from rocmcheck.facts.parsers._text import clean_lines, folded, leading_int, printable, split_key_value, to_int
from rocmcheck.facts.parsers.models import RocmAgent, RocminfoReport
from rocmcheck.units import UNIT_BYTES

# error_kind -> what rocminfo printed, and where a real copy of that text was published.
ERROR_KINDS = {
    "kfd_permission": "Unable to open /dev/kfd read-write: Permission denied (https://github.com/ROCm/ROCm-docker/issues/116)",
    "kfd_invalid_argument": "Unable to open /dev/kfd read-write: Invalid argument (https://github.com/ROCm/ROCm/issues/4043)",
    "kfd_missing": "Unable to open /dev/kfd read-write: No such file or directory "
    "(container started without --device=/dev/kfd; https://github.com/ROCm/legacy-rocm-build/issues/1798)",
    "kfd_no_memory": "Unable to open /dev/kfd read-write: Cannot allocate memory (https://github.com/ROCm/rocminfo/issues/41)",
    "hsa_error": "hsa api call failure at: .../rocminfo.cc:N / Call returned HSA_STATUS_ERROR_...: ... "
    "(https://github.com/ROCm/legacy-rocm-build/issues/4382)",
    "driver_not_loaded": "ROCk module is NOT loaded, possibly no GPU devices (https://github.com/ROCm/legacy-rocm-build/issues/1506)",
    "incompatible_kernel_userspace": "HSA Error:  Incompatible kernel and userspace, <GPU> disabled. Upgrade amdgpu. "
    "(the amdgpu kernel driver is older than the ROCm userspace; https://github.com/ROCm/ROCm/issues/1583)",
    "other": "some other /dev/kfd error, or output that is not rocminfo's",
}

_KFD_OPEN = re.compile(r"Unable to open /dev/kfd read-write:\s*(.*)", re.IGNORECASE)
_KFD_REASONS = {
    "permission denied": "kfd_permission",
    "invalid argument": "kfd_invalid_argument",
    "no such file or directory": "kfd_missing",
    "cannot allocate memory": "kfd_no_memory",
}
_MODULE_LOADED = re.compile(r"ROCk module (?:version (\S+) )?is loaded", re.IGNORECASE)
_MODULE_NOT_LOADED = re.compile(r"ROCk module is NOT loaded", re.IGNORECASE)
_HSA_FAILURE = re.compile(r"hsa api call failure", re.IGNORECASE)
_HSA_STATUS = re.compile(r"Call returned (HSA_STATUS_\w+|\d+)")
# "HSA Error:  Incompatible kernel and userspace, Vega 20 disabled. Upgrade amdgpu." (ROCr, one line per GPU; a paste
# may wrap "Upgrade amdgpu." onto the next line).
_INCOMPATIBLE = re.compile(r"HSA Error:\s*(Incompatible kernel and userspace.*)", re.IGNORECASE)
_UPGRADE_AMDGPU = re.compile(r"^Upgrade amdgpu\.?$", re.IGNORECASE)
# Every status line above holds one of these words (case-folded): a substring test of each line of a long listing
# before the patterns, which are far slower per character on a long line.
_STATUS_WORDS = ("rock module", "/dev/kfd", "hsa error", "call returned", "hsa api call failure", "member of",
                 "failed to get user name")
# hsa.h (ROCR-Runtime): the status codes older rocminfo printed as numbers ("Call returned 4104").
HSA_STATUS_CODES = {
    0x1000: "HSA_STATUS_ERROR", 0x1001: "HSA_STATUS_ERROR_INVALID_ARGUMENT",
    0x1002: "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION", 0x1003: "HSA_STATUS_ERROR_INVALID_ALLOCATION",
    0x1004: "HSA_STATUS_ERROR_INVALID_AGENT", 0x1005: "HSA_STATUS_ERROR_INVALID_REGION",
    0x1006: "HSA_STATUS_ERROR_INVALID_SIGNAL", 0x1007: "HSA_STATUS_ERROR_INVALID_QUEUE",
    0x1008: "HSA_STATUS_ERROR_OUT_OF_RESOURCES", 0x1009: "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT",
    0x100A: "HSA_STATUS_ERROR_RESOURCE_FREE", 0x100B: "HSA_STATUS_ERROR_NOT_INITIALIZED",
    0x100C: "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW",
}
# The keys of rocminfo's "HSA System Attributes" block: seen, the text is rocminfo's (cut before its agents, maybe).
SYSTEM_KEYS = frozenset({"Runtime Version", "Runtime Ext Version", "System Timestamp Freq.", "Sig. Max Wait Duration",
                         "Machine Model", "System Endianness", "Mwaitx", "DMAbuf Support", "VMM Support",
                         "XNACK enabled"})
# Keys rocminfo prints only inside an agent: seen without an "Agent N" line before them, the text is a fragment
# pasted from the middle of an agent (or `rocminfo | grep`), not an error.
AGENT_KEYS = frozenset({
    "Name", "Uuid", "Marketing Name", "Vendor Name", "Feature", "Profile", "Float Round Mode", "Max Queue Number",
    "Queue Min Size", "Queue Max Size", "Queue Type", "Node", "Device Type", "Chip ID", "ASIC Revision",
    "Cacheline Size", "Max Clock Freq. (MHz)", "BDFID", "Internal Node ID", "Compute Unit", "SIMDs per CU",
    "Shader Engines", "Shader Arrs. per Eng.", "Features", "Fast F16 Operation", "Wavefront Size",
    "Workgroup Max Size", "Max Waves Per CU", "Max Work-item Per CU", "Grid Max Size", "Max fbarriers/Workgrp",
    "Packet Processor uCode:", "SDMA engine uCode:", "IOMMU Support:", "Segment", "Size", "Allocatable",
    "Alloc Granule", "Alloc Alignment", "Accessible by all", "Memory Properties", "Coherent Host Access",
})
_GROUP_NOTE = re.compile(r"(is (?:not )?member of .*group|Failed to get user name)", re.IGNORECASE)
_AGENT = re.compile(r"^\s*Agent\s+(\d+)\s*$")
_POOL = re.compile(r"^\s*Pool\s+(\d+)\s*$")
_ISA = re.compile(r"^\s*ISA\s+(\d+)\s*$")
_SIZE = re.compile(r"^\s*(\d+)\s*(?:\(0x[0-9a-fA-F]+\))?\s*([KMG]?B)?", re.IGNORECASE)


def parse_rocminfo(text: str) -> RocminfoReport:
    """Parse `rocminfo` (or `rocminfo --support`) output, stdout and stderr together. Never raises."""
    report = RocminfoReport()
    agent: RocmAgent | None = None
    # system | agent | cache | pool | isa. "... per Dimension:" sub-blocks need no state: their x/y/z
    # lines have no colon, so they are skipped wherever they appear.
    block = "system"
    pool: dict[str, str] = {}
    pools: list[dict[str, str]] = []
    saw_agents_header = False
    last_error = False  # the line before was an "HSA Error: Incompatible ..." (its wrapped tail may follow)

    def finish_agent() -> None:
        if agent is not None:
            if pool:
                pools.append(dict(pool))
            agent.memory_bytes = _coarse_grained_bytes(pools)
            report.agents.append(agent)

    for line in clean_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if last_error and _UPGRADE_AMDGPU.match(stripped):
            report.error = f"{report.error} {stripped}" if report.error and "upgrade" not in report.error.lower() \
                else report.error
            last_error = False
            continue
        lowered = folded(stripped)
        status_words = any(word in lowered for word in _STATUS_WORDS)
        last_error = status_words and bool(_INCOMPATIBLE.search(stripped))
        if status_words and _note_status_line(report, stripped):
            continue
        if stripped.startswith("*** Done ***"):
            report.complete = True
            continue
        if stripped == "HSA Agents":
            saw_agents_header = True
            continue
        m = _AGENT.match(line)
        if m:
            finish_agent()
            agent = RocmAgent(index=to_int(m.group(1)) or 0, name="")
            block, pool, pools = "agent", {}, []
            continue
        if agent is None:  # the "HSA System Attributes" block, or a fragment of an agent pasted alone
            kv = split_key_value(stripped)
            if kv and not stripped.startswith(("=", "*")):
                if kv[0] in AGENT_KEYS and not saw_agents_header and kv[0] not in report.system_attributes:
                    report.fragment = True
                    agent = RocmAgent(index=0, name="")
                    block = "pool" if kv[0] in ("Segment", "Size", "Allocatable") else "agent"
                else:
                    _system_attribute(report, *kv)
                    continue
            else:
                continue

        # Inside an agent: block headers first.
        if stripped == "Cache Info:":
            block = "cache"
            continue
        if stripped == "Pool Info:":
            block = "pool"
            continue
        if stripped == "ISA Info:":
            if pool:
                pools.append(pool)
                pool = {}
            block = "isa"
            continue
        if block == "pool" and _POOL.match(line):
            if pool:
                pools.append(pool)
            pool = {}
            continue
        if block == "isa" and _ISA.match(line):
            continue
        kv = split_key_value(stripped)
        if kv is None:
            continue
        key, value = kv
        if report.fragment and key == "Name" and value.startswith("amdgcn-"):
            agent.isas.append(value)  # `rocminfo | grep Name`: an ISA's name under its agent's
            continue
        if report.fragment and key == "Name" and agent.name and block == "agent":
            finish_agent()  # the next agent of a grep listing
            agent = RocmAgent(index=len(report.agents), name="")
            pool, pools = {}, []
        if block == "pool":
            pool[key] = value
        elif block == "isa":
            if key == "Name" and value:
                agent.isas.append(value)
        elif block == "cache" and re.fullmatch(r"L\d", key):
            continue
        else:
            block = "agent"  # a top-level agent key ends the Cache Info block
            _agent_field(agent, key, value)
    finish_agent()
    if report.fragment:
        for a in report.agents:  # the type line may not be in the fragment: a GPU agent is named gfx..., and only a
            if not a.device_type and (a.name.lower().startswith("gfx") or a.kernel_dispatch):  # GPU dispatches kernels
                a.device_type = "GPU"

    if report.agents and report.error_kind == "driver_not_loaded":
        # rocminfo decides "NOT loaded" with kmod tools, which containers often lack
        # (https://github.com/ROCm/tensorflow-upstream/pull/1364); agents listed after the line prove the
        # driver works (https://github.com/ROCm/ROCT-Thunk-Interface/issues/44).
        report.error = report.error_kind = None
    if not report.agents and report.error is None:
        _unrecognised(report, text, saw_agents_header or bool(SYSTEM_KEYS & set(report.system_attributes)))
    return report


def _note_status_line(report: RocminfoReport, line: str) -> bool:
    """The lines rocminfo prints before (or instead of) the agent list. True when `line` was one."""
    m = _MODULE_LOADED.search(line)
    if m:
        report.kfd_module_loaded = True
        report.kfd_module_version = m.group(1)
        return True
    if _MODULE_NOT_LOADED.search(line):
        report.kfd_module_loaded = False
        report.error_lines.append(line)
        _set_error(report, line, "driver_not_loaded", priority=1)
        return True
    m = _KFD_OPEN.search(line)
    if m:
        kind = _KFD_REASONS.get(m.group(1).strip().rstrip(".").lower(), "other")
        report.error_lines.append(line)
        _set_error(report, line, kind, priority=3)
        return True
    m = _INCOMPATIBLE.search(line)
    if m:
        report.error_lines.append(line)
        _set_error(report, f"HSA Error: {m.group(1).strip()}", "incompatible_kernel_userspace", priority=4)
        return True
    m = _HSA_STATUS.search(line)
    if m:
        report.error_lines.append(line)
        code = to_int(m.group(1))
        report.hsa_status = m.group(1) if code is None else HSA_STATUS_CODES.get(code, f"HSA status {code:#x}")
        # "Call returned ..." says more than the "hsa api call failure at: file:line" before it.
        _set_error(report, line, "hsa_error", priority=2, replace_same=True)
        return True
    if _HSA_FAILURE.search(line):
        report.error_lines.append(line)
        _set_error(report, line, "hsa_error", priority=2)
        return True
    if _GROUP_NOTE.search(line):
        report.group_note = line
        return True
    return False


# A /dev/kfd open error explains an HSA failure, which explains "ROCk module is NOT loaded": keep the most specific.
# "Incompatible kernel and userspace" names the cause itself and outranks them all.
_PRIORITY = {"driver_not_loaded": 1, "hsa_error": 2, "incompatible_kernel_userspace": 4}  # kfd_* kinds rank 3


def _set_error(report: RocminfoReport, line: str, kind: str, priority: int, replace_same: bool = False) -> None:
    current = _PRIORITY.get(report.error_kind or "", 3) if report.error else 0
    if priority > current or (replace_same and priority == current and report.error_kind == kind):
        report.error, report.error_kind = line, kind


def _system_attribute(report: RocminfoReport, key: str, value: str) -> None:
    report.system_attributes[key] = value
    if key == "Runtime Version":
        report.runtime_version = value or None
    elif key == "Runtime Ext Version":
        report.runtime_ext_version = value or None


def _agent_field(agent: RocmAgent, key: str, value: str) -> None:
    if key == "Name":
        agent.name = value
    elif key == "Marketing Name":
        agent.marketing_name = value
    elif key == "Vendor Name":
        agent.vendor = value
    elif key == "Device Type":
        agent.device_type = value
    elif key == "Uuid":
        agent.uuid = value
    elif key == "Node":
        agent.node = leading_int(value)
    elif key == "Chip ID":
        agent.chip_id = leading_int(value)
    elif key == "Compute Unit":
        agent.compute_units = leading_int(value)
    elif key == "Wavefront Size":
        agent.wavefront_size = leading_int(value)
    elif key == "BDFID":
        agent.bdfid = leading_int(value)
    elif key == "Features":
        agent.kernel_dispatch = "KERNEL_DISPATCH" in value.upper()
    elif key == "Memory Properties":
        agent.is_apu = "APU" in value.upper().split()


def _coarse_grained_bytes(pools: list[dict[str, str]]) -> int | None:
    """Size of the first GLOBAL pool whose only flag is COARSE GRAINED (not "KERNARG, COARSE GRAINED")."""
    for pool in pools:
        segment = pool.get("Segment", "")
        if not segment.upper().startswith("GLOBAL"):
            continue
        _, _, flags = segment.partition("FLAGS:")
        if [f.strip().upper() for f in flags.split(",")] != ["COARSE GRAINED"]:
            continue
        m = _SIZE.match(pool.get("Size", ""))
        size = to_int(m.group(1)) if m else None
        if size is not None:
            return size * UNIT_BYTES[(m.group(2) or "KB").upper()]
    return None


def _unrecognised(report: RocminfoReport, text: str, saw_rocminfo: bool) -> None:
    """No agents and no known failure text: say so, quoting the first line, unless the output was empty or is
    rocminfo's own (its system attributes, cut before the agents, or an agent list with no agent in it)."""
    if saw_rocminfo:
        return  # a real rocminfo that listed no agents (or was cut before them): nothing to quote
    first = next((printable(l) for l in clean_lines(text) if printable(l)), "")
    if first and report.kfd_module_loaded is None:
        report.error, report.error_kind = first, "other"
