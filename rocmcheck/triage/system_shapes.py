"""Generic readers of the operating system's own failures, for any program: the catalogue's signatures find the line
(rocmcheck/knowledge/signatures.json), and these readers turn what the line says into the cause's fix
(rocmcheck/triage/remedy.py):

- an OS resource limit, as the OS error names it (Python's "OSError: [Errno 24] Too many open files", the C
  library's "No space left on device", "Disk quota exceeded", a locked-memory registration that fails with "Cannot
  allocate memory") -> which limit, the path the message names, and the setting that raises it;
- a wheel or a compiled binary built for another platform than the one running it (pip's "<file>.whl is not a
  supported wheel on this platform", macOS's "mach-o file, but is an incompatible architecture (have 'x86_64', need
  'arm64')", the loader's "wrong ELF class", "Exec format error") -> what it was built for, read from the wheel's
  tags or the loader's words, against what runs where the paste shows it;
- a DKMS kernel module that did not build or install (`dkms status`, its "Could not locate dkms.conf", a make.log's
  path) -> the module and version it names, so the fix removes or rebuilds that one, of whichever vendor.

Written against the real pastes of tests/fixtures/triage_shapes/os_resource_errors.txt,
binary_for_other_platform.txt and of the recorded threads cited in the catalogue. Every reader is pure over the
pasted lines and never raises; what a line does not say is left out, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

MAX_LINE = 4096

# --- OS resource limits ------------------------------------------------------------------------------------------

# A locked-memory limit: by name (RLIMIT_MEMLOCK, llama.cpp's RLIMIT_MLOCK, memlock too low), or ENOMEM from a call
# that pins or registers memory (ibv_* verbs and mlx5 devices for RDMA, Libfabric / EFA, mlock, cudaHostRegister /
# hipHostRegister; Vault's "failed to lock memory").
MEMLOCK_PATTERN = (r"\bRLIMIT_M(?:EM)?LOCK\b|\bmemlock\b[^\n]{0,80}(?:limit|too (?:low|small))|failed to lock memory|"
                   r"(?:\bibv_\w{1,30}|\bmlock\w{0,10}|\b(?:cuda|hip)HostRegister|\bLibfabric\b|\bEFA\b|\bmlx\d_\d)"
                   r"[^\n]{0,160}(?:Cannot allocate memory|ENOMEM)")
# The OS errors of a resource limit, by the C library's message (strerror) and Python's errno number: EMFILE and
# ENFILE (open files), ENOSPC (disk), EDQUOT (quota). A locked-memory limit shows as ENOMEM from a call that pins
# memory (ibv_reg_mr for RDMA, mlock, cudaHostRegister / hipHostRegister) or by name (RLIMIT_MEMLOCK).
_RESOURCE = (
    ("EMFILE", re.compile(r"\[Errno 24\]|Too many open files(?! in system)", re.IGNORECASE)),
    ("ENFILE", re.compile(r"\[Errno 23\]|Too many open files in system", re.IGNORECASE)),
    ("ENOSPC", re.compile(r"\[Errno 28\]|No space left on device", re.IGNORECASE)),
    ("EDQUOT", re.compile(r"\[Errno 122\]|Disk quota exceeded", re.IGNORECASE)),
    ("MEMLOCK", re.compile(MEMLOCK_PATTERN, re.IGNORECASE)),
)
# The path an OS error names: Python's "...: '/path'" after the message, or a path on the same line.
_QUOTED_PATH = re.compile(r"""(?:No space left on device|Too many open files|Disk quota exceeded)\s*:\s*['"]([^'"\n]{1,300})['"]""",
                          re.IGNORECASE)
_BARE_PATH = re.compile(r"(?<![\w.~-])((?:~|/)[\w.@+~-]{1,100}(?:/[\w.@+~-]{1,100}){0,30})")


@dataclass(frozen=True)
class ResourceLimit:
    kind: str  # EMFILE, ENFILE, ENOSPC, EDQUOT, MEMLOCK
    path: str | None  # the path the message names, when it names one
    line: str


def resource_limits(lines: Iterable[str]) -> list[ResourceLimit]:
    """Each OS resource limit the lines show, once per kind, in the order they first appear."""
    found: dict[str, ResourceLimit] = {}
    for line in lines:
        line = line[:MAX_LINE]
        for kind, pattern in _RESOURCE:
            if kind not in found and pattern.search(line):
                found[kind] = ResourceLimit(kind, None if kind == "MEMLOCK" else _path_of(line), line.strip())
    return list(found.values())


def _path_of(line: str) -> str | None:
    m = _QUOTED_PATH.search(line)
    if m:
        return m.group(1)
    paths = [p for p in _BARE_PATH.findall(line) if p.count("/") >= 2 and not p.startswith("//")]
    return paths[-1] if paths else None


def resource_advice(found: list[ResourceLimit]) -> str:
    """What raises each limit the paste shows."""
    if not found:
        return "an operating-system limit was hit: paste the whole error with the line before it"
    return "; ".join(_one_limit(r) for r in found)


def _one_limit(r: ResourceLimit) -> str:
    if r.kind == "EMFILE":
        return ("the process ran out of open file descriptors (EMFILE): check `ulimit -n` where it runs and raise it "
                "(ulimit -n 65536 in the launching shell, LimitNOFILE= for a systemd service, nofile in "
                "/etc/security/limits.conf, --ulimit nofile=65536:65536 for a container); with many DataLoader "
                "workers, torch.multiprocessing.set_sharing_strategy('file_system') also keeps one descriptor per "
                "shared tensor from piling up")
    if r.kind == "ENFILE":
        return ("the whole system ran out of open files (ENFILE): raise fs.file-max (sysctl) and find the process "
                "holding them (lsof | wc -l)")
    where = f" on the file system holding {r.path}" if r.path else ""
    if r.kind == "ENOSPC":
        if r.path and r.path.startswith("/dev/shm"):
            return ("/dev/shm is full: give the job a larger /dev/shm (a container: --ipc=host or --shm-size=16g; a "
                    "host: remount it larger) and remove stale files left in it")
        return (f"the disk is full{where}: `df -h{' ' + r.path if r.path else ''}` shows it; free space there or "
                "move what is written to a disk with room (HF_HOME / HF_DATASETS_CACHE for Hugging Face caches, "
                "TMPDIR for temporary files, TRITON_CACHE_DIR, PIP_CACHE_DIR or pip's --no-cache-dir, the "
                "training's output_dir)")
    if r.kind == "EDQUOT":
        return (f"the user's disk quota is used up{where}: `quota -s` (or the site's quota tool) shows it; move "
                "caches and outputs to a project or scratch space (HF_HOME, TMPDIR, TRITON_CACHE_DIR, the "
                "training's output_dir)")
    return ("the locked-memory limit is too low to pin buffers (RDMA registration, pinned host memory): check "
            "`ulimit -l` where the job runs; set it to unlimited (memlock unlimited in /etc/security/limits.conf, "
            "LimitMEMLOCK=infinity for a systemd service or the Slurm daemon, --ulimit memlock=-1:-1 for a container)")


# --- a binary built for another platform --------------------------------------------------------------------------

# pip's refusal names the wheel file: name-version(-build)?-pythontag-abitag-platformtag.whl (PEP 427); the file is
# the word before the message, its tags the last three of its dash-separated parts.
_WHEEL_REFUSED = "is not a supported wheel on this platform"
# dyld's words: "(have 'x86_64', need 'arm64')", "need 'arm64e' or 'arm64'", older "(have (arm64), need (x86_64h))".
_MACHO = re.compile(r"incompatible architecture \(have [('\"]?(\w{1,20})[)'\"]?, need [('\"]?(\w{1,20})[)'\"]?"
                    r"(?: or [('\"]?(\w{1,20}))?", re.IGNORECASE)
_ELF_CLASS = re.compile(r"wrong ELF class: (ELFCLASS\d\d)")
_EXEC_FORMAT = re.compile(r"Exec format error|cannot execute binary file", re.IGNORECASE)
# The two sides of an executable, where the paste shows them: a container engine's platform warning, and `file`.
_IMAGE_PLATFORM = re.compile(r"image platform \(([\w/.-]{1,40})\) does not match the expected platform \(([\w/.-]{1,40})\)")
_FILE_ARCH = re.compile(r"ELF (?:32|64)-bit [LM]SB [\w ]{1,40}, \**([\w-]{1,20}(?: [\w-]{1,20})?)\**,")
_RUNNING_PYTHON = re.compile(r"\bPython ?([23]\.\d{1,2})(?:\.\d{1,3})?\b", re.IGNORECASE)
# A line that names a file or a platform string (a path, a wheel, a library) shows what was built, not the machine;
# uname's "GNU/Linux" is no path.
_NAMES_A_FILE = re.compile(r"\.(?:so|whl|dylib|dll|pyd)\b|/(?!Linux\b)")
_MACHINE = re.compile(r"\b(x86_64|aarch64|arm64|armv7l|ppc64le|s390x)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ForeignBinary:
    kind: str  # wheel, macho, elf, exec
    built_for: str | None  # "cp36 linux_aarch64", "x86_64", "ELFCLASS32", "linux/amd64"
    running: str | None  # the other side where the paste shows it: the Python (a wheel), the architecture needed
    line: str
    machine: str | None = None  # the machine's architecture, where another line of the paste shows it (uname)


def foreign_binaries(lines: Iterable[str]) -> list[ForeignBinary]:
    """Each binary the lines show was built for another platform, once per kind, first seen first."""
    lines = [line[:MAX_LINE] for line in lines]
    found: dict[str, ForeignBinary] = {}
    for line in lines:
        if "wheel" not in found and (tags := _refused_wheel_tags(line)):
            found["wheel"] = ForeignBinary("wheel", tags, _running_python(lines), line.strip(), _machine(lines))
        if "macho" not in found and (m := _MACHO.search(line)):
            need = "/".join(filter(None, (m.group(2), m.group(3))))
            found["macho"] = ForeignBinary("macho", m.group(1), need, line.strip())
        if "elf" not in found and (m := _ELF_CLASS.search(line)):
            found["elf"] = ForeignBinary("elf", m.group(1), None, line.strip(), _machine(lines))
        if "exec" not in found and _EXEC_FORMAT.search(line):
            found["exec"] = ForeignBinary("exec", *_exec_sides(lines), line.strip(), _machine(lines))
    return list(found.values())


def _exec_sides(lines: list[str]) -> tuple[str | None, str | None]:
    for line in lines:
        if m := _IMAGE_PLATFORM.search(line):
            return m.group(1), m.group(2)
    for line in lines:
        if m := _FILE_ARCH.search(line):
            return m.group(1), None
    return None, None


def _machine(lines: list[str]) -> str | None:
    """The machine's architecture as `uname -a` (or a sentence) shows it, never read from the failing line itself."""
    for line in lines:
        if _NAMES_A_FILE.search(line) or "ELF" in line or _EXEC_FORMAT.search(line):
            continue
        if m := _MACHINE.search(line):
            return m.group(1).lower()
    return None


def _refused_wheel_tags(line: str) -> str | None:
    """'cp36 linux_aarch64': the Python tag and the platform tag of the wheel pip refused on this line."""
    at = line.find(_WHEEL_REFUSED)
    if at < 0:
        return None
    words = line[:at].split()
    name = words[-1].rsplit("/", 1)[-1].strip("'\"") if words else ""
    parts = name[:-len(".whl")].split("-") if name.endswith(".whl") else []
    return f"{parts[-3]} {parts[-1]}" if len(parts) >= 5 else None


def _running_python(lines: list[str]) -> str | None:
    for line in lines:
        if _WHEEL_REFUSED in line:
            continue
        if m := _RUNNING_PYTHON.search(line):
            return m.group(1)
    return None


def _wheel_python(tag: str) -> str | None:
    m = re.fullmatch(r"cp3(\d{1,2})", tag)
    return f"3.{m.group(1)}" if m else None


def foreign_binary_advice(found: list[ForeignBinary]) -> str:
    if not found:
        return "a binary was built for another platform than this one: install the build made for this one"
    return "; ".join(_one_binary(b) for b in found)


def _one_binary(b: ForeignBinary) -> str:
    if b.kind == "wheel":
        pytag, _, plat = (b.built_for or "").partition(" ")
        wants = _wheel_python(pytag)
        for_python = f"CPython {wants}" if wants else f"Python tag {pytag}"
        running = "".join(f"; the {what} here is {value}" for what, value in (("Python", b.running),
                                                                             ("machine", b.machine)) if value)
        return (f"the wheel was built for {for_python} on {plat}{running}: pip installs a wheel only where both its "
                "Python tag and its platform tag match the interpreter that runs pip (`python -m pip debug --verbose` "
                "lists the tags it accepts): use the wheel built for this Python and machine"
                + (f", or install it with the pip of Python {wants} (python{wants} -m pip)" if wants else ""))
    if b.kind == "macho":
        return (f"the library was built for {b.built_for} and this Python runs as {b.running}: reinstall the package "
                f"from a Python of the same architecture (a native {b.running} Python; on Apple silicon, not one "
                "under Rosetta), with no cached build: pip install --force-reinstall --no-cache-dir <package>")
    if b.kind == "elf":
        bits = {"ELFCLASS32": "32-bit", "ELFCLASS64": "64-bit"}.get(b.built_for or "", "another word size")
        return (f"the library the loader found is a {bits} build ({b.built_for}), not of this process's word size: "
                "install the build "
                "of the package (or of the library) for this machine's architecture, and check LD_LIBRARY_PATH does "
                "not point at another architecture's folder")
    sides = (f" ({b.built_for}{', this machine ' + (b.running or b.machine) if b.running or b.machine else ''})"
             if b.built_for else "")
    return (f"the executable was built for another CPU architecture than this machine{sides}: `uname -m` shows the "
            "machine's, `file <binary>` the one it was built for; install the build for this architecture (the "
            "image's or the download's arm64 / aarch64 or x86_64 variant), or run it under emulation on purpose")


# --- DKMS modules --------------------------------------------------------------------------------------------------

# Where DKMS output names a module and its version: its tree (/var/lib/dkms/<module>/<version>/), a dkms command
# (dkms install nvidia/550.54 or -m amdgpu -v 6.8.5), a status row ("amdgpu/6.8.5-..., 6.8.0-45-generic, x86_64:
# installed"), a make.log's header ("make.log for amdgpu/6.12.12-... for kernel 6.17.0-6-generic").
_DKMS_TREE = re.compile(r"/var/lib/dkms/([\w.+-]{1,64})/([\w.+~-]{1,64})/")
_DKMS_COMMAND = re.compile(r"\bdkms\s+(?:install|build|remove|add|uninstall)\s+(?:-m\s+)?([\w.+-]{1,64})"
                           r"(?:/|\s+-v\s+)([\w.+~-]{1,64})")
_DKMS_ROW = re.compile(r"^\s*([\w.+-]{1,64})[/,]\s?([\w.+~-]{1,64}),\s*([\w.+~-]{1,64})")
_DKMS_MAKE_LOG = re.compile(r"make\.log for ([\w.+-]{1,64})/([\w.+~-]{1,64}) for kernel ([\w.+~-]{1,64})")
_DKMS_FAILED = re.compile(r"Bad return status for module build on kernel: ([\w.+~-]{1,64})")
_DKMS_STALE = re.compile(r"Could not locate dkms\.conf|dkms\.conf does not exist", re.IGNORECASE)
_DKMS_VENDORS = (("amdgpu", "amd"), ("nvidia", "nvidia"))


@dataclass(frozen=True)
class DkmsFailure:
    module: str | None  # amdgpu, nvidia, ... as DKMS names it
    version: str | None
    kernel: str | None  # the kernel it was built for, where the paste shows it
    stale: bool  # a tree left without its dkms.conf (a half-removed older version)

    @property
    def vendor(self) -> str | None:
        name = (self.module or "").lower()
        return next((v for prefix, v in _DKMS_VENDORS if name.startswith(prefix)), None)


def dkms_failure(lines: Iterable[str]) -> DkmsFailure:
    """The module, version and kernel DKMS output names, and whether it shows a stale tree."""
    module = version = kernel = None
    stale = False
    for line in lines:
        line = line[:MAX_LINE]
        stale = stale or bool(_DKMS_STALE.search(line))
        if m := _DKMS_MAKE_LOG.search(line):
            module, version, kernel = module or m.group(1), version or m.group(2), kernel or m.group(3)
        for pattern in (_DKMS_TREE, _DKMS_COMMAND):
            if module is None and (m := pattern.search(line)):
                module, version = m.group(1), m.group(2)
        if kernel is None and (m := _DKMS_FAILED.search(line)):
            kernel = m.group(1)
        if module is None and "dkms" not in line.lower() and (m := _DKMS_ROW.match(line)):
            if any(m.group(1).lower().startswith(prefix) for prefix, _ in _DKMS_VENDORS):
                module, version, kernel = m.group(1), m.group(2), kernel or m.group(3)
    return DkmsFailure(module, version, kernel, stale)


def dkms_advice(f: DkmsFailure) -> str:
    named = f"{f.module}/{f.version}" if f.module and f.version else (f.module or "<module>/<version>")
    if f.stale:
        return (f"DKMS holds a stale tree of {named} without its dkms.conf (an older version removed by half): "
                f"sudo dkms remove {named} --all (or delete /var/lib/dkms/{named}), then reinstall the driver "
                "package so DKMS builds the installed version for this kernel")
    kernel = f" {f.kernel}" if f.kernel else ""
    first = (f"DKMS could not build {named} for kernel{kernel or ' $(uname -r)'}: install that kernel's headers "
             "(linux-headers-$(uname -r) or kernel-devel), and read the make.log DKMS names for the first error")
    if f.vendor == "amd":
        return first + ("; a build error in amdgpu's sources means the kernel is newer than this amdgpu-dkms "
                        "supports: boot a kernel of ROCm's support list, or install the ROCm release whose "
                        "amdgpu-dkms supports it")
    if f.vendor == "nvidia":
        return first + ("; a build error in nvidia's sources means the kernel is newer than this driver supports: "
                        "install a newer NVIDIA driver release, or boot the kernel it was built for")
    return first + "; a build error in the module's sources means the kernel is newer than the module supports"
