"""Version strings: /opt/rocm/.info/version, the ROCm / CUDA suffix of a torch version, and TheRock's per-arch torch
device wheels."""

from __future__ import annotations

import re
from typing import Mapping

from packaging.version import Version

from rocmcheck.facts.parsers._text import clean_lines

_RELEASE = re.compile(r"^(\d+(?:\.\d+){0,3})")


def parse_rocm_version_file(text: str) -> str | None:
    """The ROCm release in /opt/rocm/.info/version: "6.2.3" from "6.2.3-119", "7.14.0" from "7.14.0".

    The "-119" build number is dropped: checks compare releases. None when the file holds no version.
    """
    for line in clean_lines(text):
        m = _RELEASE.match(line.strip())
        if m and "." in m.group(1):
            return m.group(1)
    return None


def parse_torch_rocm_suffix(torch_version: str | None) -> str | None:
    """The ROCm a torch wheel was built for, from its local version label.

    "2.4.1+rocm6.1" -> "6.1"; "2.10.0+rocm7.13.0a20260416" -> "7.13.0";
    "2.4.0+rocm6.3.4.git7cecbf6d" -> "6.3.4"; "2.5.1+cu124" or "2.5.1" -> None.
    """
    local = _local_label(torch_version)
    m = re.match(r"^rocm(\d+(?:\.\d+)*)", local or "")
    return m.group(1) if m else None


def is_rocm_torch(torch_version: str | None) -> bool:
    """A ROCm build of torch, by its local label: "+rocm6.1", "+rocm7.14.0rc0", and TheRock's Windows builds
    "+rocmsdk20260116" (a build date, not a ROCm version: parse_torch_rocm_suffix gives None for them)."""
    return (_local_label(torch_version) or "").startswith("rocm")


# TheRock's multi-arch torch: the host wheel `torch` and one device wheel per GPU arch, or per arch family (AOTriton's
# "gfx11", "gfx12-0"), each with torch's own version: "amd-torch-device-gfx942==2.12.0+rocm7.14.0"
# (https://github.com/ROCm/pytorch/issues/3518, https://github.com/ROCm/TheRock/issues/6223).
TORCH_DEVICE_WHEEL = re.compile(r"^amd[-_.]torch[-_.]device[-_.](gfx[0-9a-z]+(?:[-_.][0-9a-z]+)?)$", re.IGNORECASE)


def torch_device_wheels(packages: Mapping[str, str]) -> dict[str, str]:
    """{"gfx942": "2.12.0+rocm7.14.0", "gfx12-0": ...}: the torch device wheels in a package listing (name -> version),
    keyed by the arch or family each carries kernels for; {} when there are none."""
    out: dict[str, str] = {}
    for name, version in packages.items():
        m = TORCH_DEVICE_WHEEL.match(name.strip())
        if m and version:
            out[re.sub(r"[-_.]+", "-", m.group(1).lower())] = version
    return out


def torch_version_of(packages: Mapping[str, str]) -> str | None:
    """torch's version in a package listing: its own line, else the one version its device wheels all carry (a
    device wheel requires the torch of its own version); None when neither is shown or the device wheels differ. A
    version that is the start of another ("2.12.0+rocm7." beside "2.12.0+rocm7.14.0") is a line cut short, not a
    second version."""
    if packages.get("torch"):
        return packages["torch"]
    versions = set(torch_device_wheels(packages).values())
    whole = {v for v in versions if not any(o != v and o.startswith(v) for o in versions)}
    return whole.pop() if len(whole) == 1 else None


def _local_label(torch_version: str | None) -> str | None:
    """The part after "+", lower-cased; packaging normalises it when the version is PEP 440."""
    if not torch_version or "+" not in torch_version:
        return None
    try:
        return Version(torch_version.strip()).local
    except ValueError:  # InvalidVersion, or more digits than int() takes
        return torch_version.strip().split("+", 1)[1].lower()
