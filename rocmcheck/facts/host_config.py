"""Host configuration files the GPU stack depends on, read as text (bounded): the modprobe configuration that
mentions amdgpu, the package-repository files that name ROCm or AMD's GPU driver, amdgpu's module parameters, and
the PCIe Access Control Services (ACS) control register of every bridge above an AMD GPU.

Only files that mention what the checks look for are kept, so a bundle stays small and holds no unrelated
configuration. Everything here is read-only; the root is a parameter so tests plant a tree.
"""

from __future__ import annotations

import glob
import os
import re
import struct
from typing import Any

from rocmcheck.safe.files import read_head, read_head_bytes

MAX_FILES = 64  # per folder: more configuration files than this is not a real machine's /etc
MAX_FILE_CHARS = 65_536
# Where modprobe reads its configuration (modprobe.d(5)): the administrator's folder, then the packages' folders.
MODPROBE_DIRS = ("etc/modprobe.d", "usr/lib/modprobe.d", "lib/modprobe.d", "run/modprobe.d")
# apt (sources.list(5): one-line *.list and deb822 *.sources), dnf/yum (*.repo), zypper (*.repo).
REPO_GLOBS = ("etc/apt/sources.list", "etc/apt/sources.list.d/*.list", "etc/apt/sources.list.d/*.sources",
              "etc/yum.repos.d/*.repo", "etc/zypp/repos.d/*.repo")
# Words that make a repository file ROCm's: AMD's repository host, and the package names of its paths.
REPO_WORDS = re.compile(r"repo\.radeon\.com|/rocm/|/amdgpu/|\brocm\b|\bamdgpu\b", re.IGNORECASE)
# amdgpu's module parameters the checks read (drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c).
AMDGPU_PARAMS = ("bad_page_threshold", "ras_enable")


def _files(root: str, patterns: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        out += sorted(glob.glob(os.path.join(root, pattern)))[:MAX_FILES]
    return out


def _keep(root: str, patterns: tuple[str, ...], words: re.Pattern[str]) -> dict[str, str]:
    """{path as on the machine: text} of the files whose text mentions `words`."""
    kept: dict[str, str] = {}
    for path in _files(root, patterns):
        text = read_head(path, MAX_FILE_CHARS)
        if text and words.search(text):
            kept["/" + os.path.relpath(path, root)] = text
    return kept


# PCIe extended capabilities start at 0x100 of the 4 KiB configuration space; each header is u32: id (low 16 bits),
# version (4), next offset (high 12). ACS is id 0x000D; its control register is the u16 at +6 (PCIe base spec
# 7.7.8; setpci names it ECAP_ACS+6.w). sysfs gives the extended space to root only (a user reads 64 or 256 bytes).
PCI_EXT_CAP_START = 0x100
PCI_CONFIG_SIZE = 4096
PCI_EXT_CAP_ACS = 0x000D
ACS_CONTROL_OFFSET = 6
MAX_EXT_CAPS = 64
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
GPU_VENDOR = "0x1002"
GPU_CLASSES = ("0x0300", "0x0302", "0x0380")


def acs_control(config: bytes) -> int | None:
    """The ACS control register from a device's configuration space, None when the extended space was not
    readable (a short read) or has no ACS capability. Pure; never raises."""
    if len(config) < PCI_CONFIG_SIZE:
        return None
    offset = PCI_EXT_CAP_START
    for _ in range(MAX_EXT_CAPS):
        if offset < PCI_EXT_CAP_START or offset + 8 > len(config):
            return None
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == PCI_EXT_CAP_ACS:
            return struct.unpack_from("<H", config, offset + ACS_CONTROL_OFFSET)[0]
        offset = (header >> 20) & 0xFFC
        if offset == 0:
            return None
    return None


def gpu_bridges_acs(sysfs: str) -> dict[str, Any]:
    """{"bridges": {bridge BDF: ACS control or None}, "gpus": {GPU BDF: [its bridges, nearest first]},
    "readable": whether any extended configuration space could be read}."""
    bridges: dict[str, int | None] = {}
    gpus: dict[str, list[str]] = {}
    readable = False
    for dev in sorted(glob.glob(os.path.join(sysfs, "bus/pci/devices/*")))[:1024]:
        vendor = (read_head(os.path.join(dev, "vendor"), 64) or "").strip()
        klass = (read_head(os.path.join(dev, "class"), 64) or "").strip()
        if vendor != GPU_VENDOR or not klass.startswith(GPU_CLASSES):
            continue
        chain = []
        parent = os.path.dirname(os.path.realpath(dev))
        while _BDF.match(os.path.basename(parent)) and len(chain) < 16:
            bdf = os.path.basename(parent)
            chain.append(bdf)
            if bdf not in bridges:
                config = read_head_bytes(os.path.join(parent, "config"), PCI_CONFIG_SIZE) or b""
                readable = readable or len(config) >= PCI_CONFIG_SIZE
                bridges[bdf] = acs_control(config)
            parent = os.path.dirname(parent)
        gpus[os.path.basename(dev)] = chain
    return {"bridges": bridges, "gpus": gpus, "readable": readable}


def host_config(root: str = "/", sysfs: str = "/sys") -> dict[str, Any]:
    """The modprobe files that mention amdgpu, the ROCm repository files, amdgpu's parameters, and the ACS control
    of the bridges above the AMD GPUs."""
    params = {name: read_head(os.path.join(sysfs, "module/amdgpu/parameters", name), 256) for name in AMDGPU_PARAMS}
    return {
        "pcie_acs": gpu_bridges_acs(sysfs),
        "modprobe_amdgpu": _keep(root, tuple(f"{d}/*.conf" for d in MODPROBE_DIRS), re.compile(r"amdgpu")),
        "rocm_repos": _keep(root, REPO_GLOBS, REPO_WORDS),
        "amdgpu_params": {k: v.strip() for k, v in params.items() if v is not None},
    }
