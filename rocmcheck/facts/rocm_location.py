"""Where ROCm lives and which release it is: the one rule that doctor and build-env both follow.

Three layouts exist in the wild:

- legacy: AMD's packages and installer put /opt/rocm -> /opt/rocm-X.Y.Z, with the release in
  .info/version ("6.2.3-119").
- therock: TheRock builds put the SDK in /opt/rocm/core or /opt/rocm/core-X.Y; /opt/rocm/bin and
  /opt/rocm/lib are only back-compat links there.
- distro: Debian, Ubuntu's universe, Fedora and Arch package ROCm into /usr. There is no /opt/rocm and
  no .info/version; `hipconfig --full` says ROCM_PATH=/usr; the release is HIP's own (HIP X.Y ships with
  ROCm X.Y), read from /usr/include/hip/hip_version.h, HIP's version file /usr/share/hip/version,
  `hipconfig --version` or the libamdhip64 file name; or rocm-core's rocm_version.h where the
  distribution packages rocm-core.

Observation (`observe_layout`, `observe_root`) reads files under a root directory, so tests can lay out
fake trees, and returns plain JSON-able data (doctor keeps it in its bundle). The choice (`locate_rocm`,
`rocm_installs`) is a pure function of what was observed, so a saved bundle gives the same answer on
another machine. `find_rocm` ties the two together for a live machine (build-env), asking `hipconfig` (found by
the one tool locator, facts/tools.py) when the variables do not settle it. Which paths count as roots at all is
rocm_roots.py's rule.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from packaging.version import Version

from rocmcheck.facts.parsers.versions import parse_rocm_version_file
from rocmcheck.facts.rocm_roots import LEGACY_ROOT, ROOT_VARIABLES, candidate_roots, usable_path
from rocmcheck.facts.tools import find_tool
from rocmcheck.runner import CommandResult, run_command
from rocmcheck.safe.files import read_head
from rocmcheck.versions import series

# Where distributions install ROCm. /usr only: a /usr/local build is made by hand and named by ROCM_PATH.
DISTRO_PREFIXES = ("/usr",)
HIPCONFIG_TIMEOUT_S = 10.0
_READ_LIMIT = 20_000

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+(\d+)\b", re.MULTILINE)
_ASSIGN = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*$", re.MULTILINE)  # share/hip/version: HIP_VERSION_MAJOR=6
_VERSIONED_NAME = re.compile(r"(?:rocm|core)-(\d+(?:\.\d+)*)$")
_HIP_SONAME = re.compile(r"libamdhip64\.so\.(\d+\.\d+\.\d+)$")
_LIB_DIRS = ("lib", "lib64", "lib/*-linux-gnu")


@dataclass(frozen=True)
class RocmLocation:
    """One ROCm install: its root (what ROCM_PATH should be), layout, how it was found, its release."""

    root: str  # "/opt/rocm", "/opt/rocm/core-10.0", "/usr"
    layout: str  # "legacy" | "therock" | "distro"
    found_by: str  # "ROCM_PATH", "hipconfig", "/opt/rocm/.info/version", "ROCm in /usr (distribution packages)"
    version: str | None = None  # the ROCm release: "6.2.3", "10.0.0", "6.4" (from HIP 6.4.43484)
    version_source: str | None = None  # where the version was read
    hip_version: str | None = None  # HIP's own version, when seen: "6.4.43484"

    def describe(self) -> str:
        version = f"ROCm {self.version}" if self.version else "version unknown"
        source = f" from {self.version_source}" if self.version_source else ""
        return f"{version} in {self.root} ({self.layout} layout{source}; found via {self.found_by})"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---- observation (reads files; never raises) ---------------------------------------------------------

def _read(path: Path) -> str | None:
    return read_head(path, _READ_LIMIT)


def observe_root(path: str, root: str | Path = "/") -> dict[str, Any] | None:
    """What one candidate ROCm root holds, or None when it is not a directory."""
    base = Path(root)
    real = base / path.lstrip("/")
    if not real.is_dir():
        return None
    cores = sorted(glob.glob(str(real / "core*")))
    libs: list[str] = []
    for pattern in _LIB_DIRS:
        libs += sorted(glob.glob(str(real / pattern / "libamdhip64.so*")))
    return {
        "realpath": "/" + os.path.relpath(os.path.realpath(real), os.path.realpath(base)).removeprefix("."),
        "info_version": _read(real / ".info/version"),
        "therock_cores": {"/" + str(Path(c).relative_to(base)): _read(Path(c) / ".info/version")
                          for c in cores if Path(c).is_dir()},
        "therock_marker": (real / "share/therock").is_dir(),
        "has_rocminfo": (real / "bin/rocminfo").exists(),
        "rocm_version_h": _read(real / "include/rocm-core/rocm_version.h") or _read(real / "include/rocm_version.h"),
        "hip_version_h": _read(real / "include/hip/hip_version.h"),
        "hip_version_file": _read(real / "share/hip/version"),
        "hip_runtime": [os.path.basename(p) for p in libs],
    }


def observe_layout(env: Mapping[str, str], root: str | Path = "/", extra_roots: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every place ROCm may be: the roots a person named, /opt/rocm, /opt/rocm-X.Y.Z, and /usr.

    "roots" holds ROCM_PATH / ROCM_HOME / /opt/rocm (and extra_roots, e.g. what hipconfig named);
    "distro" holds /usr; "versioned_dirs" lists /opt/rocm-*, and "versioned" observes the newest one.
    """
    base = Path(root)
    layout: dict[str, Any] = {"roots": {}, "distro": {}, "versioned": {}}
    for path in dict.fromkeys([*candidate_roots(env), *filter(None, map(usable_path, extra_roots))]):
        if path not in DISTRO_PREFIXES:
            layout["roots"][path] = observe_root(path, base)
    versioned = sorted("/" + str(Path(p).relative_to(base)) for p in glob.glob(str(base / "opt/rocm-*")))
    layout["versioned_dirs"] = versioned
    newest = _newest(versioned)
    if newest:
        layout["versioned"][newest] = observe_root(newest, base)
    for prefix in DISTRO_PREFIXES:
        layout["distro"][prefix] = observe_root(prefix, base)
    return layout


def add_root(layout: dict[str, Any], path: str | None, root: str | Path = "/") -> None:
    """Observe one more root (the one hipconfig named) if it is not in the layout yet."""
    path = usable_path(path)
    if not path or path in (layout.get("roots") or {}) or path in (layout.get("distro") or {}):
        return
    layout.setdefault("roots", {})[path] = observe_root(path, root)


# ---- the rule (pure) ---------------------------------------------------------------------------------

def _entry(layout: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    for key in ("roots", "distro", "versioned"):
        entries = layout.get(key) or {}
        if path in entries:
            return entries[path]
    return None


def _newest(paths: list[str] | tuple[str, ...]) -> str | None:
    """The path whose name carries the highest version (core-10.0 over core-7.14 over core)."""
    def key(p: str) -> tuple[int, Version]:
        m = _VERSIONED_NAME.search(p)
        try:
            return (1, Version(m.group(1))) if m else (0, Version("0"))
        except ValueError:  # InvalidVersion, or more digits than int() takes
            return (0, Version("0"))

    return max(paths, key=key) if paths else None


def _defines(text: str | None) -> dict[str, int]:
    return {k: int(v) for k, v in _DEFINE.findall(text or "") + _ASSIGN.findall(text or "")}


def hip_version_from_header(text: str | None) -> str | None:
    """"6.4.43484" from HIP_VERSION_MAJOR / _MINOR / _PATCH, as hip_version.h (#define) or HIP's version
    file share/hip/version (NAME=value) write them."""
    d = _defines(text)
    if "HIP_VERSION_MAJOR" not in d or "HIP_VERSION_MINOR" not in d:
        return None
    patch = d.get("HIP_VERSION_PATCH")
    return f"{d['HIP_VERSION_MAJOR']}.{d['HIP_VERSION_MINOR']}" + (f".{patch}" if patch is not None else "")


def rocm_version_from_header(text: str | None) -> str | None:
    """"6.4.1" from rocm-core's rocm_version.h (ROCM_VERSION_MAJOR / _MINOR / _PATCH)."""
    d = _defines(text)
    if "ROCM_VERSION_MAJOR" not in d or "ROCM_VERSION_MINOR" not in d:
        return None
    return f"{d['ROCM_VERSION_MAJOR']}.{d['ROCM_VERSION_MINOR']}.{d.get('ROCM_VERSION_PATCH', 0)}"


def _is_install(entry: Mapping[str, Any] | None, distro: bool) -> bool:
    """A root holds ROCm: a release file or TheRock core, or (in /usr, where anything can live) HIP itself."""
    if not entry:
        return False
    if parse_rocm_version_file(entry.get("info_version") or "") or entry.get("therock_cores"):
        return True
    if any(entry.get(k) for k in ("rocm_version_h", "hip_version_h", "hip_version_file", "hip_runtime")):
        return True
    return not distro and bool(entry.get("has_rocminfo"))


def _layout_name(path: str, entry: Mapping[str, Any]) -> str:
    if re.fullmatch(r"core(-[\d.]+)?", os.path.basename(path)) or entry.get("therock_marker"):
        return "therock"
    if path in DISTRO_PREFIXES:
        return "distro"
    return "legacy"


def _version(path: str, entry: Mapping[str, Any], hip_version: str | None) -> tuple[str | None, str | None, str | None]:
    """(ROCm release, where it was read, HIP version) for one root, from the best source it has."""
    header_hip = hip_version_from_header(entry.get("hip_version_h"))
    file_hip = hip_version_from_header(entry.get("hip_version_file"))
    hip = header_hip or file_hip or hip_version
    v = parse_rocm_version_file(entry.get("info_version") or "")
    if v:
        return v, f"{path}/.info/version", hip
    v = rocm_version_from_header(entry.get("rocm_version_h"))
    if v:
        return v, f"{path}/include/rocm-core/rocm_version.h", hip
    m = _VERSIONED_NAME.search(path)
    if m and "." in m.group(1):
        return m.group(1), f"the directory name {os.path.basename(path)}", hip
    if header_hip:
        return series(header_hip), f"HIP {header_hip} ({path}/include/hip/hip_version.h)", hip
    if file_hip:
        return series(file_hip), f"HIP {file_hip} ({path}/share/hip/version)", hip
    if hip_version and series(hip_version):
        return series(hip_version), f"HIP {hip_version} (hipconfig)", hip
    for lib in entry.get("hip_runtime") or []:
        m = _HIP_SONAME.search(lib)
        if m:
            return series(m.group(1)), f"HIP {m.group(1)} ({lib})", m.group(1)
    return None, None, hip


def _location(path: str, entry: Mapping[str, Any], found_by: str, hip_version: str | None) -> RocmLocation:
    cores = entry.get("therock_cores") or {}
    if cores and not parse_rocm_version_file(entry.get("info_version") or "") and not _VERSIONED_NAME.search(path):
        core = _newest(sorted(cores))  # /opt/rocm of TheRock: the SDK is the newest core directory
        core_entry = {"info_version": cores[core]}
        version, source, hip = _version(core, core_entry, hip_version)
        return RocmLocation(core, "therock", found_by, version, source, hip)
    version, source, hip = _version(path, entry, hip_version)
    return RocmLocation(path, _layout_name(path, entry), found_by, version, source, hip)


def locate_rocm(layout: Mapping[str, Any], env: Mapping[str, str], hipconfig_root: str | None = None,
                hip_version: str | None = None) -> RocmLocation | None:
    """The ROCm a build here would use, or None. Pure: reads only what observe_layout recorded.

    Order: ROCM_PATH, then ROCM_HOME (what the person set; an existing directory counts as it is), then
    the root hipconfig reports, then /opt/rocm with a release file (legacy), then TheRock's
    /opt/rocm/core* (newest), then the newest /opt/rocm-X.Y.Z, then the distribution's ROCm in /usr.
    hip_version (hipconfig's) is the version of last resort, when the root holds no version of its own.
    """
    hip_root = usable_path(hipconfig_root)

    def hip_of(path: str) -> str | None:  # hipconfig's HIP belongs to the root hipconfig named
        return hip_version if hip_root in (None, path) else None

    for var in ROOT_VARIABLES:
        path = usable_path(env.get(var))
        entry = _entry(layout, path) if path else None
        if path and entry:
            return _location(path, entry, var, hip_of(path))
    entry = _entry(layout, hip_root) if hip_root else None
    if hip_root and entry:
        return _location(hip_root, entry, "hipconfig", hip_version)
    entry = (layout.get("roots") or {}).get(LEGACY_ROOT)
    if entry and parse_rocm_version_file(entry.get("info_version") or ""):
        return _location(LEGACY_ROOT, entry, f"{LEGACY_ROOT}/.info/version", None)
    if entry and entry.get("therock_cores"):
        core = _newest(sorted(entry["therock_cores"]))
        return _location(LEGACY_ROOT, entry, str(core), None)
    newest = _newest(layout.get("versioned_dirs") or [])
    if newest:
        return _location(newest, _entry(layout, newest) or {}, newest, None)
    if _is_install(entry, distro=False):  # /opt/rocm with tools or HIP in it, but no release file
        return _location(LEGACY_ROOT, entry, LEGACY_ROOT, None)
    for prefix in DISTRO_PREFIXES:
        entry = (layout.get("distro") or {}).get(prefix)
        if _is_install(entry, distro=True):
            return _location(prefix, entry, f"ROCm in {prefix} (distribution packages)", hip_of(prefix))
    return None


def rocm_installs(layout: Mapping[str, Any], hip_version: str | None = None) -> list[RocmLocation]:
    """Every versioned ROCm install observed (legacy roots, TheRock cores, the newest /opt/rocm-X, /usr).

    Used to warn about several releases side by side; installs whose version is unknown are left out.
    """
    found: list[RocmLocation] = []
    seen: set[tuple[str, str]] = set()

    def add(loc: RocmLocation) -> None:
        if loc.version and (loc.root, loc.version) not in seen:
            seen.add((loc.root, loc.version))
            found.append(loc)

    for path, entry in (layout.get("roots") or {}).items():
        if not entry:
            continue
        v = parse_rocm_version_file(entry.get("info_version") or "")
        if v:
            add(RocmLocation(path, _layout_name(path, entry), path, v, f"{path}/.info/version"))
        for core, text in (entry.get("therock_cores") or {}).items():
            cv = parse_rocm_version_file(text or "")
            if cv:
                add(RocmLocation(core, "therock", path, cv, f"{core}/.info/version (TheRock)"))
    for prefix, entry in (layout.get("distro") or {}).items():
        if _is_install(entry, distro=True):
            add(_location(prefix, entry, f"ROCm in {prefix} (distribution packages)", hip_version))
    return found


# ---- a live machine ----------------------------------------------------------------------------------

Runner = Callable[..., CommandResult]


def find_rocm(env: Mapping[str, str] | None = None, root: str | Path = "/",
              run: Runner = run_command) -> RocmLocation | None:
    """locate_rocm on this machine: observe, ask `hipconfig --rocmpath` (found by the one tool locator) unless
    ROCM_PATH/ROCM_HOME settle it."""
    env = os.environ if env is None else env
    layout = observe_layout(env, root)
    if any(_entry(layout, p) for p in filter(None, (usable_path(env.get(v)) for v in ROOT_VARIABLES))):
        return locate_rocm(layout, env)
    hipconfig = find_tool("hipconfig", env)
    if hipconfig is None:
        return locate_rocm(layout, env)
    result = run([hipconfig, "--rocmpath"], timeout=HIPCONFIG_TIMEOUT_S, env=dict(env))
    hip_root = None
    if result.ok and result.stdout.strip():
        hip_root = usable_path(result.stdout.strip().splitlines()[0])
        add_root(layout, hip_root, root)
    return locate_rocm(layout, env, hipconfig_root=hip_root)
