"""hipconfig output -> HipConfig, for `hipconfig --full` and for the bare `hipconfig --version` line."""

from __future__ import annotations

import re

from rocmcheck.facts.parsers._text import clean_lines, none_if_na
from rocmcheck.facts.parsers.models import HipConfig
from rocmcheck.versions import series

# "HIP version: 6.3.42134-a9a80e791" (--full) or "HIP version  : 5.7.31921-d1770ee1b" (older layouts).
_HIP_VERSION_LINE = re.compile(r"^HIP version\s*:\s*(\S+)", re.IGNORECASE)
# `hipconfig --version` prints only the version, often without a trailing newline.
_BARE_VERSION = re.compile(r"^(\d+\.\d+(?:\.\d+)?(?:[-+.~][0-9A-Za-z.+~-]*)?)$")
# "HIP_PATH           :/opt/rocm-6.3.2" -- no space after the colon in 6.x, one in 5.x.
_SETTING = re.compile(r"^(HIP_PATH|ROCM_PATH|HIP_COMPILER|HIP_PLATFORM|HIP_RUNTIME)\s*:\s*(.*)$")
_FIELD = {"HIP_PATH": "hip_path", "ROCM_PATH": "rocm_path", "HIP_COMPILER": "compiler",
          "HIP_PLATFORM": "platform", "HIP_RUNTIME": "runtime"}


def parse_hipconfig(text: str) -> HipConfig:
    """Never raises; fields it cannot find stay None."""
    config = HipConfig()
    for line in clean_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        m = _HIP_VERSION_LINE.match(stripped)
        if m and config.hip_version is None:
            config.hip_version = m.group(1)
            continue
        m = _SETTING.match(stripped)
        if m:
            attr = _FIELD[m.group(1)]
            if getattr(config, attr) is None:
                setattr(config, attr, none_if_na(m.group(2)))
            continue
        # "AMD clang version 18.0.0git ..." (AMD's LLVM), "Debian clang version 21.1.8 (14)" (a distribution's)
        if config.clang_version is None and re.match(r"^(?:[A-Za-z]+ )?clang version ", stripped):
            config.clang_version = stripped
            continue
        if config.hip_version is None and _BARE_VERSION.match(stripped):
            config.hip_version = stripped
    if config.platform:
        config.platform = config.platform.lower()
    config.hip_version_short = hip_version_short(config.hip_version)
    return config


def hip_version_short(version: str | None) -> str | None:
    """"6.3" from "6.3.42134-a9a80e791": the major.minor that ROCm and torch wheels are named by."""
    return series(version)
