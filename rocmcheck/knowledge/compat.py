"""What works with what, per ROCm release, from rocm_releases.json (AMD's compatibility matrices, each row with its
source URL and the date it was read; scripts/make_knowledge.py regenerates the table)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.version import Version

from rocmcheck import versions
from rocmcheck.package_data import read_json

TABLE = "rocm_releases.json"


@dataclass(frozen=True)
class ReleaseRow:
    release: str  # the table's release the installed one is judged by ("6.4.3")
    os: dict[str, list[str]]
    gpu_targets: tuple[str, ...]
    pytorch: tuple[str, ...]
    source: str
    read: str
    note: str = ""  # why this row stands in for the installed release, when it is not the same release
    drivers: tuple[str, ...] = field(default_factory=tuple)  # driver series whose window includes this userspace
    # Up to ROCm 6.3 the matrix lists the user spaces each release's driver was tested with, so drivers newer than
    # the newest such release are not in `drivers` although they may support this user space.
    drivers_known_up_to: str | None = None


@lru_cache(maxsize=None)
def _table() -> dict[str, Any]:
    return read_json("rocmcheck.knowledge", TABLE)


def _row(key: str, note: str = "") -> ReleaseRow:
    row = _table()["releases"][key]
    return ReleaseRow(release=key, os=row["os"], gpu_targets=tuple(row["gpu_targets"]),
                      pytorch=tuple(row.get("pytorch") or ()), source=row["source"], read=row["read"], note=note,
                      drivers=tuple(driver_window(key)),
                      drivers_known_up_to=None if row.get("supported_drivers") else _newest_tested_driver())


def _newest_tested_driver() -> str:
    return next(k for k, row in _table()["releases"].items() if row.get("driver_tested_userspace"))


def newest_release() -> str:
    return next(iter(_table()["releases"]))


def release_row(rocm: str | None) -> ReleaseRow | None:
    """The row an installed ROCm is judged by: the newest listed release of its series at or below it (the series'
    oldest listed one when the install is older than all of them); when its series is not listed, the newest release
    for an install newer than the table, and None for one older than the table or unreadable."""
    wanted = versions.parse(rocm)
    wanted_series = versions.series(rocm)
    if wanted is None or wanted_series is None:
        return None
    keys = list(_table()["releases"])  # newest first
    same = [k for k in keys if versions.series(k) == wanted_series]
    if same:
        at_or_below = [k for k in same if Version(k) <= wanted]
        key = at_or_below[0] if at_or_below else same[-1]
        note = "" if versions.parse(key) == wanted else f"ROCm {rocm.strip()} is judged by the table's ROCm {key}"
        return _row(key, note)
    if wanted > Version(keys[0]):
        return _row(keys[0], f"ROCm {rocm.strip()} is newer than the table's newest release ({keys[0]}): "
                             f"judged by {keys[0]}'s lists")
    return None


def _driver_series(entry: str) -> str | None:
    """"6.4.x" -> "6.4"; "30.20.0" -> "30.20"; "30.10" -> "30.10"."""
    return versions.series(entry.replace(".x", ".0"))


def driver_window(release: str) -> list[str]:
    """The AMD driver series (6.4, 30.10, ...) AMD lists as supporting this release's user space.

    From ROCm 6.4 the matrix lists, per release, the drivers its user space supports. Up to 6.3 it lists, per
    release, the user spaces tested with that release's driver: the window of a user space is then every release whose
    driver lists it, plus the drivers a newer-format row lists for it."""
    table = _table()["releases"]
    own = table.get(release, {})
    wanted = versions.series(release)
    out: list[str] = []
    for entry in own.get("supported_drivers") or []:
        s = _driver_series(entry)
        if s and s not in out:
            out.append(s)
    for key, row in table.items():
        tested = [versions.series(u.replace(".x", ".0")) for u in row.get("driver_tested_userspace") or []]
        s = versions.series(key)
        if wanted in tested and s not in out:
            out.append(s)
    return out


@dataclass(frozen=True)
class DriverRelease:
    module_version: str
    driver_release: str  # "6.4", "30.20"
    rocm_release: str
    source: str


def driver_of_module(module_version: str | None) -> DriverRelease | None:
    """The AMD driver release whose amdgpu module version (/sys/module/amdgpu/version) this is; None when the table
    does not list it (an in-tree kernel driver, or a release the table has no row for)."""
    v = versions.parse(module_version)
    if v is None:
        return None
    for row in _table()["amdgpu_modules"]:
        if versions.parse(row["module_version"]) == Version(".".join(str(n) for n in v.release[:3])):
            return DriverRelease(row["module_version"], row["driver_release"], row["rocm_release"], row["source"])
    return None


@dataclass(frozen=True)
class KernelList:
    kernels: dict[str, list[str]]  # "ubuntu 22.04" -> ["5.15", "6.8"]
    series: tuple[str, ...]
    source: str


def kernel_list(rocm: str | None) -> KernelList | None:
    """The kernel table AMD published for this ROCm series; None when the table has none for it."""
    wanted = versions.series(rocm)
    for entry in _table()["kernels"]:
        if wanted in entry["series"]:
            return KernelList(entry["kernels"], tuple(entry["series"]), entry["source"])
    return None


def kernels_for(table: KernelList, dist: str, os_version: str) -> list[str] | None:
    """The kernel series listed for this OS version ("ubuntu", "22.04"); None when the OS version is not listed."""
    for key, kernels in table.kernels.items():
        name, _, listed = key.partition(" ")
        if name == dist and versions.within(os_version, listed):
            return kernels
    return None


def first_release_with_target(target: str) -> str | None:
    """The oldest release in the table whose GPU targets list this arch ("gfx950" -> "7.0.0")."""
    listed = [k for k, row in _table()["releases"].items() if target in row["gpu_targets"]]
    return listed[-1] if listed else None
