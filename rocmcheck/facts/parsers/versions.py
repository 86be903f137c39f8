"""Version strings: /opt/rocm/.info/version, and the ROCm / CUDA suffix of a torch version."""

from __future__ import annotations

import re

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


def _local_label(torch_version: str | None) -> str | None:
    """The part after "+", lower-cased; packaging normalises it when the version is PEP 440."""
    if not torch_version or "+" not in torch_version:
        return None
    try:
        return Version(torch_version.strip()).local
    except ValueError:  # InvalidVersion, or more digits than int() takes
        return torch_version.strip().split("+", 1)[1].lower()
