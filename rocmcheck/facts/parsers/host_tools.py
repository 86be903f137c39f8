"""Host tool outputs and configuration files -> plain records: `mokutil --sb-state`, `dkms status`,
`amd-smi process`, `nvidia-smi --query-compute-apps`, modprobe.d lines that keep amdgpu out, and the ROCm versions
package-repository files point at. Pure; never raise.

Written from real outputs: `mokutil --sb-state` prints "SecureBoot enabled" / "SecureBoot disabled" / "EFI
variables are not supported on this system" (https://github.com/ollama/ollama/issues/2453); `dkms status` prints
"amdgpu/6.2.4-1664922.22.04, 6.8.0-45-generic, x86_64: installed" (dkms 3; dkms 2 separates the version with a
comma: "amdgpu, 5.13.20.22.10-1420322, 5.4.0-113-generic, x86_64: installed",
https://github.com/ROCm/ROCm/issues/1748); `amd-smi process` prints a "GPU: N" block with "PID:", "NAME:" and
"VRAM_MEM:" per process (https://github.com/ROCm/amdsmi/issues/130, amd-smi 25.3.0, ROCm 6.4.0); `amd-smi xgmi
--link-status` prints "GPU0   0000:08:00.0  U  U  U  U  D  U  D  X" per GPU, U up, D down, X disabled, N/A where
the driver does not expose it (an SR-IOV guest) (AMD SMI CHANGELOG, 25.3.0 and the mVF fix); `amd-smi ras --cper`
prints each CPER record's header ("Dumping CPER file header entries for GPU 0:" then `"error_severity":
"non_fatal_corrected"`, AMD SMI CHANGELOG), or with --folder a table "timestamp gpu_id severity file_name list of
afids" (AMD SMI's CLI documentation); `amd-smi firmware` prints a "GPU: N" block with "FW_ID:" and "FW_VERSION:"
per firmware, the PLDM bundle as FW_ID PLDM_BUNDLE (amd-smi 26.2.0, ROCm 7.1.1, MI300X VF:
https://github.com/ROCm/ROCm/issues/5231; an MI355X node: oracle-quickstart/oci-gpu-quickstarts
amd/MI355X/README-MI355X-Pollara.md).
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass

from rocmcheck.facts.parsers._text import clean_lines


def parse_sb_state(text: str) -> bool | None:
    """True when Secure Boot is enabled, False when disabled, None when mokutil could not say (no EFI)."""
    m = re.search(r"SecureBoot\s+(enabled|disabled)", text or "", re.IGNORECASE)
    return None if m is None else m.group(1).lower() == "enabled"


@dataclass(frozen=True)
class DkmsModule:
    name: str
    version: str
    kernel: str | None
    state: str  # "installed" | "built" | "added" | ...


_DKMS3 = re.compile(r"^([\w.+-]+)/([^,\s]+)(?:,\s*([^,\s]+))?(?:,\s*[^:,\s]+)?:\s*(\w+)")
_DKMS2 = re.compile(r"^([\w.+-]+),\s*([^,\s]+)(?:,\s*([^,\s]+))?(?:,\s*[^:,\s]+)?:\s*(\w+)")


def parse_dkms_status(text: str) -> list[DkmsModule]:
    out: list[DkmsModule] = []
    for line in clean_lines(text or ""):
        m = _DKMS3.match(line.strip()) or _DKMS2.match(line.strip())
        if m:
            out.append(DkmsModule(m.group(1), m.group(2), m.group(3), m.group(4).lower()))
    return out


@dataclass(frozen=True)
class GpuProcess:
    gpu: int | None
    pid: int
    name: str | None
    vram_text: str | None = None  # as the tool printed it ("1.9 GB", "1024")


def parse_amd_smi_process(text: str) -> list[GpuProcess]:
    """`amd-smi process` (text): each "GPU: N" block's PROCESS_INFO entries. "No running processes detected"
    lists none."""
    out: list[GpuProcess] = []
    gpu: int | None = None
    pid: int | None = None
    name: str | None = None
    vram: str | None = None

    def flush() -> None:
        if pid is not None:
            out.append(GpuProcess(gpu, pid, name, vram))

    for line in clean_lines(text or ""):
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip().upper(), value.strip()
        if key == "GPU" and value.isdigit():
            flush()
            gpu, pid, name, vram = int(value), None, None, None
        elif key == "PID" and value.isdigit():
            flush()
            pid, name, vram = int(value), None, None
        elif key == "NAME" and pid is not None:
            name = None if value in ("", "N/A") else value
        elif key == "VRAM_MEM" and pid is not None:
            vram = value
    flush()
    return out


def parse_nvidia_apps(text: str) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits`."""
    out: list[GpuProcess] = []
    for line in clean_lines(text or ""):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 2 and cells[0].isdigit():
            out.append(GpuProcess(None, int(cells[0]), cells[1] or None,
                                  f"{cells[2]} MiB" if len(cells) > 2 and cells[2].isdigit() else None))
    return out


# modprobe.d(5): `blacklist amdgpu` stops aliases loading it; `install amdgpu /bin/false` (or true) stops it
# loading at all. The kernel command line's module_blacklist= / modprobe.blacklist= do the same at boot.
_BLACKLIST_LINE = re.compile(r"^\s*(blacklist\s+amdgpu|install\s+amdgpu\s+/(?:usr/)?bin/(?:false|true))\b")
_CMDLINE_BLACKLIST = re.compile(r"^(?:module_blacklist|modprobe\.blacklist|rd\.driver\.blacklist)=(.*)$")


def amdgpu_blacklist_lines(files: dict[str, str], cmdline: str | None = None) -> list[str]:
    """"path: line" for every active line that keeps amdgpu from loading; the command line's as "/proc/cmdline: ..."."""
    hits: list[str] = []
    for path, text in sorted((files or {}).items()):
        for line in (text or "").splitlines():
            if _BLACKLIST_LINE.match(line):
                hits.append(f"{path}: {line.strip()}")
    for token in (cmdline or "").split():
        m = _CMDLINE_BLACKLIST.match(token)
        if m and "amdgpu" in m.group(1).split(","):
            hits.append(f"/proc/cmdline: {token}")
    return hits


# AMD's repository paths: repo.radeon.com/rocm/apt/6.2.3, /rocm/rhel9/6.2/main, /rocm/zyp/6.1, /amdgpu/6.2/ubuntu,
# and the moving "latest".
_ROCM_URL = re.compile(r"repo\.radeon\.com/(rocm|amdgpu)/(?:[a-z]+\d*(?:\.\d+)?/)?(\d+\.\d+(?:\.\d+)?|latest)\b",
                       re.IGNORECASE)


def _active_text(path: str, text: str) -> str:
    """The lines of a repository file that are in effect: comments dropped, disabled sections left out."""
    if path.endswith(".repo"):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            return ""
        return "\n".join(sec.get("baseurl", "") + "\n" + sec.get("mirrorlist", "")
                         for name in parser.sections() if (sec := parser[name]).get("enabled", "1").strip() != "0")
    if path.endswith(".sources"):  # deb822 stanzas, separated by blank lines; "Enabled: no" turns one off
        stanzas = re.split(r"\n\s*\n", text)
        return "\n".join(s for s in stanzas if not re.search(r"^Enabled:\s*no\b", s, re.IGNORECASE | re.MULTILINE))
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def repo_versions(files: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """{path: [(kind, version)]} for each repository file that points at AMD's ROCm or amdgpu repository; kind is
    "rocm" or "amdgpu", version "6.2.3" or "latest"."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path, text in sorted((files or {}).items()):
        found = [(m.group(1).lower(), m.group(2).lower()) for m in _ROCM_URL.finditer(_active_text(path, text or ""))]
        if found:
            out[path] = list(dict.fromkeys(found))
    return out


_XGMI_ROW = re.compile(r"^GPU(\d+)\s+([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")


def parse_xgmi_link_status(text: str) -> dict[str, list[str]]:
    """`amd-smi xgmi --link-status` -> {"GPU0 0000:08:00.0": ["U", "U", "D", "X", ...]}; a link shown N/A is kept
    as "N/A"."""
    out: dict[str, list[str]] = {}
    for line in clean_lines(text or ""):
        m = _XGMI_ROW.match(line.strip())
        if m:
            out[f"GPU{m.group(1)} {m.group(2)}"] = m.group(3).split()
    return out


@dataclass(frozen=True)
class CperRecord:
    gpu: int | None
    severity: str  # "fatal" | "non_fatal_uncorrected" | "non_fatal_corrected" | as printed, lower case
    timestamp: str | None = None
    afids: tuple[str, ...] = ()


_CPER_GPU = re.compile(r"CPER file header entries for GPU (\d+)", re.IGNORECASE)
_CPER_FIELD = re.compile(r'^"(error_severity|timestamp)"\s*:\s*"([^"]*)"')
_CPER_ROW = re.compile(r"^(\d{2,4}/\d{2}/\d{2,4} \d{2}:\d{2}:\d{2})\s+(\d+)\s+(\S+)\s+\S+\.cper\s*(.*)$")


def parse_amd_smi_cper(text: str) -> list[CperRecord]:
    """`amd-smi ras --cper`: its header dump or its table, one record per entry."""
    out: list[CperRecord] = []
    gpu: int | None = None
    severity: str | None = None
    stamp: str | None = None
    for line in clean_lines(text or ""):
        stripped = line.strip()
        if m := _CPER_GPU.search(stripped):
            gpu = int(m.group(1))
        elif m := _CPER_ROW.match(stripped):
            out.append(CperRecord(int(m.group(2)), m.group(3).lower(), m.group(1), tuple(m.group(4).split())))
        elif m := _CPER_FIELD.match(stripped):
            if m.group(1) == "error_severity":
                severity = m.group(2).lower()
            else:
                stamp = m.group(2)
        elif stripped.startswith("}") and severity is not None:
            out.append(CperRecord(gpu, severity, stamp))
            severity, stamp = None, None
    return out


_FW_GPU = re.compile(r"^GPU:\s*(\d{1,4})\s*$")
_FW_FIELD = re.compile(r"^(FW_ID|FW_VERSION):\s*(\S.*?)\s*$")


def parse_amd_smi_firmware(text: str) -> dict[int, dict[str, str]]:
    """`amd-smi firmware` -> {gpu index: {FW_ID: FW_VERSION}} ({0: {"PLDM_BUNDLE": "01.25.03.12", ...}}); a version
    shown N/A is left out. An ID without a GPU line before it is GPU 0's."""
    out: dict[int, dict[str, str]] = {}
    gpu = 0
    fw_id: str | None = None
    for line in clean_lines(text or ""):
        stripped = line.strip()
        if m := _FW_GPU.match(stripped):
            gpu, fw_id = int(m.group(1)), None
        elif m := _FW_FIELD.match(stripped):
            if m.group(1) == "FW_ID":
                fw_id = m.group(2).upper()
            elif fw_id is not None:
                if m.group(2).upper() != "N/A":
                    out.setdefault(gpu, {})[fw_id] = m.group(2)
                fw_id = None
    return out
