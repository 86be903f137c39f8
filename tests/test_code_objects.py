"""The code-object reader (rocmcheck/facts/parsers/code_objects.py) on real libraries built with hipcc and nvcc
(tests/fixtures/code-objects/README.md), on formats clang writes that these compilers did not (zlib, version 1
and 3 headers, rebuilt from a real bundle's bytes), and on damaged and hostile bytes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocmcheck.facts.parsers import code_objects as co
from rocmcheck.facts.parsers.code_objects import (
    code_objects_of_bytes,
    cuda_target,
    device_target,
    read_code_objects,
    zstd_module,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "code-objects"
ZSTD = zstd_module()
needs_zstd = pytest.mark.skipif(ZSTD is None, reason="zstandard is in the test extra (pyproject.toml)")

# What each fixture was built for (build.sh), as sets of targets per bundle / fatbin.
EXPECTED = {
    "hip/libscale_gfx90a.so": [["gfx90a"]],
    "hip/libscale_gfx942.so": [["gfx942"]],
    "hip/libscale_gfx942_gfx950.so": [["gfx942", "gfx950"]],
    "hip/libscale_gfx942_xnack_on.so": [["gfx942:xnack+"]],
    "hip/libscale_two_bundles.so": [["gfx942"], ["gfx90a", "gfx942"]],
    "hip/libscale_gfx90a_gfx942_compressed.so": [["gfx90a", "gfx942"]],
    "hip/libscale_gfx942_compressed_v3.so": [["gfx942"]],
    # nvcc writes two fatbins: the translation unit's and the one of its device-link step.
    "cuda/libscale_sm80.so": [["sm_80"], ["sm_80"]],
    "cuda/libscale_sm90.so": [["sm_90"], ["sm_90"]],
    "cuda/libscale_sm80_ptx80.so": [["sm_80"], ["compute_80", "sm_80"]],
    "cuda/libscale_sm90a.so": [["sm_90a"], ["sm_90a"]],
    "cuda/libscale_sm80_ptx80_rdc.so": [["sm_80"], ["compute_80", "sm_80"]],
    "cuda/libscale_sm100f_ptx120.so": [["sm_100f"], ["compute_120", "sm_100f"]],
    "host/libhost_only.so": [],
}
COMPRESSED = {"hip/libscale_gfx90a_gfx942_compressed.so", "hip/libscale_gfx942_compressed_v3.so"}


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def targets_of(lib: co.LibraryCode) -> list[list[str]]:
    return [sorted(c.targets) for c in lib.containers if c.targets is not None]


def test_every_fixture_is_listed():
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.so")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_libraries_give_the_archs_they_were_built_for(name):
    if name in COMPRESSED and ZSTD is None:
        pytest.skip("zstandard is in the test extra")
    lib = code_objects_of_bytes(fixture(name), ZSTD)
    assert lib.problem is None and lib.truncated is None
    assert sorted(targets_of(lib)) == sorted(sorted(t) for t in EXPECTED[name])
    assert all(c.unread is None for c in lib.containers)
    assert lib.has_gpu_code == bool(EXPECTED[name])


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("cuda/") and "rdc" not in n))
def test_nvccs_device_link_stub_is_told_from_the_kernels(name):
    """nvcc -shared adds a fatbin of kernel-less cubins (its device-link step): not code any launch needs."""
    lib = code_objects_of_bytes(fixture(name))
    assert [c.kernels for c in lib.containers] == [False, None]
    summary = lib.summary()
    assert summary["stubs"] == 1 and sum(g["count"] for g in summary["groups"]) == 1


def test_relocatable_device_code_is_told_from_the_linked_code():
    summary = code_objects_of_bytes(fixture("cuda/libscale_sm80_ptx80_rdc.so")).summary()
    assert summary["sections"] == [".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment"]
    assert summary["groups"] == [{"targets": ["sm_80"], "count": 1},
                                 {"targets": ["compute_80", "sm_80"], "count": 1, "relocatable": True}]


def test_sections_are_named():
    assert code_objects_of_bytes(fixture("hip/libscale_gfx942.so")).sections == [".hip_fatbin", ".hipFatBinSegment"]
    assert code_objects_of_bytes(fixture("cuda/libscale_sm80.so")).sections == [".nv_fatbin", ".nvFatBinSegment"]
    assert code_objects_of_bytes(fixture("host/libhost_only.so")).sections == []


@pytest.mark.parametrize("name", sorted(COMPRESSED))
def test_zstd_bundles_without_zstandard_are_not_known_never_absent(name):
    lib = code_objects_of_bytes(fixture(name), zstd=None)
    assert lib.has_gpu_code and lib.containers
    assert all(c.targets is None and "zstandard" in (c.unread or "") for c in lib.containers)
    summary = lib.summary()
    assert summary["groups"] == [] and summary["unread"][0]["why"].startswith("zstd-compressed")


@needs_zstd
def test_compressed_formats_are_named():
    v2 = code_objects_of_bytes(fixture("hip/libscale_gfx90a_gfx942_compressed.so"), ZSTD).containers[0]
    v3 = code_objects_of_bytes(fixture("hip/libscale_gfx942_compressed_v3.so"), ZSTD).containers[0]
    assert v2.format == "compressed bundle (zstd, v2)" and v3.format == "compressed bundle (zstd, v3)"


# ---- formats these compilers did not write, rebuilt from a real bundle ---------------------------------------------

def elf_with(section: bytes, name: bytes = b".hip_fatbin") -> bytes:
    """A minimal ELF64 (little-endian) whose only content section is `section`: header, the section, the name
    table, then the section table (null, the section, .shstrtab)."""
    names = b"\0" + name + b"\0.shstrtab\0"
    sec_off = 64
    names_off = sec_off + len(section)
    table_off = (names_off + len(names) + 7) // 8 * 8
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    header[4], header[5], header[6] = 2, 1, 1
    struct.pack_into("<HHI", header, 16, 3, 62, 1)  # ET_DYN, x86-64
    struct.pack_into("<Q", header, 0x28, table_off)
    struct.pack_into("<HHHHHH", header, 0x34, 64, 0, 0, 64, 3, 2)

    def sh(name_off: int, typ: int, off: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name_off, typ, 0, 0, off, size, 0, 0, 1, 0)

    body = bytes(header) + section + names
    body += b"\0" * (table_off - len(body))
    return body + sh(0, 0, 0, 0) + sh(1, 1, sec_off, len(section)) + sh(len(name) + 2, 3, names_off, len(names))


def real_plain_bundle() -> bytes:
    """The plain (uncompressed) gfx90a+gfx942 bundle hipcc wrote, decompressed from the real fixture."""
    data = fixture("hip/libscale_gfx90a_gfx942_compressed.so")
    start = data.index(co.COMPRESSED_MAGIC)
    total = struct.unpack_from("<I", data, start + 8)[0]
    if ZSTD is None:
        pytest.skip("zstandard is in the test extra")
    plain = ZSTD.ZstdDecompressor().decompress(data[start + 24:start + total])
    assert plain.startswith(co.BUNDLE_MAGIC)
    return plain


def ccob(plain: bytes, version: int, method: int = 0) -> bytes:
    """A compressed bundle as llvm's CompressedOffloadBundle::compress writes it."""
    payload = zlib.compress(plain) if method == 0 else ZSTD.ZstdCompressor().compress(plain)
    head = co.COMPRESSED_MAGIC + struct.pack("<HH", version, method)
    size = co.COMPRESSED_HEADER[version] + len(payload)
    if version == 1:
        head += struct.pack("<IQ", len(plain), 0)
    elif version == 2:
        head += struct.pack("<IIQ", size, len(plain), 0)
    else:
        head += struct.pack("<QQQ", size, len(plain), 0)
    return head + payload


@needs_zstd
@pytest.mark.parametrize("version", [1, 2, 3])
def test_zlib_bundles_of_every_header_version(version):
    lib = code_objects_of_bytes(elf_with(ccob(real_plain_bundle(), version, method=0)), zstd=None)
    assert targets_of(lib) == [["gfx90a", "gfx942"]]
    assert lib.containers[0].format == f"compressed bundle (zlib, v{version})"


@needs_zstd
def test_several_bundles_of_every_kind_in_one_section():
    plain = real_plain_bundle()
    pad = b"\0" * (-len(plain) % 4096)
    section = plain + pad + ccob(plain, 2, 1) + b"\0" * 100 + ccob(plain, 1, 0) + b"\0" * 3000 + ccob(plain, 3, 0)
    lib = code_objects_of_bytes(elf_with(section), ZSTD)
    assert targets_of(lib) == [["gfx90a", "gfx942"]] * 4
    assert [c.format.split(",")[0] for c in lib.containers] == [
        "bundle", "compressed bundle (zstd", "compressed bundle (zlib", "compressed bundle (zlib"]


def test_thousands_of_bundles_are_all_read():
    """libtorch_hip.so holds about 1,500 bundles, each padded to 4096 bytes: every one must be read (the padding
    between them must not eat the bound on searching)."""
    data = fixture("hip/libscale_gfx942_gfx950.so")
    start = data.index(co.BUNDLE_MAGIC)
    bundle = data[start:start + 16872]
    section = (bundle + b"\0" * (-len(bundle) % 4096)) * 4000 + zlib_bundle_of(bundle) * 10
    lib = code_objects_of_bytes(elf_with(section))
    assert lib.truncated is None and len(lib.containers) == 4010
    assert lib.summary()["groups"] == [{"targets": ["gfx942", "gfx950"], "count": 4010}]


def zlib_bundle_of(plain: bytes) -> bytes:
    payload = zlib.compress(plain)
    return co.COMPRESSED_MAGIC + struct.pack("<HHIIQ", 2, 0, 24 + len(payload), len(plain), 0) + payload + b"\0" * 40


def test_a_cuda_fatbin_in_the_relocatable_section():
    data = fixture("cuda/libscale_sm90.so")
    start = data.index(co.FATBIN_MAGIC)
    size = 16 + struct.unpack_from("<Q", data, start + 8)[0]
    lib = code_objects_of_bytes(elf_with(data[start:start + size], b"__nv_relfatbin"))
    assert targets_of(lib) == [["sm_90"]] and lib.sections == ["__nv_relfatbin"]


def test_target_ids_and_cuda_targets():
    assert device_target("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-") == "gfx942:sramecc+:xnack-"
    assert device_target("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic") == "gfx9-4-generic"
    assert device_target("hip-spirv64-amd-amdhsa--amdgcnspirv") == "amdgcnspirv"
    assert device_target("openmp-amdgcn-amd-amdhsa--gfx90a:xnack+") == "gfx90a:xnack+"
    assert device_target("host-x86_64-unknown-linux-gnu-") is None
    assert device_target("hipv4-amdgcn-amd-amdhsa--gfx942:bogus") is None
    assert cuda_target(2, 90, 0x100011) == "sm_90a" and cuda_target(2, 100, 0x1200011) == "sm_100f"
    assert cuda_target(1, 80, 0x8011) == "compute_80" and cuda_target(2, 120, 0x1000011) == "sm_120"
    assert cuda_target(8, 80, 0) is None and cuda_target(2, 0, 0) is None


# ---- damaged, hostile, huge -------------------------------------------------------------------------------------

def test_a_registration_wrapper_without_its_code_is_not_known():
    lib = code_objects_of_bytes(elf_with(b"\0" * 24, b".hipFatBinSegment"))
    assert lib.containers == [] and ".hip_fatbin" in lib.truncated


def test_not_libraries_are_said_so():
    assert code_objects_of_bytes(b"").problem == "not an ELF file"
    assert code_objects_of_bytes(b"#!/bin/sh\necho hi\n" * 10).problem == "not an ELF file"
    elf32 = bytearray(fixture("host/libhost_only.so"))
    elf32[4] = 1
    assert code_objects_of_bytes(bytes(elf32)).problem == "not an ELF64 file"


@pytest.mark.parametrize("name", ["hip/libscale_two_bundles.so", "cuda/libscale_sm80_ptx80.so",
                                  "hip/libscale_gfx90a_gfx942_compressed.so"])
def test_a_library_cut_anywhere_never_raises(name):
    data = fixture(name)
    for cut in range(0, len(data), 97):
        lib = code_objects_of_bytes(data[:cut], ZSTD)
        assert lib.problem or all(c.targets is not None or c.unread for c in lib.containers)


def test_a_bundle_naming_absurd_entries_is_unread_not_trusted():
    section = co.BUNDLE_MAGIC + struct.pack("<Q", 1 << 40)
    lib = code_objects_of_bytes(elf_with(section))
    assert lib.containers[0].targets is None and "entries" in lib.containers[0].unread
    section = co.BUNDLE_MAGIC + struct.pack("<QQQQ", 1, 4096, 1 << 62, 30) + b"hipv4-amdgcn-amd-amdhsa--gfx942"[:30]
    lib = code_objects_of_bytes(elf_with(section))
    assert lib.containers[0].targets is None


def test_a_huge_section_is_read_a_few_kib_at_a_time():
    """A 1 GiB .hip_fatbin of one real bundle then zeros: the reader reads its header and a bounded scan, never the
    section (what a libtorch_hip.so of 1,500 bundles relies on)."""
    plain = fixture("hip/libscale_gfx942.so")
    start = plain.index(co.BUNDLE_MAGIC)
    bundle = plain[start:start + 8680]
    small = elf_with(bundle)
    table_off = struct.unpack_from("<Q", small, 0x28)[0]
    huge = 1 << 30
    patched = bytearray(small)
    struct.pack_into("<Q", patched, table_off + 64 + 32, huge)  # the section's size
    read_total = [0]

    def read(offset: int, size: int) -> bytes:
        if offset >= huge + len(small) or size <= 0:
            return b""
        size = min(size, huge + len(small) - offset)
        read_total[0] += size
        real = bytes(patched[offset:offset + size])
        return real + b"\0" * (size - len(real))

    lib = read_code_objects(read, huge + len(small))
    assert targets_of(lib) == [["gfx942"]]
    assert lib.truncated and "stopped looking" in lib.truncated
    assert read_total[0] <= co.MAX_GAP_SCAN + (1 << 20)


mutations = st.lists(st.tuples(st.integers(min_value=0, max_value=1 << 16), st.integers(0, 255)), max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(EXPECTED)), edits=mutations)
def test_fuzz_damaged_real_libraries_never_raise(name, edits):
    data = bytearray(fixture(name))
    for pos, value in edits:
        data[pos % len(data)] = value
    lib = code_objects_of_bytes(bytes(data), ZSTD)
    lib.summary()
    assert isinstance(lib.containers, list) and len(lib.containers) <= co.MAX_CONTAINERS


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096), st.sampled_from([b".hip_fatbin", b".nv_fatbin"]),
       st.sampled_from([b"", co.BUNDLE_MAGIC, co.COMPRESSED_MAGIC, co.FATBIN_MAGIC]))
def test_fuzz_random_sections_never_raise(body, name, magic):
    lib = code_objects_of_bytes(elf_with(magic + body, name), ZSTD)
    lib.summary()
    assert lib.problem is None
