"""The installed GPU libraries, found without importing any of them, and the GPU code objects each carries.

Where the libraries are: each recorded distribution's own file list (importlib.metadata's RECORD): torch's
lib/*.so (libtorch_hip.so, libtorch_cuda.so and the ROCm libraries a ROCm wheel bundles), flash-attn's
flash_attn_2_cuda*.so, DeepSpeed's prebuilt ops (deepspeed/ops/...), bitsandbytes' libbitsandbytes_*.so, and
any other shared library of a recorded package; then the shared libraries and code-object files (*.co, *.hsaco)
of every other installed distribution, so a package no list names is read too. A package whose metadata lists no
files (an editable install, a checkout on PYTHONPATH) is found with importlib.util.find_spec of its top-level
module, which locates a module without running it, and its folder is walked. torch's JIT builds (what DeepSpeed
builds on first use) are in torch's extensions cache: $TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions
(torch.utils.cpp_extension).

Each library is read through facts/parsers/code_objects.py: the section table, then the headers of its offload
bundles or fatbins, a few KiB at a time, never the whole file. Everything is bounded: the number of libraries,
the bytes read in all, and the time; what a bound stopped is recorded (`stopped`), so the check says "not known"
for it. Also recorded, read from files: torch's build (torch/version.py: its HIP or CUDA version, which names the
bitsandbytes library that loads) and bitsandbytes' library files and version.
"""

from __future__ import annotations

import importlib.util
import os
import re
import stat
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping

from packaging.utils import canonicalize_name

from rocmcheck.facts.parsers.code_objects import read_code_objects, zstd_module

MAX_LIBRARIES = 800  # a ROCm torch wheel bundles about 150 shared libraries
MAX_TOTAL_READ = 256 << 20  # bytes read from all libraries: headers only, a few KiB per bundle
MAX_WALK_FILES = 20_000  # files looked at in one package folder when its metadata lists none
MAX_WALK_DEPTH = 4
MAX_JIT_LIBRARIES = 200
MAX_TEXT_BYTES = 64 << 10  # torch/version.py, bitsandbytes/__init__.py
DEADLINE_S = 10.0  # measured: the fixtures' libraries read in milliseconds; a ROCm torch wheel in well under 1 s

# Where a package keeps its libraries when its metadata lists no files: the top-level modules to locate.
MODULES = {"torch": ("torch",), "flash-attn": ("flash_attn_2_cuda", "flash_attn"), "deepspeed": ("deepspeed",),
           "bitsandbytes": ("bitsandbytes",)}
JIT_CACHE_OWNER = "torch-extensions-cache"
_LIBRARY = re.compile(r"\.so(\.\d+)*$")
# A file of GPU code on its own, loaded at run time with hipModuleLoad (Triton's, aiter's and Tensile's kernels).
_CODE_OBJECT = re.compile(r"\.(hsaco|co)$")
MAX_OTHER_LIBRARIES = 4000  # of the distributions not named: every installed one is looked at
MAX_DISTRIBUTIONS = 5000
_BNB_LIBRARY = re.compile(r"^libbitsandbytes_[A-Za-z0-9_]+\.(so|dylib|dll)$")
_ASSIGN = re.compile(r"""^(__version__|hip|cuda)\s*(?::[^=]*)?=\s*(?:['"]([^'"\n]*)['"]|None)\s*$""", re.MULTILINE)


class _Budget:
    def __init__(self, total: int, deadline: float):
        self.left = total
        self.deadline = deadline
        self.stopped: str | None = None

    def take(self, n: int) -> bool:
        if self.stopped:
            return False
        if time.monotonic() > self.deadline:
            self.stopped = f"the {DEADLINE_S:g} s allowed for reading libraries ran out"
            return False
        if self.left <= 0:
            self.stopped = f"the {MAX_TOTAL_READ >> 20} MiB allowed for reading libraries ran out"
            return False
        self.left -= n
        return True


def _open_regular(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    return fd


def read_library(path: str, budget: _Budget, zstd: Any) -> dict[str, Any] | None:
    """The code-object summary of one library (see LibraryCode.summary), with its size and the bytes read; None
    when it is not a regular file that opens."""
    fd = _open_regular(path)
    if fd is None:
        return None
    read_bytes = [0]

    def read(offset: int, size: int) -> bytes:
        if size <= 0 or offset < 0 or not budget.take(size):
            return b""
        try:
            data = os.pread(fd, size, offset)
        except (OSError, OverflowError):
            return b""
        read_bytes[0] += len(data)
        return data

    try:
        size = os.fstat(fd).st_size
        code = read_code_objects(read, size, zstd)
    finally:
        os.close(fd)
    out = code.summary()
    out.update(path=path, size=size, bytes_read=read_bytes[0])
    if budget.stopped and out["truncated"] is None and code.has_gpu_code:
        out["truncated"] = budget.stopped
    return out


def _distribution(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None


def _record_libraries(dist: metadata.Distribution) -> list[str]:
    try:
        files = dist.files or []
    except (OSError, ValueError):
        return []
    out = []
    for f in files:
        if _LIBRARY.search(f.name) or _CODE_OBJECT.search(f.name):
            try:
                out.append(str(dist.locate_file(f)))
            except (OSError, ValueError):
                continue
    return out


def _module_locations(module: str) -> list[str]:
    """Where importlib would load `module` from (a file, or a package's folders), found without importing it:
    find_spec of a top-level name runs no code of the package."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [str(p) for p in spec.submodule_search_locations]
    return [spec.origin] if spec.origin and os.path.isfile(spec.origin) else []


def _walk_libraries(folder: str) -> list[str]:
    out: list[str] = []
    seen = 0
    root_depth = folder.rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(folder):
        if dirpath.count(os.sep) - root_depth >= MAX_WALK_DEPTH:
            dirnames[:] = []
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            seen += 1
            if seen > MAX_WALK_FILES:
                return out
            if _LIBRARY.search(name):
                out.append(os.path.join(dirpath, name))
    return out


def _located(owner: str) -> list[str]:
    out: list[str] = []
    for module in MODULES.get(owner, ()):
        for place in _module_locations(module):
            out += _walk_libraries(place) if os.path.isdir(place) else [place]
    return out


def _other_libraries(named: set[str], budget: _Budget) -> list[tuple[str, str]]:
    """(owner, path) of the shared libraries and code-object files of every other installed distribution (its
    RECORD): GPU code ships in packages no list names (transformer-engine, aiter, apex, xformers, vllm, ...).
    Distributions found first on sys.path win, as importlib's own lookup does."""
    out: list[tuple[str, str]] = []
    owners = set(named)
    try:
        found = metadata.distributions()
        for n, dist in enumerate(found):
            if n >= MAX_DISTRIBUTIONS or budget.stopped or time.monotonic() > budget.deadline:
                break
            try:
                owner = canonicalize_name(dist.metadata["Name"] or "")
            except (OSError, ValueError, KeyError):
                continue
            if not owner or owner in owners:
                continue
            owners.add(owner)
            out += [(owner, p) for p in _record_libraries(dist)]
    except (OSError, ValueError):  # a damaged site folder: what was found so far is read
        pass
    return out


def torch_extensions_dir(env: Mapping[str, str], home: str | None = None) -> str:
    """torch.utils.cpp_extension's build root: $TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions."""
    if env.get("TORCH_EXTENSIONS_DIR"):
        return env["TORCH_EXTENSIONS_DIR"]
    return os.path.join(home or os.path.expanduser("~"), ".cache", "torch_extensions")


def _jit_libraries(root: str) -> list[str]:
    """<root>/<python-and-toolkit tag>/<op>/<op>.so, and <root>/<op>/<op>.so (TORCH_EXTENSIONS_DIR set)."""
    out: list[str] = []
    for pattern in ("*/*/*.so", "*/*.so"):
        try:
            out += sorted(str(p) for p in Path(root).glob(pattern))
        except OSError:
            continue
        if len(out) >= MAX_JIT_LIBRARIES:
            break
    return out[:MAX_JIT_LIBRARIES]


def _read_text(path: str) -> str | None:
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        return os.read(fd, MAX_TEXT_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_version_py(text: str) -> dict[str, str | None]:
    """{"version", "hip", "cuda"} from torch/version.py's assignments (`hip: Optional[str] = '6.2.41133-...'`);
    None for a value that is None. Pure; never raises."""
    found = {m.group(1): m.group(2) for m in _ASSIGN.finditer(text or "")}
    return {"version": found.get("__version__"), "hip": found.get("hip"), "cuda": found.get("cuda")}


def _package_folder(dist: metadata.Distribution | None, module: str) -> str | None:
    """The folder of a package's top-level module: from its file list, else where find_spec finds it."""
    try:
        files = (dist.files or []) if dist is not None else []
        for f in files:
            if len(f.parts) == 2 and f.parts[0] == module and f.name == "__init__.py":
                return str(dist.locate_file(f).parent)  # type: ignore[union-attr]
    except (OSError, ValueError):
        pass
    places = [p for p in _module_locations(module) if os.path.isdir(p)]
    return places[0] if places else None


def _torch_build(dist: metadata.Distribution | None) -> dict[str, Any]:
    folder = _package_folder(dist, "torch")
    if folder is None:
        return {}
    path = os.path.join(folder, "version.py")
    text = _read_text(path)
    if text is None:
        return {"path": path, "error": "torch/version.py could not be read"}
    return {"path": path, **parse_version_py(text)}


def _bitsandbytes(dist: metadata.Distribution | None) -> dict[str, Any]:
    folder = _package_folder(dist, "bitsandbytes")
    if folder is None:
        return {}
    try:
        names = sorted(n for n in os.listdir(folder) if _BNB_LIBRARY.match(n))
    except OSError:
        names = []
    version = None
    if dist is not None:
        version = dist.version
    else:
        match = re.search(r"""^__version__\s*=\s*['"]([^'"\n]+)['"]""",
                          _read_text(os.path.join(folder, "__init__.py")) or "", re.MULTILINE)
        version = match.group(1) if match else None
    return {"dir": folder, "version": version, "libraries": names}


def collect_extensions(packages: Iterable[str], env: Mapping[str, str], home: str | None = None,
                       deadline_s: float = DEADLINE_S) -> dict[str, Any]:
    """The facts the extensions checks read (docs/doctor.md, "GPU code in installed libraries"). Never raises: a
    failure of the file system or of a package's metadata is recorded as where the reading stopped."""
    try:
        return _collect(list(packages), env, home, deadline_s)
    except Exception as exc:  # the doctor's collection must go on; the checks then say "not known"
        return {"zstandard": None, "libraries": [], "scanned": {}, "jit_cache": None, "torch_build": {},
                "bitsandbytes": {}, "stopped": f"reading the installed libraries failed: {type(exc).__name__}: {exc}"}


def _collect(packages: list[str], env: Mapping[str, str], home: str | None, deadline_s: float) -> dict[str, Any]:
    zstd = zstd_module()
    budget = _Budget(MAX_TOTAL_READ, time.monotonic() + deadline_s)
    candidates: list[tuple[str, str]] = []  # (owner, path)
    dists: dict[str, metadata.Distribution | None] = {}
    for name in packages:
        owner = canonicalize_name(name)
        if owner in dists:
            continue
        dists[owner] = dist = _distribution(name)
        paths = _record_libraries(dist) if dist is not None else []
        if not paths:
            paths = _located(owner)
        candidates += [(owner, p) for p in paths]
    jit_root = torch_extensions_dir(env, home)
    candidates += [(JIT_CACHE_OWNER, p) for p in _jit_libraries(jit_root)]
    named = len(candidates)
    candidates += _other_libraries(set(dists), budget)

    libraries: list[dict[str, Any]] = []
    scanned: dict[str, int] = {}
    seen: set[str] = set()
    stopped: str | None = None
    for i, (owner, path) in enumerate(candidates):
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        limit = MAX_LIBRARIES if i < named else MAX_LIBRARIES + MAX_OTHER_LIBRARIES
        if len(seen) > limit:
            stopped = f"more than {limit} libraries: the rest are not read"
            break
        if budget.stopped:
            stopped = budget.stopped
            break
        record = read_library(path, budget, zstd)
        if record is None:
            continue
        scanned[owner] = scanned.get(owner, 0) + 1
        if record["sections"] or record["groups"] or record["unread"] or (
                record["problem"] and record["problem"] != "not an ELF file"):
            libraries.append({"owner": owner, **record})
    return {
        "zstandard": getattr(zstd, "__version__", None) if zstd is not None else None,
        "libraries": libraries,
        "scanned": scanned,
        "stopped": stopped or budget.stopped,
        "jit_cache": jit_root,
        "torch_build": _torch_build(dists.get("torch")),
        "bitsandbytes": _bitsandbytes(dists.get("bitsandbytes")),
    }
