"""build-env proven by building, inside the Debian ROCm root (see .ci/rocm.sh). No GPU is needed.

For each arch set, `rocmcheck build-env --format sh` is written to a file and sourced by /bin/sh; then,
using only what it exported:
- hipcc compiles a HIP kernel with one --offload-arch per entry of PYTORCH_ROCM_ARCH, hipcc taken from
  $ROCM_HOME/bin: what torch.utils.cpp_extension does for every extension build;
- a CMake HIP project (project(k LANGUAGES HIP)) is configured with `cmake ... $CMAKE_ARGS`;
- a CMake project on ROCm's CMake modules (find_package(hip), hip::device, which read GPU_TARGETS) too.
The code objects in each result are read back with llvm-objdump --offloading and must be exactly the archs
asked for. Negative cases break one exported variable on purpose; each must make its build fail or build
other archs, or this script fails (a check that cannot fail proves nothing).

usage: rocm_build_env_check.py WORKDIR
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KERNEL = """#include <hip/hip_runtime.h>
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
int main() { float* d = nullptr; (void)hipMalloc(&d, 64 * sizeof(float)); scale<<<1, 64>>>(d); return 0; }
"""
HIP_PROJECT = """cmake_minimum_required(VERSION 3.21)
project(k LANGUAGES HIP)
add_executable(k k.hip)
"""
MODULES_PROJECT = """cmake_minimum_required(VERSION 3.21)
project(k2 LANGUAGES CXX)
find_package(hip REQUIRED)
add_executable(k2 k.cpp)
target_link_libraries(k2 hip::device)
"""
CASES = [["gfx942"], ["gfx942", "gfx90a"], ["gfx90a:xnack+"]]
# hipcc the way torch.utils.cpp_extension drives it: PYTORCH_ROCM_ARCH split on ';' (or spaces), one
# --offload-arch per entry (_get_rocm_arch_flags).
HIPCC = 'set --; for a in $(echo "$PYTORCH_ROCM_ARCH" | tr ";" " "); do set -- "$@" --offload-arch="$a"; done; ' \
        '"$ROCM_HOME/bin/hipcc" "$@" -o k k.hip'
CMAKE_HIP = ('cmake -S hip-proj -B hip-build $CMAKE_ARGS > hip-cmake.log 2>&1 '
             '&& cmake --build hip-build >> hip-cmake.log 2>&1')
CMAKE_MODULES = ('cmake -S mod-proj -B mod-build -DCMAKE_CXX_COMPILER="$(hipconfig --hipclangpath)/clang++" '
                 '-DCMAKE_PREFIX_PATH="$ROCM_HOME" $CMAKE_ARGS > mod-cmake.log 2>&1 '
                 '&& cmake --build mod-build >> mod-cmake.log 2>&1')
_BUNDLE = re.compile(r"hipv4-amdgcn-amd-amdhsa--(\S+)")


def sh(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=600)


def code_objects(binary: Path) -> list[str]:
    """The GPU archs of the code objects bundled in binary (llvm-objdump extracts them into a scratch dir)."""
    clang_dir = subprocess.run(["hipconfig", "--hipclangpath"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run([os.path.join(clang_dir, "llvm-objdump"), "--offloading", str(binary)],
                             cwd=scratch, capture_output=True, text=True)
    return sorted(set(_BUNDLE.findall(out.stdout + out.stderr)))


def build(work: Path, archs: list[str], what: str, script: str, binary: str, env_edit: str = "") -> tuple[bool, str]:
    """Source env.sh (then env_edit, to break it), run script; (archs built == archs asked, description)."""
    result = sh(f". ./env.sh && {env_edit} {script}", work)
    if result.returncode != 0:
        return False, (f"{what}: build failed (exit {result.returncode}): "
                       f"{(result.stderr or result.stdout).strip()[-300:]}")
    built = code_objects(work / binary)
    ok = built == sorted(archs)
    return ok, f"{what}: asked {sorted(archs)}, code objects {built}"


def prepare(work: Path, archs: list[str]) -> None:
    if work.exists():
        shutil.rmtree(work)
    for d in ("hip-proj", "mod-proj"):
        (work / d).mkdir(parents=True)
    (work / "k.hip").write_text(KERNEL)
    (work / "hip-proj/k.hip").write_text(KERNEL)
    (work / "hip-proj/CMakeLists.txt").write_text(HIP_PROJECT)
    (work / "mod-proj/k.cpp").write_text(KERNEL)
    (work / "mod-proj/CMakeLists.txt").write_text(MODULES_PROJECT)
    argv = ["rocmcheck", "build-env", "--target", "pytorch", "--format", "sh", "-o", str(work / "env.sh")]
    for a in archs:
        argv += ["--arch", a]
    subprocess.run(argv, check=True)


def main(workdir: str) -> int:
    root = Path(workdir)
    problems: list[str] = []
    for archs in CASES:
        work = root / "-".join(a.replace(":", "_") for a in archs)
        prepare(work, archs)
        env_sh = (work / "env.sh").read_text()
        exported = dict(re.findall(r"^export (\w+)=(.*)$", env_sh, re.MULTILINE))
        print(f"[{' '.join(archs)}] ROCM_HOME={exported.get('ROCM_HOME')} "
              f"PYTORCH_ROCM_ARCH={exported.get('PYTORCH_ROCM_ARCH')} "
              f"CMAKE_ARGS={exported.get('CMAKE_ARGS')}")
        if exported.get("ROCM_HOME") != "/usr" or "ROCM_PATH" in exported:
            problems.append(f"build-env should set ROCM_HOME=/usr and leave ROCM_PATH unset: {exported}")
        steps = [("hipcc", HIPCC, "k"), ("CMake HIP", CMAKE_HIP, "hip-build/k")]
        if archs != ["gfx942"]:  # Debian's hip-config falls back to gfx942 itself: only other archs prove GPU_TARGETS
            steps.append(("CMake hip::device (GPU_TARGETS)", CMAKE_MODULES, "mod-build/k2"))
        for what, script, binary in steps:
            ok, said = build(work, archs, what, script, binary)
            print(f"  {'ok  ' if ok else 'FAIL'} {said}")
            if not ok:
                problems.append(f"[{' '.join(archs)}] {said}")

    # Break one exported variable at a time: every one of these must fail.
    archs = ["gfx942"]
    work = root / "negative"
    prepare(work, archs)
    negatives = [
        ("hipcc, PYTORCH_ROCM_ARCH unset", HIPCC, "k", "unset PYTORCH_ROCM_ARCH;"),
        ("hipcc, PYTORCH_ROCM_ARCH=gfx90a", HIPCC, "k", "PYTORCH_ROCM_ARCH=gfx90a;"),
        ("hipcc, ROCM_PATH=/usr exported (build-env leaves it out here)", HIPCC, "k", "export ROCM_PATH=/usr;"),
        ("CMake HIP, ROCM_PATH=/usr exported", CMAKE_HIP, "hip-build/k", "export ROCM_PATH=/usr;"),
        ("hipcc, ROCM_HOME=/nonexistent", HIPCC, "k", "export ROCM_HOME=/nonexistent;"),
        ("CMake HIP, CMAKE_ARGS unset", CMAKE_HIP, "hip-build/k", "unset CMAKE_ARGS;"),
    ]
    print("negative cases (each must fail):")
    for what, script, binary, edit in negatives:
        for leftover in (work / "k", work / "hip-build"):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
        ok, said = build(work, archs, what, script, binary, edit)
        print(f"  {'FAILED as it must' if not ok else 'PASSED (wrong)'}: {said}")
        if ok:
            problems.append(f"breaking the environment did not break the build: {said}")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
