"""Version claims from the numbers a paste shows: the NVIDIA driver a CUDA release needs (rocmcheck/knowledge/
cuda_drivers.json, from NVIDIA's release notes), compared with the driver the paste shows. A number the paste does
not show is never assumed: the claim then says "if" and names what to paste."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from packaging.version import InvalidVersion, Version

from rocmcheck.package_data import read_json

CUDA_DRIVERS_FILE = "cuda_drivers.json"
# The driver's own version: nvidia-smi's header, collect_env's line (also inside Markdown emphasis), and `dpkg -l` of
# a driver package ("ii  nvidia-driver-535  535.183.01-0ubuntu1 ...").
_DRIVER = re.compile(r"(?:Driver Version|Nvidia driver version)[*_`]*:[*_`]*\s*(\d{3}\.\d+(?:\.\d+)?)|"
                     r"^ii\s+\S*nvidi\S*\s+(\d{3}\.\d+(?:\.\d+)?)-", re.IGNORECASE)
_TORCH_CUDA = re.compile(r"\+cu(\d{2,3})\b|CUDA used to build PyTorch: (\d+\.\d+)")
# The newest CUDA the driver runs, as the driver reports it: torch's "The NVIDIA driver on your system is too old
# (found version 11040)" (cudaDriverGetVersion: 1000 x major + 10 x minor) and nvidia-smi's header "CUDA Version: 12.4".
_DRIVER_CUDA = re.compile(r"too old \(found version (\d{4,5})\)|NVIDIA-SMI.*\bCUDA Version:\s*(\d{1,2}\.\d)")
# The CUDA a container image asks of the driver: nvidia-container-cli's "unsatisfied condition: cuda>=12.8".
_CONTAINER_CUDA = re.compile(r"unsatisfied condition: cuda\s*>=\s*(\d{1,2}(?:\.\d)?)")
MAX_LINE = 4096


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
        m = _DRIVER.search(line[:MAX_LINE].strip())
        if m:
            return m.group(1) or m.group(2)
    return None


@dataclass(frozen=True)
class DriverAndCuda:
    """The two sides of "is the driver new enough", as the paste shows them (None: not shown)."""

    driver: str | None  # the driver's version ("535.104.05")
    driver_reported: str | None  # torch's "found version 11040" as pasted (the driver's newest CUDA, encoded)
    driver_cuda: str | None  # the newest CUDA the driver runs ("11.4"), from that number or nvidia-smi's header
    needed: str | None  # the CUDA the software needs: torch's build, or a container's requirement
    needed_by: str | None = None  # "torch" or "container"

    @property
    def shown(self) -> str | None:
        """The driver as the paste names it: its version, else the number torch reported."""
        return self.driver or self.driver_reported

    @property
    def too_old(self) -> bool | None:
        """Whether the driver is older than the CUDA needed needs; None where the paste does not show both sides."""
        if self.needed is None:
            return None
        if self.driver_cuda is not None:
            if self.needed_by == "container":  # nvidia-container-cli compares the two as they are
                return _older(self.driver_cuda, self.needed)
            # A CUDA runtime of the driver's major release runs on it (minor-version compatibility, CUDA 11.1 and
            # newer; cuda_drivers.json): only an older major release is too old whatever the program does.
            return _older(self.driver_cuda.split(".")[0], self.needed.split(".")[0])
        floor = driver_floor(self.needed)
        major = self.needed.split(".")[0]
        compat = cuda_drivers()["minor_compat_floor"].get(major)
        if self.driver is None or (floor or compat) is None:
            return None
        return _older(self.driver, compat or floor)


def driver_and_cuda(lines: Iterable[str], probed_cuda: str | None = None) -> DriverAndCuda:
    """Both sides of the driver's age, read from the pasted lines (`probed_cuda`: torch.version.cuda as read)."""
    lines = [line[:MAX_LINE] for line in lines]
    reported = driver_cuda = container = None
    for line in lines:
        m = _DRIVER_CUDA.search(line)
        if m and driver_cuda is None:
            if m.group(1):
                reported = m.group(1)
                number = int(reported)
                driver_cuda = f"{number // 1000}.{number % 1000 // 10}"
            else:
                driver_cuda = m.group(2)
        c = _CONTAINER_CUDA.search(line)
        if c and container is None:
            container = c.group(1)
    torch = torch_cuda_of(lines, probed_cuda)
    needed, by = (torch, "torch") if torch else (container, "container") if container else (None, None)
    return DriverAndCuda(driver_of(lines), reported, driver_cuda, needed, by)


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


def driver_claim_of(found: DriverAndCuda) -> str:
    """driver_claim, where the paste may show the newest CUDA the driver runs (torch's report, nvidia-smi's header)
    rather than the driver's version, and the CUDA needed may be a container's requirement."""
    if found.driver_cuda is None or (found.driver is not None and found.needed is not None
                                     and driver_floor(found.needed) is not None):
        return driver_claim(found.needed, found.driver)
    shown = f"driver {found.driver}" if found.driver else "the driver"
    runs = f"{shown} runs CUDA {found.driver_cuda} at most"
    if found.needed is None:
        return (f"the paste shows {runs}: upgrade the NVIDIA driver, or install a build for CUDA "
                f"{found.driver_cuda} or older; paste python -c 'import torch; print(torch.version.cuda)' to name the "
                "driver it needs")
    floor = driver_floor(found.needed)
    upgrade = f"upgrade the NVIDIA driver to {floor} or newer" if floor else "upgrade the NVIDIA driver"
    if found.too_old:
        return (f"the paste shows {runs} and CUDA {found.needed} needed: {upgrade}, or install a build for CUDA "
                f"{found.driver_cuda} or older")
    return f"the paste shows {runs} and CUDA {found.needed} needed: the driver's age is not the cause"

