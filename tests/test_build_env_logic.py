"""build-env's pieces: the MAX_JOBS rule, ROCm/CUDA detection on fake trees (both ROCm layouts,
a real fake `hipconfig` on PATH), arch validation, output quoting, and the Docker torch guard."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import make_tool

from rocmcheck.buildenv.archs import select_archs
from rocmcheck.buildenv.env import BuildEnv, EnvVar, HostResources, compute_build_env
from rocmcheck.buildenv.jobs import estimate_jobs
from rocmcheck.buildenv.render import render
from rocmcheck.buildenv.toolkit import detect_cuda, detect_rocm
from rocmcheck.errors import BadInput
from rocmcheck.facts import rocm_location
from rocmcheck.facts.host_resources import available_memory, usable_cores
from rocmcheck.units import GIB

REPO = Path(__file__).resolve().parents[1]


# --- MAX_JOBS: cores AND memory ----------------------------------------------------------------------

@pytest.mark.parametrize("cores, avail_gib, threads, expected", [
    (64, 100, 1, 20),   # memory-bound: 100 GiB / 5 GiB per job
    (2, 100, 1, 2),     # core-bound
    (8, 3, 1, 1),       # less than one job's worth of memory still builds, one job at a time
    (16, 64, 2, 6),     # nvcc with 2 threads: 16 // 2 = 8 by cores, 64 / (5 * 2) = 6 by memory
    (128, 2048, 1, 128),
])
def test_max_jobs_rule(cores, avail_gib, threads, expected):
    est = estimate_jobs(cores, avail_gib * GIB, threads_per_job=threads, gib_per_job=5)
    assert est.max_jobs == expected
    assert f"{cores} usable cores" in est.explain()


def test_max_jobs_without_memory_reading_uses_cores():
    est = estimate_jobs(12, None, gib_per_job=5)
    assert est.max_jobs == 12 and est.memory_source == "unknown"
    assert "free memory unknown" in est.explain()


def test_available_memory_reads_meminfo_and_respects_a_cgroup_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       263842644 kB\nMemFree:         1000000 kB\nMemAvailable:   209715200 kB\n")
    no_cgroup = tmp_path / "no-cgroup"
    assert available_memory(meminfo, no_cgroup) == (209715200 * 1024, "MemAvailable")
    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "memory.max").write_text(f"{32 * GIB}\n")
    (cg / "memory.current").write_text(f"{2 * GIB}\n")
    avail, source = available_memory(meminfo, cg)
    assert avail == 30 * GIB and source.startswith("cgroup")
    (cg / "memory.max").write_text("max\n")
    assert available_memory(meminfo, cg)[1] == "MemAvailable"


def test_usable_cores_honours_a_cpu_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert usable_cores(tmp_path) == min(2, len(os.sched_getaffinity(0)))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cores(tmp_path) == len(os.sched_getaffinity(0))


# --- ROCm / CUDA detection on fake trees -------------------------------------------------------------

def no_tools(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


def test_legacy_rocm_layout(tmp_path):
    (tmp_path / "opt/rocm-6.2.3/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm-6.2.3/.info/version").write_text("6.2.3-116\n")
    os.symlink("rocm-6.2.3", tmp_path / "opt/rocm")
    found = detect_rocm(no_tools(tmp_path), root=tmp_path)
    assert (found.path, found.layout, found.version, found.found_by) == ("/opt/rocm", "legacy", "6.2.3",
                                                                         "/opt/rocm/.info/version")


def test_therock_layout_picks_the_newest_core(tmp_path):
    for name in ("core", "core-10.0", "core-7.14"):
        (tmp_path / "opt/rocm" / name / "bin").mkdir(parents=True)
    (tmp_path / "opt/rocm/bin").mkdir()  # amdrocm's back-compat symlink dir, no .info/version
    found = detect_rocm(no_tools(tmp_path), root=tmp_path)
    assert (found.path, found.layout, found.version) == ("/opt/rocm/core-10.0", "therock", "10.0")


def test_versioned_dir_without_opt_rocm(tmp_path):
    for v in ("6.3.2", "6.10.0"):
        (tmp_path / f"opt/rocm-{v}").mkdir(parents=True)
    found = detect_rocm(no_tools(tmp_path), root=tmp_path)
    assert found.path == "/opt/rocm-6.10.0" and found.version == "6.10.0"


def test_rocm_path_env_wins_and_bad_values_are_ignored(tmp_path):
    (tmp_path / "opt/rocm/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm/.info/version").write_text("7.2.4\n")
    (tmp_path / "custom/rocm").mkdir(parents=True)
    env = no_tools(tmp_path)
    found = detect_rocm({**env, "ROCM_PATH": "/custom/rocm"}, root=tmp_path)
    assert (found.path, found.found_by) == ("/custom/rocm", "ROCM_PATH")
    # missing directory, or text that is not a plain path: fall through to /opt/rocm
    for bad in ("/does/not/exist", "/custom/rocm\nexport X=1", "/custom/rocm$(id)"):
        assert detect_rocm({**env, "ROCM_PATH": bad}, root=tmp_path).path == "/opt/rocm"


def test_hipconfig_rocmpath_from_a_real_fake_tool(tmp_path):
    (tmp_path / "opt/rocm-6.3.2").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    # `hipconfig --rocmpath` prints the bare ROCm root with no newline (the ROCM_PATH value that the
    # real `hipconfig -f` output in tests/fixtures/public/hipconfig shows).
    make_tool(bin_dir, "hipconfig", stdout="/opt/rocm-6.3.2")
    found = detect_rocm({"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}, root=tmp_path)
    assert (found.path, found.found_by, found.version) == ("/opt/rocm-6.3.2", "hipconfig", "6.3.2")


def test_hung_hipconfig_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(rocm_location, "HIPCONFIG_TIMEOUT_S", 0.5)
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "hipconfig", hang=True)
    assert detect_rocm({"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}, root=tmp_path) is None


def test_cuda_home_detection(tmp_path):
    (tmp_path / "usr/local/cuda").mkdir(parents=True)
    assert detect_cuda(no_tools(tmp_path), root=tmp_path).path == "/usr/local/cuda"
    (tmp_path / "cuda-13").mkdir()
    found = detect_cuda({**no_tools(tmp_path), "CUDA_HOME": str(tmp_path / "cuda-13")}, root="/")
    assert (found.path, found.found_by) == (str(tmp_path / "cuda-13"), "CUDA_HOME")


# --- archs and rendering -----------------------------------------------------------------------------

def test_select_archs_dedupes_and_strips_target_features():
    sel = select_archs(["gfx942:sramecc+:xnack-", "gfx942", "gfx90a"])
    assert sel.vendor == "amd" and sel.archs == ("gfx942", "gfx90a")
    assert any("target features dropped" in n for n in sel.notes)
    with pytest.raises(BadInput):
        select_archs([])


def test_deprecated_arch_builds_with_a_note():
    build = compute_build_env(select_archs(["gfx906"]), ["pytorch"], HostResources(4, 64 * GIB), None)
    assert build.env()["PYTORCH_ROCM_ARCH"] == "gfx906"
    assert any("deprecated" in n for n in build.notes)


def test_render_refuses_values_that_could_run_as_code():
    build = compute_build_env(select_archs(["gfx942"]), ["pytorch"], HostResources(4, 64 * GIB), None)
    for fmt in ("sh", "dotenv", "json", "dockerfile"):
        assert render(build, fmt)
    for value in ("$(id)", "a'b", "x\nexport Y=1", "`id`", 'a"b', "a\\b"):
        evil = BuildEnv(**{**build.__dict__, "variables": [EnvVar("ROCM_PATH", value)]})
        with pytest.raises(ValueError):
            render(evil, "sh")


# --- the Docker image's torch guard ------------------------------------------------------------------

def test_keep_torch_pins_and_detects_a_changed_torch(tmp_path):
    script = str(REPO / "docker/keep_torch.py")
    pins = tmp_path / "pins.txt"
    snap = subprocess.run([sys.executable, script, "snapshot", str(pins)], capture_output=True, text=True, timeout=60)
    assert snap.returncode == 0, snap.stderr
    lines = pins.read_text().split()
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
        assert f"torch=={torch_version}" in lines
    except metadata.PackageNotFoundError:
        assert "torch<0" in lines  # absent: forbidden, so pip cannot pull one in
    ok = subprocess.run([sys.executable, script, "verify", str(pins)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    tampered = ["torch==0.0.1" if re.split(r"==|<", ln)[0] == "torch" else ln for ln in lines]
    pins.write_text("\n".join(tampered) + "\n")
    changed = subprocess.run([sys.executable, script, "verify", str(pins)], capture_output=True, text=True, timeout=60)
    assert changed.returncode == 1 and "torch: 0.0.1 ->" in changed.stderr


# --- target features, CMake arguments, the distribution layout --------------------------------------

def test_target_features_are_kept_validated_and_ordered():
    assert select_archs(["gfx90a:xnack+"]).archs == ("gfx90a:xnack+",)
    assert select_archs(["gfx942:xnack-:sramecc+"]).archs == ("gfx942:sramecc+:xnack-",)  # clang's order
    for bad in (["gfx942:foo+"], ["gfx942:xnack+:xnack-"], ["sm_90:xnack+"]):
        with pytest.raises(BadInput):
            select_archs(bad)


def test_cmake_args_carry_the_same_archs_as_pytorch_rocm_arch():
    build = compute_build_env(select_archs(["gfx942", "gfx90a:xnack+"]), ["flash-attn"], HostResources(4, 64 * GIB),
                              None)
    env = build.env()
    assert env["PYTORCH_ROCM_ARCH"] == "gfx942;gfx90a:xnack+"
    assert build.cmake_args == ["-DCMAKE_HIP_ARCHITECTURES=gfx942;gfx90a:xnack+", "-DGPU_TARGETS=gfx942;gfx90a:xnack+",
                                "-DAMDGPU_TARGETS=gfx942;gfx90a:xnack+"]
    assert env["CMAKE_ARGS"] == " ".join(build.cmake_args)
    assert env["GPU_ARCHS"] == "gfx942;gfx90a"  # flash-attn's CK list compares plain names
    nvidia = compute_build_env(select_archs(["sm_90", "sm_80"]), ["pytorch"], HostResources(4, 64 * GIB), None)
    assert nvidia.cmake_args == ["-DCMAKE_CUDA_ARCHITECTURES=90;80"]
    for fmt in ("sh", "dotenv", "json", "dockerfile"):
        assert "CMAKE_HIP_ARCHITECTURES=gfx942;gfx90a:xnack+" in render(build, fmt)


def test_torch_turns_pytorch_rocm_arch_into_one_offload_arch_each(monkeypatch):
    # The CI build test (.ci/rocm_build_env_check.py) drives hipcc the way torch.utils.cpp_extension does;
    # this holds it to torch's own function.
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension")
    build = compute_build_env(select_archs(["gfx942", "gfx90a:xnack+"]), ["pytorch"], HostResources(4, 64 * GIB), None)
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", build.env()["PYTORCH_ROCM_ARCH"])
    flags = cpp_extension._get_rocm_arch_flags()
    assert [f for f in flags if f.startswith("--offload-arch")] == ["--offload-arch=gfx942",
                                                                    "--offload-arch=gfx90a:xnack+"]


def test_distro_rocm_gets_rocm_home_but_no_rocm_path(tmp_path):
    (tmp_path / "usr/include/hip").mkdir(parents=True)
    (tmp_path / "usr/include/hip/hip_version.h").write_text(
        "#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 4\n#define HIP_VERSION_PATCH 43484\n")
    found = detect_rocm(no_tools(tmp_path), root=tmp_path)
    assert (found.path, found.layout, found.version) == ("/usr", "distro", "6.4")
    build = compute_build_env(select_archs(["gfx942"]), ["pytorch"], HostResources(4, 64 * GIB), found)
    env = build.env()
    assert env["ROCM_HOME"] == "/usr" and env["HIP_PATH"] == "/usr" and "ROCM_PATH" not in env
    assert any("ROCM_PATH is left unset" in n for n in build.notes)
