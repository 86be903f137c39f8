"""Host configuration files the GPU stack depends on, read as text (bounded): the modprobe configuration that
mentions amdgpu, the package-repository files that name ROCm or AMD's GPU driver, and amdgpu's module parameters.

Only files that mention what the checks look for are kept, so a bundle stays small and holds no unrelated
configuration. Everything here is read-only; the root is a parameter so tests plant a tree.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from rocmcheck.safe.files import read_head

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


def host_config(root: str = "/", sysfs: str = "/sys") -> dict[str, Any]:
    """The modprobe files that mention amdgpu, the ROCm repository files, and amdgpu's parameters."""
    params = {name: read_head(os.path.join(sysfs, "module/amdgpu/parameters", name), 256) for name in AMDGPU_PARAMS}
    return {
        "modprobe_amdgpu": _keep(root, tuple(f"{d}/*.conf" for d in MODPROBE_DIRS), re.compile(r"amdgpu")),
        "rocm_repos": _keep(root, REPO_GLOBS, REPO_WORDS),
        "amdgpu_params": {k: v.strip() for k, v in params.items() if v is not None},
    }
