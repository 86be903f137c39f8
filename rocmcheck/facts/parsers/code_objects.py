"""The GPU code objects an ELF shared library carries, read from its bytes: pure, bounded, never raises.

A HIP library keeps its device code in the `.hip_fatbin` section (the runtime registers it through the
`.hipFatBinSegment` wrapper), a CUDA library in `.nv_fatbin` (`__nv_relfatbin` for relocatable device code, with
`.nvFatBinSegment` as the wrapper). The formats, as their writers define them:

- **clang offload bundle** (`__CLANG_OFFLOAD_BUNDLE__`, llvm/lib/Object/OffloadBundle.cpp and
  clang/lib/Driver/OffloadBundler.cpp): the magic, a little-endian u64 entry count, then per entry u64 offset
  (from the bundle's start), u64 size, u64 length and the entry's id, `<kind>-<triple>-<target id>`:
  `hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-` (the target id: a processor and its target features), and
  `host-x86_64-unknown-linux-gnu-` for the empty host entry. Each translation unit links one bundle into the
  section (aligned to 4096), so a library holds one bundle per source file that has kernels.
- **compressed bundle** (`CCOB`, `--offload-compress`, same files): u32 magic, u16 version, u16 method (0 zlib,
  1 zstd: llvm::compression::Format), then version 1: u32 uncompressed size, u64 hash; version 2: u32 total size,
  u32 uncompressed size, u64 hash; version 3: u64 total size, u64 uncompressed size, u64 hash; then the
  compressed bytes of a plain bundle. zlib is in the standard library; zstd needs the `zstandard` package, and
  without it a zstd bundle's targets are not known (never "absent").
- **CUDA fatbin** (magic 0xBA55ED50; the layout below is the one nvcc 13.0 writes, measured on the fixtures in
  tests/fixtures/code-objects/): u32 magic, u16 version 1, u16 header size, u64 size of the entries; each entry:
  u16 kind (1 PTX, 2 cubin), u16 version 0x0101, u32 header size, u64 payload size, the sm number as u32 at
  +28, flags as u64 at +40 (0x100000: an arch-specific target such as sm_90a, 0x200000: a family target such
  as sm_100f). Only the headers are read: the targets need no decompression of the (often compressed) payloads.
  One look inside a payload: an uncompressed cubin's own section table, to tell nvcc's device-link stub (a fatbin
  of cubins without a `.text.<kernel>` section, which `nvcc -shared` adds to every library) from real code.

The reader reads through `read(offset, size) -> bytes` (fewer bytes at the end of the data, never raising), so a
1 GiB library is read a few KiB at a time: the section table, then each bundle's or fatbin's header. Every loop
and every size has a cap; what a cap or damage stopped is said in `unread` / `truncated`, so a verdict built on
it can say "not known" instead of "absent".
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

Read = Callable[[int, int], bytes]

ELF_MAGIC = b"\x7fELF"
HIP_SECTIONS = (".hip_fatbin",)
HIP_WRAPPER_SECTIONS = (".hipFatBinSegment",)
CUDA_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# Relocatable device code (nvcc -rdc): the objects' fatbins, kept for the device linker; what the runtime loads
# first is the linked code in .nv_fatbin.
RELOCATABLE_SECTIONS = ("__nv_relfatbin",)
CUDA_WRAPPER_SECTIONS = (".nvFatBinSegment",)
GPU_SECTIONS = HIP_SECTIONS + HIP_WRAPPER_SECTIONS + CUDA_SECTIONS + CUDA_WRAPPER_SECTIONS

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
COMPRESSED_HEADER = {1: 20, 2: 24, 3: 32}  # version -> header bytes
COMPRESSION_METHODS = {0: "zlib", 1: "zstd"}
FATBIN_KINDS = {1: "ptx", 2: "cubin"}
FATBIN_ARCH_SPECIFIC = 0x100000  # sm_90a: runs on sm_90 only
FATBIN_FAMILY = 0x200000  # sm_100f: runs on the sm_10x family

# Caps: far above any real library (libtorch_hip.so holds about 1,500 bundles; a bundle a few dozen entries), low
# enough that a damaged or hostile file is read in bounded time and memory.
MAX_SECTIONS = 8192
MAX_NAMES_BYTES = 1 << 20  # the section-name table
MAX_CONTAINERS = 50_000  # bundles or fatbins per library
MAX_ENTRIES = 4096  # entries per bundle or fatbin
MAX_ID_BYTES = 1024  # one bundle entry's id
MAX_HEADER_BYTES = 1 << 20  # one bundle's header (magic, count, entries), compressed or not
FIRST_HEADER_READ = 4096  # bytes read first for a bundle's header; more only when it is longer
FIRST_COMPRESSED_READ = 4096  # compressed bytes fed first to read a compressed bundle's header
MAX_COMPRESSED_READ = 4 << 20  # compressed bytes fed at most to reach the end of that header
MAX_GAP_SCAN = 64 << 20  # bytes searched for the next magic between containers, per section (padding counts)
FIRST_SCAN_WINDOW = 4096
SCAN_WINDOW = 1 << 16
MAX_CUBIN_LOOK = 4 << 20  # a cubin larger than this is not looked into for kernels

_TARGET_FEATURE = re.compile(r"^[a-z0-9]+[+-]$")


@dataclass
class Container:
    """One offload bundle or CUDA fatbin: where it is, its format, and the targets it holds (None: not read)."""

    section: str
    offset: int  # in the file
    format: str  # "bundle", "compressed bundle (zstd, v2)", "fatbin"
    targets: list[str] | None = None  # "gfx942:xnack+", "amdgcnspirv", "sm_90a", "compute_80"
    unread: str | None = None  # why targets is None
    kernels: bool | None = None  # False: its code objects hold no kernel (nvcc's device-link stub); None: not known


@dataclass
class LibraryCode:
    """What a library carries. `problem`: the file could not be read as an ELF64 library at all."""

    problem: str | None = None
    sections: list[str] = field(default_factory=list)  # the GPU sections present, in file order
    containers: list[Container] = field(default_factory=list)
    truncated: str | None = None  # a cap stopped the reading: the containers are a lower bound

    @property
    def has_gpu_code(self) -> bool:
        return bool(self.containers) or any(s in HIP_SECTIONS + CUDA_SECTIONS for s in self.sections)

    def summary(self) -> dict[str, Any]:
        """A plain record for the facts: each distinct set of targets with how many containers hold it (marked
        relocatable for __nv_relfatbin), each reason some could not be read with its count, and the device-link
        stubs (a library of 1,500 bundles is a few lines)."""
        groups: dict[tuple[bool, tuple[str, ...]], int] = {}
        unread: dict[str, int] = {}
        stubs = 0
        for c in self.containers:
            if c.kernels is False:
                stubs += 1
            elif c.targets is None:
                reason = c.unread or "not read"
                unread[reason] = unread.get(reason, 0) + 1
            else:
                key = (c.section in RELOCATABLE_SECTIONS, tuple(sorted(set(c.targets))))
                groups[key] = groups.get(key, 0) + 1
        return {"sections": list(self.sections), "problem": self.problem, "truncated": self.truncated,
                "groups": [{"targets": list(t), "count": n, **({"relocatable": True} if r else {})}
                           for (r, t), n in sorted(groups.items())],
                "unread": [{"why": w, "count": n} for w, n in sorted(unread.items())], "stubs": stubs}


def bytes_reader(data: bytes) -> Read:
    """A Read over bytes in memory (tests, small files)."""
    def read(offset: int, size: int) -> bytes:
        if offset < 0 or size <= 0 or offset >= len(data):
            return b""
        return data[offset:offset + size]
    return read


def zstd_module() -> Any:
    """The `zstandard` package when it is importable, else None (zstd bundles are then "not known")."""
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def code_objects_of_bytes(data: bytes, zstd: Any = None) -> LibraryCode:
    return read_code_objects(bytes_reader(data), len(data), zstd=zstd)


def read_code_objects(read: Read, size: int, zstd: Any = None) -> LibraryCode:
    """The GPU code objects of an ELF64 library of `size` bytes, read through `read`. zstd: the zstandard module
    (zstd_module()) or None. Never raises: a file that is not an ELF64 library gets `problem`."""
    try:
        return _read_library(read, size, zstd)
    except (struct.error, ValueError, OverflowError, MemoryError, RecursionError) as exc:  # a guard: tested by fuzzing
        return LibraryCode(problem=f"unreadable: {type(exc).__name__}")


# ---- ELF ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int


_SHT_NOBITS = 8


def _sections(read: Read, size: int) -> tuple[list[_Section], str | None]:
    head = read(0, 64)
    if len(head) < 64 or head[:4] != ELF_MAGIC:
        return [], "not an ELF file"
    if head[4] != 2:
        return [], "not an ELF64 file"
    endian = {1: "<", 2: ">"}.get(head[5])
    if endian is None:
        return [], "an ELF file of unknown byte order"
    shoff = struct.unpack_from(endian + "Q", head, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", head, 0x3A)
    if shoff == 0:
        return [], "no section table (stripped of section headers)"
    if shentsize < 64:
        return [], "a damaged section table"
    first = read(shoff, shentsize)
    if len(first) < 64:
        return [], "the section table lies past the end of the file"
    if shnum == 0:  # more than 0xff00 sections: the count is in section 0 (ELF gABI, extended numbering)
        shnum = struct.unpack_from(endian + "Q", first, 32)[0]
    if shstrndx == 0xFFFF:
        shstrndx = struct.unpack_from(endian + "I", first, 40)[0]
    if shnum > MAX_SECTIONS:
        return [], f"{shnum} sections (more than {MAX_SECTIONS} are not read)"
    table = read(shoff, shnum * shentsize)
    if len(table) < shnum * shentsize:
        return [], "the section table is cut short"
    raw = []
    for i in range(shnum):
        base = i * shentsize
        name, typ = struct.unpack_from(endian + "II", table, base)
        offset, sec_size = struct.unpack_from(endian + "QQ", table, base + 24)
        raw.append((name, typ, offset, sec_size))
    if not 0 < shstrndx < shnum:
        return [], "no section-name table"
    _, _, names_off, names_size = raw[shstrndx]
    names = read(names_off, min(names_size, MAX_NAMES_BYTES))
    out = []
    for name_off, typ, offset, sec_size in raw:
        end = names.find(b"\0", name_off) if name_off < len(names) else -1
        name = names[name_off:end].decode("ascii", "replace") if end >= 0 else ""
        out.append(_Section(name, typ, offset, sec_size))
    return out, None


# A code-object file on its own (a package's *.co / *.hsaco, loaded with hipModuleLoad): either a bundle, or one
# AMDGPU ELF whose e_machine is EM_AMDGPU and whose e_flags name the processor (EF_AMDGPU_MACH, the low byte) and,
# for code object v4 and later, the xnack and sramecc settings (llvm/include/llvm/BinaryFormat/ELF.h).
CODE_OBJECT_FILE = "(code-object file)"
EM_AMDGPU = 224
EF_AMDGPU_MACH = {0x02C: "gfx900", 0x02F: "gfx906", 0x030: "gfx908", 0x036: "gfx1030", 0x03F: "gfx90a",
                  0x040: "gfx940", 0x041: "gfx1100", 0x046: "gfx1101", 0x047: "gfx1102", 0x048: "gfx1200",
                  0x04B: "gfx941", 0x04C: "gfx942", 0x04E: "gfx1201", 0x04F: "gfx950", 0x051: "gfx9-generic",
                  0x052: "gfx10-1-generic", 0x053: "gfx10-3-generic", 0x054: "gfx11-generic",
                  0x059: "gfx12-generic", 0x05F: "gfx9-4-generic"}
_FEATURE_V4 = {1: None, 2: "-", 3: "+"}  # any / off / on: xnack in bits 8-9, sramecc in bits 10-11


def _amdgpu_elf(read: Read, head: bytes) -> LibraryCode | None:
    """One AMDGPU ELF code object as a library holding one container; None when head is not one."""
    if len(head) < 64 or head[:4] != ELF_MAGIC or head[5] not in (1, 2):
        return None
    endian = "<" if head[5] == 1 else ">"
    if struct.unpack_from(endian + "H", head, 0x12)[0] != EM_AMDGPU:
        return None
    flags = struct.unpack_from(endian + "I", head, 0x30)[0]
    mach = EF_AMDGPU_MACH.get(flags & 0xFF)
    if mach is None:
        return LibraryCode(containers=[Container(CODE_OBJECT_FILE, 0, "amdgpu elf", None,
                                                 f"processor number 0x{flags & 0xFF:x} is not known here")])
    target = mach
    for name, shift in (("sramecc", 10), ("xnack", 8)):  # the target-id order: sramecc before xnack
        sign = _FEATURE_V4.get((flags >> shift) & 0x3)
        if sign:
            target += f":{name}{sign}"
    return LibraryCode(containers=[Container(CODE_OBJECT_FILE, 0, "amdgpu elf", [target])])


def _read_library(read: Read, size: int, zstd: Any) -> LibraryCode:
    head = read(0, 64)
    if head.startswith((BUNDLE_MAGIC, COMPRESSED_MAGIC)):  # a bundle written to a file of its own (*.co)
        lib = LibraryCode()
        _scan_section(read, CODE_OBJECT_FILE, 0, size, lib, zstd)
        return lib
    raw = _amdgpu_elf(read, head)
    if raw is not None:
        return raw
    sections, problem = _sections(read, size)
    if problem:
        return LibraryCode(problem=problem)
    lib = LibraryCode(sections=[s.name for s in sections if s.name in GPU_SECTIONS])
    for sec in sections:
        if sec.name not in HIP_SECTIONS + CUDA_SECTIONS:
            continue
        if sec.type == _SHT_NOBITS or sec.size == 0:
            continue
        end = min(sec.offset + sec.size, size)
        if sec.offset >= size:
            lib.truncated = f"{sec.name} lies past the end of the file"
            continue
        if sec.name in HIP_SECTIONS:
            _scan_section(read, sec.name, sec.offset, end, lib, zstd)
        else:
            _scan_fatbins(read, sec.name, sec.offset, end, lib)
    for wrapper, data in ((HIP_WRAPPER_SECTIONS, HIP_SECTIONS), (CUDA_WRAPPER_SECTIONS, CUDA_SECTIONS)):
        if any(s in wrapper for s in lib.sections) and not any(c.section in data for c in lib.containers):
            lib.truncated = lib.truncated or f"{wrapper[0]} registers GPU code that is not in {' or '.join(data)}"
    return lib


# ---- finding containers in a section ------------------------------------------------------------------------------

def _find_next(read: Read, start: int, end: int, magics: tuple[bytes, ...], budget: list[int]) -> int:
    """The offset of the next of `magics` in [start, end), or -1; reads at most budget[0] bytes (shared across a
    section), in windows that overlap by a magic's length."""
    longest = max(len(m) for m in magics)
    pos = start
    size = FIRST_SCAN_WINDOW  # the gaps between bundles are padding to 4096 bytes: small windows first
    while pos < end and budget[0] > 0:
        want = min(size, end - pos, budget[0])
        window = read(pos, want)
        if not window:
            return -1
        hits = [i for i in (window.find(m) for m in magics) if i >= 0]
        if hits:
            budget[0] -= min(hits) + longest
            return pos + min(hits)
        budget[0] -= len(window)
        if pos + len(window) >= end:
            return -1
        pos += max(1, len(window) - longest + 1)
        size = min(size * 2, SCAN_WINDOW)
    return -1


def _scan_section(read: Read, name: str, start: int, end: int, lib: LibraryCode, zstd: Any) -> None:
    budget = [MAX_GAP_SCAN]
    pos = start
    while pos < end:
        if len(lib.containers) >= MAX_CONTAINERS:
            lib.truncated = f"more than {MAX_CONTAINERS} bundles in {name}: the rest are not read"
            return
        head = read(pos, 32)
        if not (head.startswith(BUNDLE_MAGIC) or head.startswith(COMPRESSED_MAGIC)):
            pos = _find_next(read, pos, end, (BUNDLE_MAGIC, COMPRESSED_MAGIC), budget)
            if pos < 0:
                if budget[0] <= 0:
                    lib.truncated = f"{name}: stopped looking for more bundles after {MAX_GAP_SCAN >> 20} MiB"
                return
            continue
        if head.startswith(BUNDLE_MAGIC):
            container, length = _plain_bundle(read, name, pos, end)
        else:
            container, length = _compressed_bundle(read, name, pos, end, zstd)
        lib.containers.append(container)
        if length is None:  # its end is not known: look for the next magic after this one's
            pos = _find_next(read, pos + 4, end, (BUNDLE_MAGIC, COMPRESSED_MAGIC), budget)
            if pos < 0:
                return
        else:
            pos += max(length, 4)


def _bundle_header(data: bytes) -> tuple[list[tuple[int, int, str]] | None, str | None]:
    """The entries (offset, size, id) of a plain bundle whose first bytes are `data`; (None, None) when data
    ends before the header does (read more), (None, why) when the header is damaged."""
    n_at = len(BUNDLE_MAGIC)
    if len(data) < n_at + 8:
        return None, None
    count = struct.unpack_from("<Q", data, n_at)[0]
    if count > MAX_ENTRIES:
        return None, f"a bundle header naming {count} entries"
    pos = n_at + 8
    entries = []
    for _ in range(count):
        if pos + 24 > len(data):
            return None, None
        offset, size, id_len = struct.unpack_from("<QQQ", data, pos)
        pos += 24
        if id_len > MAX_ID_BYTES:
            return None, "a bundle entry with an id too long to be real"
        if pos + id_len > len(data):
            return None, None
        entries.append((offset, size, data[pos:pos + id_len].decode("ascii", "replace")))
        pos += id_len
    return entries, None


def _entries_or_need_more(fetch: Callable[[int], bytes]) -> tuple[list[tuple[int, int, str]] | None, str | None]:
    """Parse a bundle header from fetch(n) (the first n bytes of the plain bundle), asking for more until the header
    fits or MAX_HEADER_BYTES is reached."""
    want = FIRST_HEADER_READ
    while True:
        data = fetch(want)
        entries, why = _bundle_header(data)
        if entries is not None or why is not None:
            return entries, why
        if len(data) < want or want >= MAX_HEADER_BYTES:
            return None, "a bundle header cut short"
        want = min(want * 8, MAX_HEADER_BYTES)


def _targets(entries: list[tuple[int, int, str]]) -> list[str]:
    out = []
    for _, size, entry_id in entries:
        target = device_target(entry_id)
        if target and size > 0:
            out.append(target)
    return out


def _plain_bundle(read: Read, name: str, pos: int, end: int) -> tuple[Container, int | None]:
    entries, why = _entries_or_need_more(lambda n: read(pos, min(n, end - pos)))
    if entries is None:
        return Container(name, pos, "bundle", unread=why), None
    length = max([off + size for off, size, _ in entries] + [len(BUNDLE_MAGIC) + 8])
    if pos + length > end:
        return Container(name, pos, "bundle", unread="a bundle that runs past the end of its section"), None
    return Container(name, pos, "bundle", _targets(entries)), length


def _compressed_bundle(read: Read, name: str, pos: int, end: int, zstd: Any) -> tuple[Container, int | None]:
    head = read(pos, 32)
    if len(head) < 8:
        return Container(name, pos, "compressed bundle", unread="a compressed bundle cut short"), None
    version, method = struct.unpack_from("<HH", head, 4)
    header = COMPRESSED_HEADER.get(version)
    method_name = COMPRESSION_METHODS.get(method)
    fmt = f"compressed bundle ({method_name or f'method {method}'}, v{version})"
    if header is None:
        return Container(name, pos, fmt, unread=f"a compressed bundle of unknown version {version}"), None
    if len(head) < header:
        return Container(name, pos, fmt, unread="a compressed bundle cut short"), None
    total: int | None = None
    if version == 2:
        total = struct.unpack_from("<I", head, 8)[0]
    elif version == 3:
        total = struct.unpack_from("<Q", head, 8)[0]
    if total is not None and (total < header or pos + total > end):
        return Container(name, pos, fmt, unread="a compressed bundle whose size does not fit its section"), None
    if method_name is None:
        return Container(name, pos, fmt, unread=f"an unknown compression method ({method})"), total
    if method_name == "zstd" and zstd is None:
        return Container(name, pos, fmt, unread="zstd-compressed: the zstandard package is not installed"), total
    payload_end = pos + total if total is not None else end

    def fetch(n: int) -> bytes:
        return _decompress_prefix(read, pos + header, payload_end, method_name, zstd, n)

    entries, why = _entries_or_need_more(fetch)
    if entries is None:
        return Container(name, pos, fmt, unread=why), total
    return Container(name, pos, fmt, _targets(entries)), total


def _decompress_prefix(read: Read, start: int, end: int, method: str, zstd: Any, want: int) -> bytes:
    """The first `want` bytes of the decompressed stream in [start, end), feeding as little of it as needed.
    b"" (then "cut short") when the stream does not decompress."""
    fed = FIRST_COMPRESSED_READ
    while True:
        chunk = read(start, min(fed, end - start))
        try:
            if method == "zlib":
                out = zlib.decompressobj().decompress(chunk, want)
            else:
                reader = zstd.ZstdDecompressor().stream_reader(io.BytesIO(chunk))
                out = reader.read(want)
        except Exception:  # zlib.error, zstd.ZstdError, or anything a damaged stream makes them raise
            return b""
        if len(out) >= want or len(chunk) < fed or fed >= MAX_COMPRESSED_READ:
            return out
        fed = min(fed * 8, MAX_COMPRESSED_READ)


def device_target(entry_id: str) -> str | None:
    """The target of a bundle entry that holds device code, as the loader matches it, or None (the host entry, or
    an id that is not `<kind>-<arch>-<vendor>-<os>-<env>-<target id>`):
    "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-" -> "gfx942:sramecc+:xnack-";
    "hip-spirv64-amd-amdhsa--amdgcnspirv" -> "amdgcnspirv"; "hipv4-nvptx64-nvidia-cuda--sm_80" -> "sm_80"."""
    parts = entry_id.split("-", 5)
    if len(parts) != 6 or parts[0] not in ("hip", "hipv4", "openmp"):
        return None
    target = parts[5]
    processor, *features = target.split(":")
    if not re.fullmatch(r"[a-z0-9_.]+(-[a-z0-9]+)*", processor or "-"):
        return None
    if any(not _TARGET_FEATURE.match(f) for f in features):
        return None
    return target


# ---- CUDA fatbins ---------------------------------------------------------------------------------------------

def _scan_fatbins(read: Read, name: str, start: int, end: int, lib: LibraryCode) -> None:
    budget = [MAX_GAP_SCAN]
    pos = start
    while pos < end:
        if len(lib.containers) >= MAX_CONTAINERS:
            lib.truncated = f"more than {MAX_CONTAINERS} fatbins in {name}: the rest are not read"
            return
        head = read(pos, 16)
        if not head.startswith(FATBIN_MAGIC):
            pos = _find_next(read, pos, end, (FATBIN_MAGIC,), budget)
            if pos < 0:
                if budget[0] <= 0:
                    lib.truncated = f"{name}: stopped looking for more fatbins after {MAX_GAP_SCAN >> 20} MiB"
                return
            continue
        container, length = _fatbin(read, name, pos, end)
        lib.containers.append(container)
        if length is None:
            pos = _find_next(read, pos + 4, end, (FATBIN_MAGIC,), budget)
            if pos < 0:
                return
        else:
            pos += length


def _fatbin(read: Read, name: str, pos: int, end: int) -> tuple[Container, int | None]:
    head = read(pos, 16)
    if len(head) < 16:
        return Container(name, pos, "fatbin", unread="a fatbin cut short"), None
    version, header_size, entries_size = struct.unpack_from("<HHQ", head, 4)
    if version != 1 or header_size < 16:
        return Container(name, pos, "fatbin", unread=f"a fatbin of unknown version {version}"), None
    length = header_size + entries_size
    if pos + length > end:
        return Container(name, pos, "fatbin", unread="a fatbin that runs past the end of its section"), None
    targets: list[str] = []
    kernel_flags: list[bool | None] = []
    entry = pos + header_size
    stop = pos + length
    for _ in range(MAX_ENTRIES):
        if entry >= stop:
            break
        eh = read(entry, 48)
        if len(eh) < 48:
            return Container(name, pos, "fatbin", unread="a fatbin entry cut short"), length
        kind, _, entry_header, payload = struct.unpack_from("<HHIQ", eh, 0)
        sm = struct.unpack_from("<I", eh, 28)[0]
        flags = struct.unpack_from("<Q", eh, 40)[0]
        if entry_header < 48 or entry_header > 4096:
            return Container(name, pos, "fatbin", unread="a damaged fatbin entry"), length
        target = cuda_target(kind, sm, flags)
        if target:
            targets.append(target)
            kernel_flags.append(_cubin_has_kernels(read, entry + entry_header, payload) if kind == 2 else None)
        entry += entry_header + payload
    else:
        return Container(name, pos, "fatbin", unread=f"a fatbin of more than {MAX_ENTRIES} entries"), length
    kernels = False if kernel_flags and all(k is False for k in kernel_flags) else None
    return Container(name, pos, "fatbin", targets, kernels=kernels), length


def _cubin_has_kernels(read: Read, start: int, size: int) -> bool | None:
    """Whether a cubin holds a kernel (a `.text.<kernel>` section), read from its section table; None when that is
    not known (a compressed payload, or one too large to look into). nvcc's device-link step adds a fatbin of
    cubins without kernels to every library it links (`fatbinary -link`): it is loaded by nobody's kernel launch."""
    if size > MAX_CUBIN_LOOK or read(start, 4) != ELF_MAGIC:
        return None

    def sub(offset: int, n: int) -> bytes:
        if offset < 0 or offset >= size:
            return b""
        return read(start + offset, min(n, size - offset))

    sections, problem = _sections(sub, size)
    if problem:
        return None
    return any(s.name.startswith(".text.") for s in sections)


def cuda_target(kind: int, sm: int, flags: int) -> str | None:
    """(2, 90, 0x100011) -> "sm_90a"; (1, 80, 0x8011) -> "compute_80"; None for other kinds (LTO IR, which no
    GPU loads by itself) or an sm number no GPU has."""
    prefix = {"cubin": "sm_", "ptx": "compute_"}.get(FATBIN_KINDS.get(kind, ""))
    if prefix is None or not 10 <= sm <= 999:
        return None
    suffix = "a" if flags & FATBIN_ARCH_SPECIFIC else "f" if flags & FATBIN_FAMILY else ""
    return f"{prefix}{sm}{suffix}"
