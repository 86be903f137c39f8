"""Version claims from the numbers a paste shows: the NVIDIA driver a CUDA release needs (rocmcheck/knowledge/
cuda_drivers.json, from NVIDIA's release notes), compared with the driver the paste shows. A number the paste does
not show is never assumed: the claim then says "if" and names what to paste."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable

from packaging.version import InvalidVersion, Version

from rocmcheck.package_data import read_json

CUDA_DRIVERS_FILE = "cuda_drivers.json"
_DRIVER = re.compile(r"(?:Driver Version|Nvidia driver version):\s*(\d{3}\.\d+(?:\.\d+)?)", re.IGNORECASE)
_TORCH_CUDA = re.compile(r"\+cu(\d{2,3})\b|CUDA used to build PyTorch: (\d+\.\d+)")


@lru_cache(maxsize=1)
def cuda_drivers() -> dict[str, Any]:
    return read_json("rocmcheck.knowledge", CUDA_DRIVERS_FILE)


def driver_floor(cuda: str) -> str | None:
    """The oldest Linux driver of this CUDA release ("12.4" -> "550.54.14"), None for a release the table lacks."""
    mm = ".".join(cuda.split(".")[:2])
    for row in cuda_drivers()["rows"]:
        if row["cuda"] == mm:
            return str(row["linux"])
    return None


def torch_cuda_of(lines: Iterable[str], probed: str | None = None) -> str | None:
    """The CUDA torch was built for: torch.version.cuda as read, else a +cuXYZ build or collect_env's line."""
    if probed:
        return ".".join(str(probed).split(".")[:2])
    for line in lines:
        m = _TORCH_CUDA.search(line)
        if m:
            if m.group(2):
                return m.group(2)
            digits = m.group(1)
            return f"{digits[:-1]}.{digits[-1]}"
    return None


def driver_of(lines: Iterable[str]) -> str | None:
    for line in lines:
        m = _DRIVER.search(line)
        if m:
            return m.group(1)
    return None


def _older(a: str, b: str) -> bool:
    try:
        return Version(a) < Version(b)
    except InvalidVersion:
        return False


def driver_claim(cuda: str | None, driver: str | None) -> str:
    """What the numbers shown say about the driver and torch's CUDA, in words."""
    floor = driver_floor(cuda) if cuda else None
    major = cuda.split(".")[0] if cuda else None
    compat = cuda_drivers()["minor_compat_floor"].get(major) if major else None
    table = f"CUDA {cuda} needs driver {floor} or newer" if floor else ""
    if compat and floor and compat != floor:
        table += f" (CUDA {major}.x binaries run on {compat} or newer by minor-version compatibility, without PTX JIT)"
    if cuda and floor and driver:
        if _older(driver, compat or floor):
            return f"{table}; the paste shows driver {driver}, older than both: upgrade the NVIDIA driver, or " \
                   "install a torch built for the CUDA this driver supports"
        if _older(driver, floor):
            return f"{table}; the paste shows driver {driver}: upgrade the driver to {floor} or newer if a kernel " \
                   "fails to load (PTX JIT), or install a torch built for an older CUDA"
        return f"{table}; the paste shows driver {driver}, new enough: the driver's age is not the cause"
    if cuda and floor:
        return f"if the driver is older than the floor: {table}; paste nvidia-smi's first lines to compare"
    if driver:
        return f"the paste shows driver {driver} but not torch's CUDA: paste python -c 'import torch; " \
               "print(torch.version.cuda)' to compare it with the floor of that CUDA release"
    return "if the driver is older than torch's CUDA needs: paste nvidia-smi's first lines and torch.version.cuda " \
           "to compare them with NVIDIA's table of driver floors"
