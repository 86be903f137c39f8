"""Where the ROCm (or CUDA) toolkit lives, found the way the build tools themselves look for it.

ROCm has two layouts (../shared/knowledge/facts.md section 0): the legacy one (/opt/rocm ->
/opt/rocm-X.Y.Z, version in .info/version) and TheRock (/opt/rocm/core or /opt/rocm/core-10.0, with
/opt/rocm/bin and /opt/rocm/lib only back-compat symlinks). Every path is taken relative to `root`
so tests can lay out a fake tree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from packaging.version import InvalidVersion, Version

from rocmcheck.facts.runner import CommandResult, run_command

HIPCONFIG_TIMEOUT_S = 10.0
# A path we are willing to print into a shell script, dotenv or Dockerfile: no control characters,
# no quotes, nothing a parser of those formats would treat specially beyond what quoting handles.
_PRINTABLE_PATH = re.compile(r"/[^\x00-\x1f\x7f'\"`$\\]*")


@dataclass(frozen=True)
class Toolkit:
    path: str  # the root to export (ROCM_PATH / CUDA_HOME)
    found_by: str  # how: "ROCM_PATH", "hipconfig --rocmpath", "/opt/rocm/.info/version", ...
    layout: str = ""  # ROCm: "legacy" | "therock"
    version: str | None = None

    def describe(self) -> str:
        bits = [self.layout + " layout" if self.layout else "", f"version {self.version}" if self.version else ""]
        detail = ", ".join(b for b in bits if b)
        return f"{self.path} ({detail + '; ' if detail else ''}found via {self.found_by})"


Runner = Callable[..., CommandResult]


def detect_rocm(env: Mapping[str, str] | None = None, root: str | Path = "/", run: Runner = run_command) -> Toolkit | None:
    """The ROCm install a build here would use, or None.

    Order: what the person set (ROCM_PATH, then ROCM_HOME, as torch.utils.cpp_extension reads them),
    then `hipconfig --rocmpath`, then the legacy /opt/rocm, then TheRock's /opt/rocm/core*, then the
    newest /opt/rocm-X.Y.Z.
    """
    env = os.environ if env is None else env
    root = Path(root)
    for var in ("ROCM_PATH", "ROCM_HOME"):
        found = _usable_dir(env.get(var), root)
        if found:
            return _describe_rocm(found, var, root)
    result = run(["hipconfig", "--rocmpath"], timeout=HIPCONFIG_TIMEOUT_S, env=dict(env))
    if result.ok and result.stdout.strip():
        found = _usable_dir(result.stdout.strip().splitlines()[0], root)
        if found:
            return _describe_rocm(found, "hipconfig --rocmpath", root)
    legacy = root / "opt/rocm"
    if (legacy / ".info/version").is_file():
        return _describe_rocm("/opt/rocm", "/opt/rocm/.info/version", root)
    therock = _newest(root / "opt/rocm", "core*")
    if therock is not None:
        return _describe_rocm(f"/opt/rocm/{therock.name}", f"/opt/rocm/{therock.name}", root)
    versioned = _newest(root / "opt", "rocm-*")
    if versioned is not None:
        return _describe_rocm(f"/opt/{versioned.name}", f"/opt/{versioned.name}", root)
    return None


def detect_cuda(env: Mapping[str, str] | None = None, root: str | Path = "/") -> Toolkit | None:
    """CUDA_HOME the way torch.utils.cpp_extension finds it: CUDA_HOME/CUDA_PATH, nvcc on PATH, /usr/local/cuda."""
    import shutil

    env = os.environ if env is None else env
    root = Path(root)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        found = _usable_dir(env.get(var), root)
        if found:
            return Toolkit(found, var)
    nvcc = shutil.which("nvcc", path=env.get("PATH"))
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
    if not value:
        return None
    value = value.rstrip("/") or "/"
    if not _PRINTABLE_PATH.fullmatch(value):
        return None
    return value if (root / value.lstrip("/")).is_dir() else None


def _describe_rocm(path: str, found_by: str, root: Path) -> Toolkit:
    real = root / path.lstrip("/")
    layout = "therock" if re.fullmatch(r"core(-[\d.]+)?", real.name) or (real / "share/therock").is_dir() else "legacy"
    version = _read_version(real / ".info/version")
    if version is None:
        m = re.search(r"(?:rocm|core)-(\d+(?:\.\d+)*)$", path)
        version = m.group(1) if m else None
    return Toolkit(path, found_by, layout, version)


def _read_version(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    # .info/version holds e.g. "6.2.3-116": keep the release, drop the build number.
    m = re.match(r"(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def _newest(parent: Path, pattern: str) -> Path | None:
    """The directory matching pattern with the highest version in its name (core-10.0 over core)."""
    try:
        dirs = [p for p in parent.glob(pattern) if p.is_dir()]
    except OSError:
        return None
    if not dirs:
        return None

    def key(p: Path) -> tuple[int, Version]:
        m = re.search(r"-(\d+(?:\.\d+)*)$", p.name)
        try:
            return (1, Version(m.group(1))) if m else (0, Version("0"))
        except InvalidVersion:
            return (0, Version("0"))

    return max(dirs, key=key)
