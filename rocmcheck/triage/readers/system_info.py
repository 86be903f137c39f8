"""The small system outputs people paste: `uname -a` / `uname -r` / `/proc/version`, `/etc/os-release`,
`lsb_release -a`, `nvcc -V`, `dkms status`, and the answers to what triage asks for next: `ls -l` of the GPU device
nodes and `id` / `groups`.

Written against tests/fixtures/pastes/uname/, os_release/, lsb_release/, nvcc/ and dkms/, and the public
fixtures tests/fixtures/public/os-release/ (Ubuntu 22.04.5, RHEL 9.3 on aarch64, a `uname -a`): an Ubuntu HWE
kernel ("6.8.0-45-generic #45~22.04.1-Ubuntu SMP PREEMPT_DYNAMIC ..."), a Raspberry Pi ("armv7l"), Fedora's
`uname -r` alone ("6.19.8-200.fc43.x86_64"), WSL ("5.15.153.1-microsoft-standard-WSL2"), os-release files cut by
their author ("..."), `lsb_release -a` with and without "No LSB modules are available.", `nvcc --version` from
CUDA 7.5 to 13.0 and a one-line "nvcc -V:Cuda compilation tools, release 10.2, V10.2.89" note, and dkms's
"Error! Could not locate dkms.conf file." Every reader never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.facts.parsers._text import MAY_HIDE, to_text
from rocmcheck.triage.readers._read import known, read_lines

_ARCHES = ("x86_64", "aarch64", "arm64", "armv7l", "armv6l", "ppc64le", "ppc64", "s390x", "riscv64", "loongarch64",
           "mips64", "i686", "i386")
_UNAME_A = re.compile(r"(?:^|\s)(Linux|Darwin|FreeBSD)\s+(\S+)\s+(\d+\.\d+[\w.+~-]*)\s+(#.*)$")
_PROC_VERSION = re.compile(r"(?:^|\s)Linux version (\d+\.\d+[\w.+~-]*)\s+\((\S+)\)")
_RELEASE_ONLY = re.compile(r"^(\d+\.\d+(?:\.\d+)?[\w.+~-]*)$")


@dataclass
class Uname:
    kernel: str | None = None  # "Linux"
    hostname: str | None = None
    release: str | None = None  # "6.8.0-45-generic"
    version: str | None = None  # "#45~22.04.1-Ubuntu SMP PREEMPT_DYNAMIC Wed Sep 11 15:25:05 UTC 2"
    machine: str | None = None  # "x86_64"
    os: str | None = None  # "GNU/Linux"

    @property
    def is_wsl(self) -> bool:
        return bool(self.release and "microsoft" in self.release.lower())

    @property
    def found(self) -> bool:
        return self.release is not None


def parse_uname(text: Any) -> Uname:
    """`uname -a`, `uname -r` (the release alone), `uname -v`, or `cat /proc/version`. Written against
    tests/fixtures/public/os-release/uname-a-5.15.0-161-generic-ubuntu22.04.txt and tests/fixtures/pastes/uname/
    uname-r-v-a_Debian12_6.1.0-31-amd64_docs-page.txt."""
    result = Uname()
    for raw in read_lines(text):
        line = raw.strip()
        m = _UNAME_A.search(line)
        if m:
            result.kernel, result.hostname, result.release = m.group(1), m.group(2), m.group(3)
            rest = m.group(4).split()  # version, then machine, [processor, hardware platform], operating system
            for i in range(len(rest)):
                if rest[i] in _ARCHES:
                    result.machine = rest[i]
                    result.version = " ".join(rest[:i])
                    tail = rest[i + 1:]
                    result.os = next((w for w in tail if w not in _ARCHES and w != "unknown"), None)
                    break
            else:
                result.version = m.group(4)
            return result
        m = _PROC_VERSION.search(line)
        if m:
            result.kernel, result.release = "Linux", m.group(1)
            return result
        m = _RELEASE_ONLY.match(line)
        if m and result.release is None:
            result.release = m.group(1)
            arch = next((a for a in _ARCHES if m.group(1).endswith("." + a)), None)
            result.machine = arch
        elif line in _ARCHES and result.machine is None:
            result.machine = line
        elif line.startswith("#") and " SMP" in line and result.version is None:  # `uname -v`
            result.version = line
    return result


# ---- /etc/os-release, /etc/lsb-release, lsb_release -a -----------------------------------------------------

_ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


@dataclass
class OsRelease:
    id: str | None = None  # "ubuntu", "rhel", "raspbian" (lower-case, as the file spells it)
    version_id: str | None = None  # "22.04", "9.3"
    name: str | None = None
    pretty_name: str | None = None  # "Ubuntu 22.04.5 LTS"
    version: str | None = None  # "22.04.5 LTS (Jammy Jellyfish)"
    version_codename: str | None = None
    id_like: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return bool(self.fields)


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1]
    return v.replace('\\"', '"')


def parse_os_release(text: Any) -> OsRelease:
    """`/etc/os-release` (also `/usr/lib/os-release`) and `/etc/lsb-release` (DISTRIB_ID=...). Written against
    tests/fixtures/public/os-release/rhel-9.3-plow-aarch64-gh200.txt, ubuntu-22.04.5-jammy.txt and
    tests/fixtures/pastes/os_release/cat-os-release_Ubuntu-20.04.3_author-truncated-dots_plus-uname-HWE_blog-openwebui.txt."""
    result = OsRelease()
    for raw in read_lines(text):
        m = _ASSIGN.match(raw.strip())
        if not m or len(result.fields) >= 100:
            continue
        key, value = m.group(1), _unquote(m.group(2))
        result.fields.setdefault(key, value)
    f = result.fields
    result.id = known(f.get("ID") or f.get("DISTRIB_ID", ""))
    result.id = result.id.lower() if result.id else None
    result.version_id = known(f.get("VERSION_ID") or f.get("DISTRIB_RELEASE", ""))
    result.name = known(f.get("NAME", ""))
    result.pretty_name = known(f.get("PRETTY_NAME") or f.get("DISTRIB_DESCRIPTION", ""))
    result.version = known(f.get("VERSION", ""))
    result.version_codename = known(f.get("VERSION_CODENAME") or f.get("DISTRIB_CODENAME", ""))
    result.id_like = f.get("ID_LIKE", "").split()
    return result


@dataclass
class LsbRelease:
    distributor_id: str | None = None  # "Ubuntu", "CentOS", "Raspbian"
    description: str | None = None  # "Ubuntu 22.04.4 LTS"
    release: str | None = None  # "22.04", "8.4.2105"
    codename: str | None = None  # "jammy"; None for "n/a"
    lsb_version: str | None = None

    @property
    def id(self) -> str | None:
        """The distribution as os-release's ID spells it ("ubuntu", "centos")."""
        return self.distributor_id.lower().replace(" ", "") if self.distributor_id else None

    @property
    def found(self) -> bool:
        return self.distributor_id is not None or self.release is not None


_LSB = re.compile(r"^(Distributor ID|Description|Release|Codename|LSB Version):\s*(.*)$")
_LSB_ATTR = {"Distributor ID": "distributor_id", "Description": "description", "Release": "release",
             "Codename": "codename", "LSB Version": "lsb_version"}


def parse_lsb_release(text: Any) -> LsbRelease:
    """`lsb_release -a` (its fields TAB- or space-separated; "No LSB modules are available." is skipped). Written
    against tests/fixtures/pastes/lsb_release/lsb_release-a_CentOS8.4_fenced_ROCm-1583.txt and
    lsb_release-a_Debian-style-TABs_No-LSB-modules_plus-os-release-uname_Raspbian11_unfenced_README_excerpt.txt."""
    result = LsbRelease()
    for raw in read_lines(text):
        m = _LSB.match(raw.strip())
        if m:
            attr = _LSB_ATTR[m.group(1)]
            if getattr(result, attr) is None:
                setattr(result, attr, known(m.group(2)))
    return result


# ---- nvcc -V -----------------------------------------------------------------------------------------------

_NVCC_RELEASE = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_NVCC_BUILT = re.compile(r"Built on (\S+)")
_NVCC_BUILD = re.compile(r"^Build (cuda_\S+)")


@dataclass
class Nvcc:
    cuda_version: str | None = None  # "12.1": the toolkit release, what torch's "+cu121" is compared with
    full_version: str | None = None  # "12.1.105"
    built_on: str | None = None  # "Tue_Feb__7_19:32:13_PST_2023"
    build: str | None = None  # "cuda_12.1.r12.1/compiler.32415258_0"

    @property
    def found(self) -> bool:
        return self.cuda_version is not None


def parse_nvcc(text: Any) -> Nvcc:
    """`nvcc -V` / `nvcc --version`. Written against tests/fixtures/pastes/nvcc/nvcc-version_cuda11.0_V11.0.221_
    pytorch-51840.txt and nvcc-V-single-line-quoted_plus-nvidia-smi-header-line_cuda10.2_pytorch-85332.txt."""
    result = Nvcc()
    for raw in read_lines(text):
        line = raw.strip()
        m = _NVCC_RELEASE.search(line)
        if m and result.cuda_version is None:
            result.cuda_version, result.full_version = m.group(1), m.group(2)
        m = _NVCC_BUILT.search(line)
        if m and result.built_on is None:
            result.built_on = m.group(1)
        m = _NVCC_BUILD.match(line)
        if m and result.build is None:
            result.build = m.group(1)
    return result


# ---- dkms status ---------------------------------------------------------------------------------------------

# dkms 3.x: "amdgpu/6.7.0-1787201.22.04, 6.8.0-45-generic, x86_64: installed";
# dkms 2.x: "amdgpu, 4.3-52.el7, 4.18.0-305.el8.x86_64, x86_64: installed" (or just "amdgpu, 4.3-52.el7: added").
_DKMS_ROW = re.compile(r"^([\w.+-]+)(?:/|,\s*)([\w.~+:-]+)((?:,\s*[^,:]+)*):\s*(\w+)(?:\s*\((.*)\))?")


@dataclass
class DkmsModule:
    name: str  # "amdgpu"
    version: str  # "6.7.0-1787201.22.04"
    kernel: str | None = None  # "6.8.0-45-generic"
    arch: str | None = None
    state: str = ""  # "installed" | "built" | "added"
    note: str | None = None  # "(original_module exists)", "(WARNING! Diff between built and installed module!)"


@dataclass
class DkmsStatus:
    modules: list[DkmsModule] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "Error! Could not locate dkms.conf file.", with its File: line

    @property
    def found(self) -> bool:
        return bool(self.modules or self.errors)


def parse_dkms_status(text: Any) -> DkmsStatus:
    """`dkms status` (dkms 2.x and 3.x rows) and the errors dkms prints instead. Written against
    tests/fixtures/pastes/corpus/30-ROCm-legacy-rocm-build-3701.paste.txt and the `dkms status` block of
    rocminfo/hsa-error-incompatible-kernel-userspace_RadeonProVII_centos8_rocm4.3_ROCm-1583.txt."""
    result = DkmsStatus()
    for raw in read_lines(text):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("Error!", "File: ", "Deprecated feature:")) or "does not exist" in line:
            if len(result.errors) < 50:
                result.errors.append(line[:500])
            continue
        m = _DKMS_ROW.match(line)
        if m and len(result.modules) < 200:
            extra = [p.strip() for p in m.group(3).split(",") if p.strip()]
            result.modules.append(DkmsModule(
                name=m.group(1), version=m.group(2), kernel=extra[0] if extra else None,
                arch=extra[1] if len(extra) > 1 else None, state=m.group(4), note=m.group(5)))
    return result


# `ls -l` of a device node: type c (character) or b (block), the mode bits, the link count, owner, group, the
# "major, minor" pair that only device nodes show, the date (any of ls's forms: "Aug 22 21:34", "Mai 21 05:13",
# "2024-01-05 10:11"), then the name.
# The name is the line's last word: `(?:.*\s)?` jumps to the last space at once (a lazy `.*?(\S+)$` tried each
# position of a long word again: quadratic in the line).
_DEVICE_LINE = re.compile(r"^([bc])([r-][w-][xsS-][r-][w-][xsS-][r-][w-][xtT-])[.+@]?\s+\d+\s+(\S+)\s+(\S+)\s+"
                          r"(\d+),\s*(\d+)\s+(?:.*\s)?(\S+)$")
# The mode of a device node, as _DEVICE_LINE reads it: a text without it lists none.
_DEVICE_MODE = re.compile(r"[bc][r-][w-][xsS-][r-][w-][xsS-][r-][w-][xtT-]")
# Where the GPU device nodes live (the kernel's names for them): a listing of /dev shows only the name.
_DEVICE_DIRS = ((re.compile(r"^kfd$"), "/dev/"), (re.compile(r"^(?:renderD|card)\d+$"), "/dev/dri/"),
                (re.compile(r"^dxg$"), "/dev/"), (re.compile(r"^nvidia(?:\d+|ctl|-uvm(?:-tools)?|-modeset)$"), "/dev/"))
MAX_DEVICE_NODES = 256


@dataclass
class DeviceNode:
    path: str  # "/dev/kfd", "/dev/dri/renderD128"
    mode: str  # "crw-rw----", as stat.filemode writes it
    owner: str
    group: str
    line: str  # the listing's line as pasted

    def access(self, user: str | None = None, uid: int | None = None, groups: list[str] | None = None,
               root: bool | None = None) -> bool | None:
        """Read-write for that user: root always; else the owner's, the group's or the others' rw bits. `root`
        False: the user is known not to be root (a `$` prompt) though not by name. None when who the user is decides
        it and is not known."""
        rw = {who: self.mode[1 + 3 * i] == "r" and self.mode[2 + 3 * i] == "w"
              for i, who in enumerate(("owner", "group", "other"))}
        if uid == 0 or root is True:
            return True
        if rw["other"]:
            return True
        if user is not None and user == self.owner:
            return rw["owner"]
        if groups is not None:
            return rw["group"] and self.group in groups
        if (root is False or uid is not None) and self.owner == "root" and not rw["group"]:
            return False  # only root may open it, and this user is not root
        return None


def parse_device_listing(text: Any) -> list[DeviceNode]:
    """The GPU device nodes an `ls -l` (of /dev, /dev/dri, /dev/kfd, `ls -la /dev | grep kfd`) lists: /dev/kfd,
    /dev/dri/renderD* and card*, /dev/dxg (WSL), /dev/nvidia*. Other files are left out."""
    nodes: list[DeviceNode] = []
    raw_text = to_text(text)
    if not _DEVICE_MODE.search(raw_text) and not MAY_HIDE.search(raw_text):
        return nodes  # no device node's mode in the text, and nothing read_lines removes could hide one
    for raw in read_lines(raw_text):
        line = raw.strip()
        m = _DEVICE_LINE.match(line)
        if not m or len(nodes) >= MAX_DEVICE_NODES:
            continue
        name = m.group(7)
        if name.startswith("/dev/"):
            path = name
        else:
            base = next((d for pattern, d in _DEVICE_DIRS if pattern.match(name)), None)
            if base is None:
                continue
            path = base + name
        nodes.append(DeviceNode(path, m.group(1) + m.group(2), m.group(3), m.group(4), line))
    return nodes


_ID = re.compile(r"\buid=(\d{1,10})(?:\(([^)\s]*)\))?\s+gid=(\d{1,10})(?:\(([^)\s]*)\))?(?:\s+groups=(\S+))?")
_ID_GROUP = re.compile(r"(\d{1,10})(?:\(([^)\s]*)\))?")


@dataclass
class UserIds:
    uid: int | None = None
    user: str | None = None
    groups: list[str] | None = None  # names (or numbers where `id` printed no name); None: not shown
    line: str = ""

    @property
    def found(self) -> bool:
        return self.uid is not None or self.groups is not None


def parse_id(text: Any, command: str | None = None) -> UserIds:
    """`id` ("uid=1000(alice) gid=1000(alice) groups=1000(alice),44(video)") anywhere in the text; and, after a
    `groups` command, its one line of group names ("alice sudo video", or `groups alice`'s "alice : alice video")."""
    result = UserIds()
    raw_text = to_text(text)
    words = command.split() if isinstance(command, str) else []
    groups = bool(words) and words[0] == "groups" and len(words) <= 2
    if "uid=" not in raw_text and not groups and not MAY_HIDE.search(raw_text):
        return result  # no `id` line, and nothing read_lines removes could hide one
    lines = read_lines(raw_text)
    for raw in lines:
        m = _ID.search(raw)
        if m:
            result.uid, result.user, result.line = int(m.group(1)), m.group(2) or None, raw.strip()
            names = [g.group(2) or g.group(1) for g in _ID_GROUP.finditer(m.group(5) or "")]
            result.groups = (names or [m.group(4) or m.group(3)])[:256]
            return result
    if groups:
        for raw in lines:
            line = raw.strip()
            if line:
                names = line.split(":", 1)[-1].split()
                if names and all(re.fullmatch(r"[\w.-]{1,64}", n) for n in names):
                    result.groups, result.line = names[:256], line
                    if len(words) == 2 and ":" in line:
                        result.user = words[1]
                break
    return result
