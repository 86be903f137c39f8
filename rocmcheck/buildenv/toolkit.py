"""Where the ROCm (or CUDA) toolkit lives, found the way the build tools themselves look for it.

ROCm is found by the rule in rocmcheck.facts.rocm_location, the one doctor follows too: ROCM_PATH,
ROCM_HOME, `hipconfig --rocmpath`, the legacy /opt/rocm (.info/version), TheRock's /opt/rocm/core*,
the newest /opt/rocm-X.Y.Z, then a distribution's ROCm in /usr. Every path is taken relative to `root`
so tests can lay out a fake tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from rocmcheck.facts import rocm_location
from rocmcheck.facts.rocm_location import usable_path
from rocmcheck.facts.tools import find_tool
from rocmcheck.runner import CommandResult, run_command


@dataclass(frozen=True)
class Toolkit:
    path: str  # the root to export (ROCM_PATH / CUDA_HOME)
    found_by: str  # how: "ROCM_PATH", "hipconfig", "/opt/rocm/.info/version", ...
    layout: str = ""  # ROCm: "legacy" | "therock" | "distro"
    version: str | None = None

    def describe(self) -> str:
        bits = [self.layout + " layout" if self.layout else "", f"version {self.version}" if self.version else ""]
        detail = ", ".join(b for b in bits if b)
        return f"{self.path} ({detail + '; ' if detail else ''}found via {self.found_by})"


Runner = Callable[..., CommandResult]


def detect_rocm(env: Mapping[str, str] | None = None, root: str | Path = "/",
                run: Runner = run_command) -> Toolkit | None:
    """The ROCm install a build here would use, or None (rocm_location.find_rocm)."""
    found = rocm_location.find_rocm(env, root, run)
    if found is None:
        return None
    return Toolkit(found.root, found.found_by, found.layout, found.version)


def detect_cuda(env: Mapping[str, str] | None = None, root: str | Path = "/") -> Toolkit | None:
    """CUDA_HOME the way torch.utils.cpp_extension finds it: CUDA_HOME/CUDA_PATH, nvcc on PATH (the one tool
    locator), /usr/local/cuda."""
    env = os.environ if env is None else env
    root = Path(root)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        found = _usable_dir(env.get(var), root)
        if found:
            return Toolkit(found, var)
    nvcc = find_tool("nvcc", env)
    if nvcc:
        # A wrapper script (/usr/local/bin/nvcc exec'ing the real one) would give /usr/local: only a
        # directory with the CUDA headers counts.
        found = _usable_dir(str(Path(os.path.realpath(nvcc)).parent.parent), Path("/"))
        if found and (Path(found) / "include/cuda_runtime.h").is_file():
            return Toolkit(found, "nvcc on PATH")
    if (root / "usr/local/cuda").is_dir():
        return Toolkit("/usr/local/cuda", "/usr/local/cuda")
    return None


def _usable_dir(value: str | None, root: Path) -> str | None:
    """An absolute, printable path that exists as a directory (under the test root), else None."""
    value = usable_path(value)
    if value is None:
        return None
    return value if (root / value.lstrip("/")).is_dir() else None
