"""extensions.arch and the bitsandbytes checks, on real libraries (tests/fixtures/code-objects) laid out as the
packages install them in a temporary site folder, read by the real collector, judged on recorded machines
(rocminfo of an MI300X and an MI250X, nvidia-smi of an H200)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import amd_machine, ran

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.checks.extensions import (
    JIT,
    MAYBE,
    NO,
    RUNS,
    GpuTarget,
    amd_match,
    bnb_choice,
    bnb_wheel_for,
    cuda_match,
    judge_library,
)
from rocmcheck.facts import extensions as ext_facts
from rocmcheck.facts.bundle_types import type_problem
from rocmcheck.facts.collect import Facts
from rocmcheck.facts.extensions import collect_extensions, parse_version_py
from rocmcheck.facts.parsers.code_objects import zstd_module
from rocmcheck.result import Status

CO = Path(__file__).resolve().parent / "fixtures" / "code-objects"
ZSTD = zstd_module()
MI300X = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"
MI250X = "rocminfo/mi250x-1gcd-cray-slurm-rocm5.7-container.txt"
H200_QUERY = "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt"
EXT = "cpython-311-x86_64-linux-gnu.so"


# ---- a site folder laid out as pip installs the packages ------------------------------------------------------

def dist(site: Path, name: str, version: str, files: dict[str, str | Path]) -> None:
    """A distribution with its files (text, or a fixture library copied) and a RECORD listing them."""
    for rel, content in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, path)
        else:
            path.write_text(content)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in files) + f"{info.name}/RECORD,,\n")


def torch_version_py(version: str, hip: str | None, cuda: str | None) -> str:
    return ("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
            f"__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = {cuda and repr(cuda)}\n"
            f"git_version = 'abc'\nhip: Optional[str] = {hip and repr(hip)}\n")


CPU_VERSION_PY = torch_version_py("2.6.0+cpu", None, None)


def rocm_site(site: Path, torch_lib: str = "hip/libscale_gfx942_gfx950.so", fa: str = "hip/libscale_gfx942.so",
              ds: str = "hip/libscale_two_bundles.so", hip: str = "6.3.42131-fa1d09cbd",
              bnb: dict[str, str] | None = None, bnb_version: str = "0.49.2", bnb_dist: bool = False) -> Path:
    dist(site, "torch", "2.6.0+rocm6.3", {
        "torch/__init__.py": "", "torch/version.py": torch_version_py("2.6.0+rocm6.3", hip, None),
        "torch/lib/libtorch_hip.so": CO / torch_lib, "torch/lib/libtorch_cpu.so": CO / "host/libhost_only.so"})
    dist(site, "flash_attn", "2.7.4", {"flash_attn/__init__.py": "", f"flash_attn_2_cuda.{EXT}": CO / fa})
    dist(site, "deepspeed", "0.16.4", {"deepspeed/__init__.py": "",
                                       f"deepspeed/ops/adam/fused_adam_op.{EXT}": CO / ds,
                                       f"deepspeed/ops/adam/cpu_adam_op.{EXT}": CO / "host/libhost_only.so"})
    if bnb is not None and bnb_dist:
        dist(site, "bitsandbytes", bnb_version, {"bitsandbytes/__init__.py": f'__version__ = "{bnb_version}"\n',
                                                **{f"bitsandbytes/{n}": CO / lib for n, lib in bnb.items()}})
    elif bnb is not None:  # a checkout on PYTHONPATH: no metadata, found by find_spec (ROCm/bitsandbytes#82's layout)
        pkg = site / "bitsandbytes"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(f'__version__ = "{bnb_version}"\n')
        for name, lib in bnb.items():
            shutil.copyfile(CO / lib, pkg / name)
    return site


def collect(site: Path, monkeypatch, home: Path | None = None, env: dict[str, str] | None = None) -> dict:
    """The real collector, seeing only the site folder: whatever this test environment has installed (a real
    bitsandbytes, deepspeed, torch) stays out of sight (sys.path without its site-packages, no module of those
    names already imported)."""
    with monkeypatch.context() as m:
        outside = [p for p in sys.path if not p.endswith(("site-packages", "dist-packages"))]
        m.setattr(sys, "path", [str(site)] + outside)
        for name in [n for n in sys.modules if n.split(".")[0] in ("bitsandbytes", "flash_attn", "flash_attn_2_cuda")]:
            m.delitem(sys.modules, name)
        return collect_extensions(["torch", "flash-attn", "flash_attn", "deepspeed", "bitsandbytes"], env or {},
                                  home=str(home or site / "home"))


def results(facts: Facts, *only: str, expected_archs: tuple[str, ...] = ()) -> list:
    return run_checks(select_checks(only=only or ("extensions", "bitsandbytes")),
                      CheckContext(facts, expected_archs=expected_archs))


def one(facts: Facts, check_id: str, **kw):
    found = [r for r in results(facts, check_id, **kw) if r.id == check_id]
    assert len(found) == 1, found
    return found[0]


def nvidia_machine(extensions: dict) -> Facts:
    return Facts(platform={"system": "Linux"}, present={"/sys/module/nvidia": True},
                 commands={"nvidia-smi-query": ran("nvidia-smi-query", H200_QUERY)}, packages={"torch": "2.6.0+cu124"},
                 extensions=extensions)


# ---- the matching rules ---------------------------------------------------------------------------------------------

MI300X_ISA = GpuTarget("amd", "gfx942", ("gfx942:sramecc+:xnack-",), True, "rocminfo")
MI300X_ISA_WITH_GENERIC = GpuTarget("amd", "gfx942", ("gfx942:sramecc+:xnack-", "gfx9-4-generic:sramecc+:xnack-"),
                                    True, "rocminfo")
FROM_TORCH = GpuTarget("amd", "gfx942", ("gfx942:sramecc+:xnack-",), False, "torch")
FROM_ARCH = GpuTarget("amd", "gfx942", (), False, "--arch")


@pytest.mark.parametrize("code,gpu,state", [
    ("gfx942", MI300X_ISA, RUNS), ("gfx942:xnack-", MI300X_ISA, RUNS), ("gfx942:sramecc+", MI300X_ISA, RUNS),
    ("gfx942:xnack+", MI300X_ISA, NO), ("gfx90a", MI300X_ISA, NO), ("gfx950", MI300X_ISA, NO),
    ("gfx9-4-generic", MI300X_ISA, NO), ("gfx9-4-generic", MI300X_ISA_WITH_GENERIC, RUNS),
    ("gfx9-4-generic:xnack+", MI300X_ISA_WITH_GENERIC, NO), ("gfx9-4-generic", FROM_TORCH, MAYBE),
    ("gfx942:xnack+", FROM_TORCH, NO), ("gfx942", FROM_ARCH, RUNS), ("gfx942:xnack+", FROM_ARCH, MAYBE),
    ("gfx9-4-generic", FROM_ARCH, MAYBE), ("gfx11-generic", FROM_ARCH, NO), ("amdgcnspirv", MI300X_ISA, JIT),
])
def test_amd_loader_rule(code, gpu, state):
    assert amd_match(code, gpu) == state


@pytest.mark.parametrize("code,gpu,state", [
    ("sm_80", "sm_86", RUNS), ("sm_80", "sm_90", NO), ("sm_90", "sm_90", RUNS), ("sm_86", "sm_80", NO),
    ("compute_80", "sm_90", JIT), ("compute_90", "sm_80", NO), ("sm_90a", "sm_90", RUNS), ("sm_90a", "sm_100", NO),
    ("compute_90a", "sm_100", NO), ("sm_100f", "sm_103", RUNS), ("sm_100f", "sm_120", NO),
    ("compute_120", "sm_100", NO), ("compute_120", "sm_120", JIT), ("gfx942", "sm_90", NO),
])
def test_cuda_compatibility_rule(code, gpu, state):
    assert cuda_match(code, GpuTarget("nvidia", gpu)) == state


def test_torch_version_py_is_read_without_importing():
    assert parse_version_py(torch_version_py("2.6.0+rocm6.3", "6.3.42131-fa1d09cbd", None)) == {
        "version": "2.6.0+rocm6.3", "hip": "6.3.42131-fa1d09cbd", "cuda": None}
    assert parse_version_py("__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n")["cuda"] == "12.4"
    assert parse_version_py("garbage\x00" * 100) == {"version": None, "hip": None, "cuda": None}


# ---- extensions.arch ----------------------------------------------------------------------------------------------

def test_good_rocm_stack_passes_on_mi300x(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path), monkeypatch)
    assert {lib["owner"] for lib in ext["libraries"]} == {"torch", "flash-attn", "deepspeed"}
    assert ext["scanned"] == {"torch": 2, "flash-attn": 1, "deepspeed": 2}
    r = one(amd_machine(extensions=ext), "extensions.arch")
    assert r.status == Status.PASS, r
    assert "3 GPU libraries (deepspeed, flash-attn, torch) carry code for gfx942" in r.summary


def test_each_library_without_the_arch_is_named_with_its_fix(tmp_path, monkeypatch):
    site = rocm_site(tmp_path, torch_lib="hip/libscale_gfx90a.so", fa="hip/libscale_gfx942_xnack_on.so")
    jit = tmp_path / "home" / ".cache" / "torch_extensions" / "py311_rocm63" / "fused_lamb"
    jit.mkdir(parents=True)
    shutil.copyfile(CO / "hip/libscale_gfx90a.so", jit / "fused_lamb.so")
    ext = collect(site, monkeypatch)
    found = {r.data["package"]: r for r in results(amd_machine(extensions=ext), "extensions.arch")}
    assert set(found) == {"torch", "flash-attn", "torch-extensions-cache"}
    assert all(r.status == Status.FAIL for r in found.values())
    torch = found["torch"]
    assert "libtorch_hip.so" in torch.summary and "invalid device function" in torch.summary
    assert any("libtorch_hip.so: carries gfx90a" in e for e in torch.evidence)
    assert "--force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.2" in torch.fix.text
    assert "gfx942:xnack+" in " ".join(found["flash-attn"].evidence)
    assert "rocmcheck build-env --target flash-attn --arch gfx942" in found["flash-attn"].fix.text
    assert found["torch-extensions-cache"].fix.text == f"rm -rf {jit}"


def _bundle_and_entries(lib: str) -> tuple[bytes, dict[str, bytes]]:
    """The .hip_fatbin bundle of a fixture library, and its code objects by target: the bytes a package ships as
    a *.co bundle file or a *.hsaco code object."""
    from rocmcheck.facts.parsers.code_objects import _bundle_header, _sections, bytes_reader

    data = (CO / lib).read_bytes()
    (fatbin,) = [sec for sec in _sections(bytes_reader(data), len(data))[0] if sec.name == ".hip_fatbin"]
    bundle = data[fatbin.offset:fatbin.offset + fatbin.size]
    entries, _ = _bundle_header(bundle)
    return bundle, {eid.rsplit("--", 1)[-1]: bundle[off:off + size] for off, size, eid in entries if size}


def test_every_installed_distribution_with_gpu_code_is_read(tmp_path, monkeypatch):
    """No list names aiter or vllm: they are found by the files their RECORD lists (a .so, a *.co bundle file, a
    *.hsaco code object), and the one without the GPU's arch is named."""
    site = rocm_site(tmp_path)
    bundle, _ = _bundle_and_entries("hip/libscale_gfx942_gfx950.so")
    _, xnack_on = _bundle_and_entries("hip/libscale_gfx942_xnack_on.so")
    (tmp_path / "co").mkdir()
    (tmp_path / "co" / "fmha.co").write_bytes(bundle)
    (tmp_path / "co" / "gemm.hsaco").write_bytes(next(iter(xnack_on.values())))
    dist(site, "aiter", "0.1.5", {"aiter/__init__.py": "", "aiter/jit/module_moe.so": CO / "hip/libscale_gfx90a.so",
                                  "aiter_meta/hsa/fmha.co": tmp_path / "co" / "fmha.co"})
    dist(site, "vllm", "0.11.0", {"vllm/__init__.py": "", "vllm/_C.abi3.so": CO / "hip/libscale_gfx942.so",
                                  "vllm/kernels/gemm.hsaco": tmp_path / "co" / "gemm.hsaco"})
    ext = collect(site, monkeypatch)
    assert ext["scanned"]["aiter"] == 2 and ext["scanned"]["vllm"] == 2
    by_path = {lib["path"].rsplit("/", 1)[-1]: lib for lib in ext["libraries"]}
    assert by_path["fmha.co"]["groups"] == [{"targets": ["gfx942", "gfx950"], "count": 1}]
    assert by_path["gemm.hsaco"]["groups"] == [{"targets": ["gfx942:xnack+"], "count": 1}]
    found = {r.data.get("package"): r for r in results(amd_machine(extensions=ext), "extensions.arch")}
    assert set(found) == {"aiter", "vllm"}, {k: r.summary for k, r in found.items()}
    assert "module_moe.so" in found["aiter"].summary and "fmha.co" not in found["aiter"].summary
    assert "gemm.hsaco" in found["vllm"].summary and "reinstall or rebuild vllm for gfx942" in found["vllm"].fix.text


def test_per_arch_code_object_files_are_alternatives(tmp_path, monkeypatch):
    """A folder of one code-object file per arch (rocBLAS' Tensile library in a ROCm torch wheel) lacks the arch
    only when none of its files carries it."""
    site = rocm_site(tmp_path)
    _, gfx90a = _bundle_and_entries("hip/libscale_gfx90a.so")
    _, gfx942 = _bundle_and_entries("hip/libscale_gfx942.so")
    (tmp_path / "co").mkdir()
    (tmp_path / "co" / "a.hsaco").write_bytes(gfx90a["gfx90a"])
    (tmp_path / "co" / "b.hsaco").write_bytes(gfx942["gfx942"])
    dist(site, "rocm-sdk-libraries", "7.0.0", {
        "rocm_sdk_libraries/lib/rocblas/library/Kernels.so-000-gfx90a.hsaco": tmp_path / "co" / "a.hsaco",
        "rocm_sdk_libraries/lib/rocblas/library/Kernels.so-000-gfx942.hsaco": tmp_path / "co" / "b.hsaco",
        "rocm_sdk_libraries/lib/hipblaslt/library/Kernels-gfx90a.hsaco": tmp_path / "co" / "a.hsaco"})
    ext = collect(site, monkeypatch)
    found = {r.data.get("package"): r for r in results(amd_machine(extensions=ext), "extensions.arch")}
    assert set(found) == {"rocm-sdk-libraries"}  # only the folder with nothing for gfx942
    assert "Kernels-gfx90a.hsaco" in found["rocm-sdk-libraries"].summary
    assert "Kernels.so-000-gfx90a.hsaco" not in found["rocm-sdk-libraries"].summary


def test_one_bundle_of_two_lacking_the_arch_is_a_partial_build(tmp_path, monkeypatch):
    """The MI250X (gfx90a): DeepSpeed's op has shift for gfx90a and gfx942 but scale for gfx942 only."""
    ext = collect(rocm_site(tmp_path, torch_lib="hip/libscale_gfx90a.so", fa="hip/libscale_gfx90a.so"), monkeypatch)
    found = results(amd_machine(MI250X, extensions=ext), "extensions.arch")
    assert [r.data["package"] for r in found] == ["deepspeed"]
    r = found[0]
    assert r.status == Status.FAIL and "1 of 2 bundles have nothing for gfx90a" in " ".join(r.evidence)
    assert r.fix.text.startswith('pip uninstall -y deepspeed && eval "$(rocmcheck build-env --target deepspeed '
                                 "--arch gfx90a)\"")


def test_cuda_libraries_on_an_amd_machine_are_named_as_the_other_vendor(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, torch_lib="cuda/libscale_sm90.so"), monkeypatch)
    r = [r for r in results(amd_machine(extensions=ext), "extensions.arch") if r.data.get("package") == "torch"][0]
    assert r.status == Status.FAIL and "carry only code for the other vendor's GPUs" in r.summary


@pytest.mark.parametrize("lib,status,words", [
    ("cuda/libscale_sm90.so", Status.PASS, "carry code for sm_90"),
    ("cuda/libscale_sm90a.so", Status.PASS, "carry code for sm_90"),
    ("cuda/libscale_sm80_ptx80.so", Status.PASS, "only as PTX, compiled by the driver at first use"),
    ("cuda/libscale_sm80.so", Status.FAIL, "no kernel image is available"),
    ("cuda/libscale_sm100f_ptx120.so", Status.FAIL, "no kernel image is available"),
    ("cuda/libscale_sm80_ptx80_rdc.so", Status.PASS, "1 only maybe"),
])
def test_cuda_libraries_on_an_h200(tmp_path, monkeypatch, lib, status, words):
    site = tmp_path
    dist(site, "torch", "2.6.0+cu124", {"torch/__init__.py": "",
                                        "torch/version.py": torch_version_py("2.6.0+cu124", None, "12.4"),
                                        "torch/lib/libtorch_cuda.so": CO / lib})
    ext = collect(site, monkeypatch)
    found = results(nvidia_machine(ext), "extensions.arch")
    assert len(found) == 1 and found[0].status == status and words in found[0].summary, found


def test_no_gpu_facts_is_not_known_and_arch_flag_stands_in(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, torch_lib="hip/libscale_gfx90a.so"), monkeypatch)
    cpu_box = Facts(platform={"system": "Linux"}, extensions=ext)
    r = one(cpu_box, "extensions.arch")
    assert r.status == Status.SKIP and r.summary.startswith("not known: this machine's GPU arch")
    found = results(cpu_box, "extensions.arch", expected_archs=("gfx942",))
    assert [(r.status, r.data.get("package")) for r in found] == [(Status.FAIL, "torch")]


def test_cpu_builds_and_old_bundles_are_skips(tmp_path, monkeypatch):
    site = tmp_path
    dist(site, "torch", "2.6.0+cpu", {"torch/__init__.py": "", "torch/version.py": CPU_VERSION_PY,
                                      "torch/lib/libtorch_cpu.so": CO / "host/libhost_only.so"})
    r = one(amd_machine(extensions=collect(site, monkeypatch)), "extensions.arch")
    assert r.status == Status.SKIP and "no installed library carries GPU code" in r.summary
    old = one(amd_machine(), "extensions.arch")
    assert old.status == Status.SKIP and old.data["not_known"][0].startswith("the GPU code in the installed libraries")


def test_zstd_bundles_without_zstandard_are_not_known(tmp_path, monkeypatch):
    monkeypatch.setattr(ext_facts, "zstd_module", lambda: None)
    ext = collect(rocm_site(tmp_path, torch_lib="hip/libscale_gfx942_compressed_v3.so",
                            fa="hip/libscale_gfx90a_gfx942_compressed.so", ds="hip/libscale_gfx942_compressed_v3.so"),
                  monkeypatch)
    assert ext["zstandard"] is None
    r = one(amd_machine(extensions=ext), "extensions.arch")
    assert r.status == Status.SKIP and "zstandard package is not installed" in r.summary
    assert r.data["not_known"]


@pytest.mark.skipif(ZSTD is None, reason="zstandard is in the test extra")
def test_zstd_bundles_with_zstandard_are_judged(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, torch_lib="hip/libscale_gfx942_compressed_v3.so",
                            fa="hip/libscale_gfx90a_gfx942_compressed.so"), monkeypatch)
    assert one(amd_machine(extensions=ext), "extensions.arch").status == Status.PASS


def test_bundles_keep_the_facts_and_give_the_same_verdicts(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, torch_lib="hip/libscale_gfx90a.so",
                            bnb={"libbitsandbytes_rocm64.so": "hip/libscale_gfx942.so"}), monkeypatch)
    facts = amd_machine(extensions=ext)
    d = json.loads(json.dumps(facts.to_dict()))
    assert type_problem(d) is None
    again = Facts.from_dict(d)
    def said(f: Facts) -> list:
        return [(r.id, r.status, r.summary) for r in results(f)]

    assert said(again) == said(facts)
    d["extensions"]["libraries"][0]["groups"] = "gfx942"
    assert "extensions.libraries[0].groups" in type_problem(d)


# ---- bitsandbytes ------------------------------------------------------------------------------------------------

def test_bnb_library_named_after_another_rocm_fails_like_rocm_bitsandbytes_82(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm64.so": "hip/libscale_gfx942.so"},
                            bnb_version="0.49.0"), monkeypatch)
    assert ext["bitsandbytes"]["libraries"] == ["libbitsandbytes_rocm64.so"]
    assert ext["bitsandbytes"]["version"] == "0.49.0"
    r = one(amd_machine(extensions=ext), "bitsandbytes.library")
    assert r.status == Status.FAIL
    assert "looks for libbitsandbytes_rocm63.so (torch's ROCm 6.3)" in r.summary
    assert "Could not find the bitsandbytes ROCm binary" in r.summary
    assert r.fix.text == "pip install --force-reinstall --no-deps bitsandbytes==0.49.2"


def test_bnb_050_falls_back_within_the_major_version(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm64.so": "hip/libscale_gfx942.so"},
                            bnb_version="0.50.0"), monkeypatch)
    r = one(amd_machine(extensions=ext), "bitsandbytes.library")
    assert r.status == Status.PASS and "falls back from libbitsandbytes_rocm63.so" in r.summary


def test_bnb_library_for_torchs_rocm_is_matched_against_the_gpu(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm63.so": "hip/libscale_gfx942.so",
                                           "libbitsandbytes_cuda124.so": "cuda/libscale_sm90.so"}), monkeypatch)
    facts = amd_machine(extensions=ext)
    r = one(facts, "bitsandbytes.library")
    assert r.status == Status.PASS and "libbitsandbytes_rocm63.so, with code for gfx942" in r.summary
    # its CUDA libraries are never loaded here: extensions.arch leaves bitsandbytes to this check
    assert one(facts, "extensions.arch").status == Status.PASS


def test_bnb_library_without_the_gpus_arch_fails(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm63.so": "hip/libscale_gfx90a.so"}), monkeypatch)
    r = one(amd_machine(extensions=ext), "bitsandbytes.library")
    assert r.status == Status.FAIL and "has no code object for gfx942" in r.summary


def test_bnb_override_naming_a_missing_library(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm63.so": "hip/libscale_gfx942.so"}), monkeypatch)
    facts = amd_machine(extensions=ext, env={"BNB_ROCM_VERSION": "72"})
    r = one(facts, "bitsandbytes.library")
    assert r.status == Status.FAIL and "libbitsandbytes_rocm72.so" in r.summary
    assert r.fix.text == "unset BNB_ROCM_VERSION"


def test_bnb_compressed_library_without_zstandard_passes_on_its_name_only(tmp_path, monkeypatch):
    monkeypatch.setattr(ext_facts, "zstd_module", lambda: None)
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm63.so": "hip/libscale_gfx90a_gfx942_compressed.so"}),
                  monkeypatch)
    r = one(amd_machine(extensions=ext), "bitsandbytes.library")
    assert r.status == Status.PASS and "GPU archs are not known" in r.summary and "pip install zstandard" in r.summary


def test_bnb_not_installed_and_cpu_torch(tmp_path, monkeypatch):
    ext = collect(rocm_site(tmp_path), monkeypatch)
    assert one(amd_machine(extensions=ext), "bitsandbytes.library").summary.startswith("bitsandbytes not installed")
    site = tmp_path / "cpu"
    site.mkdir()
    dist(site, "torch", "2.6.0+cpu", {"torch/__init__.py": "", "torch/version.py": CPU_VERSION_PY})
    (site / "bitsandbytes").mkdir()
    (site / "bitsandbytes" / "__init__.py").write_text('__version__ = "0.49.2"\n')
    r = one(amd_machine(extensions=collect(site, monkeypatch)), "bitsandbytes.library")
    assert r.status == Status.SKIP and "CPU build" in r.summary


@pytest.mark.parametrize("version,rocminfo,status", [
    ("0.48.2", MI300X, Status.WARN), ("0.49.1", MI300X, Status.WARN), ("0.49.2", MI300X, Status.PASS),
    ("0.50.0", MI300X, Status.PASS), ("0.48.2", "rocminfo/rx7900xtx-gfx1100-rocm6.2.2-ubuntu24.04.txt", Status.WARN),
    ("0.49.0", "rocminfo/rx7900xtx-gfx1100-rocm6.2.2-ubuntu24.04.txt", Status.PASS),
])
def test_bnb_4bit_blocksize_64_on_cdna(tmp_path, monkeypatch, version, rocminfo, status):
    ext = collect(rocm_site(tmp_path, bnb={"libbitsandbytes_rocm63.so": "hip/libscale_gfx942.so"},
                            bnb_version=version), monkeypatch)
    r = one(amd_machine(rocminfo, extensions=ext), "bitsandbytes.blocksize")
    assert r.status == status, r
    if status == Status.WARN:
        assert "refuses 4-bit blocksize 64" in r.summary and "Expected cond to be True" in r.summary
        assert r.fix.text == "pip install --force-reinstall --no-deps bitsandbytes==0.49.2"


def test_bnb_library_choice_and_wheels():
    libs = ["libbitsandbytes_rocm64.so", "libbitsandbytes_rocm70.so", "libbitsandbytes_cuda124.so"]
    assert bnb_choice("6.4.43484-1", None, libs, "0.49.2", {}).chosen == "libbitsandbytes_rocm64.so"
    assert bnb_choice("6.3.1", None, libs, "0.49.2", {}).chosen is None
    assert bnb_choice("6.5.0", None, libs, "0.50.0", {}).chosen == "libbitsandbytes_rocm64.so"
    assert bnb_choice("7.2.0", None, libs, "0.50.0", {}).chosen == "libbitsandbytes_rocm70.so"
    assert bnb_choice(None, "12.4", libs, "0.49.2", {}).chosen == "libbitsandbytes_cuda124.so"
    assert bnb_choice(None, "12.4", libs, "0.49.2", {"BNB_CUDA_VERSION": "118"}).chosen is None
    assert bnb_choice(None, None, libs, "0.49.2", {}) is None
    assert bnb_wheel_for((6, 3), ["gfx942"]) == "0.49.2"
    assert bnb_wheel_for((7, 0), ["gfx950"]) == "0.50.0"
    assert bnb_wheel_for((6, 4), ["gfx950"]) is None  # gfx950 only in the ROCm 7 libraries
    assert bnb_wheel_for((6, 1), ["gfx942"]) is None


# ---- the doctor's cheap stage, end to end -------------------------------------------------------------------------

def test_doctor_names_the_library_in_its_cheap_stage(tmp_path):
    """A real `rocmcheck doctor` in a child, the fake site on its PYTHONPATH, --arch standing in for the GPU."""
    site = rocm_site(tmp_path / "site", torch_lib="hip/libscale_gfx90a.so",
                     bnb={"libbitsandbytes_rocm62.so": "hip/libscale_gfx942.so"}, bnb_version="0.49.0", bnb_dist=True)
    env = dict(os.environ, PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--only", "extensions,bitsandbytes",
                           "--arch", "gfx942", "--no-train", "--no-gpu-probes", "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    found = {(r["id"], r["status"]) for r in doc["results"]}
    assert ("extensions.arch", "fail") in found and ("bitsandbytes.library", "fail") in found
    arch = [r for r in doc["results"] if r["id"] == "extensions.arch"]
    assert [r["data"]["package"] for r in arch] == ["torch"]


# ---- hostile facts (a bundle from a stranger) ------------------------------------------------------------------

target_text = st.one_of(st.sampled_from(["gfx942", "gfx942:xnack+", "gfx9-4-generic", "amdgcnspirv", "sm_90", "sm_1",
                                         "compute_80", "sm_90a", "sm_100f", "", ":", "gfx942:", "sm_", "compute_x"]),
                        st.text(max_size=12))
groups = st.lists(st.fixed_dictionaries({"targets": st.lists(target_text, max_size=4),
                                         "count": st.integers(0, 10)},
                                        optional={"relocatable": st.booleans()}), max_size=4)


@settings(max_examples=300, deadline=None)
@given(groups, st.sampled_from([MI300X_ISA, MI300X_ISA_WITH_GENERIC, FROM_TORCH, FROM_ARCH,
                                GpuTarget("nvidia", "sm_90"), GpuTarget("nvidia", "sm_100")]))
def test_fuzz_judging_never_raises(found, gpu):
    j = judge_library({"owner": "x", "path": "/x.so", "groups": found}, [gpu])
    assert j.state in (RUNS, JIT, MAYBE, NO, "partial", "unknown", "none")
    j.line()
