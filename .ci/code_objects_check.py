"""The code-object reader against CI's real hipcc, inside the Debian ROCm root (see .ci/rocm.sh). No GPU is needed.

tests/fixtures/code-objects/build.sh rebuilds the HIP fixtures (and the host-only one, with ROCm's clang++) with
this root's hipcc. For each library, three answers must agree with the archs build.sh asked for:
- rocmcheck's reader (rocmcheck/facts/parsers/code_objects.py) on the library just built;
- rocmcheck's reader on the committed fixture of the same name (the fixtures are what CI's compiler makes);
- llvm-objdump --offloading (LLVM's own reader), where it can read the library: LLVM 21's cannot decompress
  compressed bundles of format 3 ("Unknown frame descriptor"), which is said, not counted as agreement.
Where the zstandard package is not importable (this root has none), a zstd-compressed bundle must be read as "not
known" naming zstandard, never as a library without GPU code. A library built for gfx90a must not read as gfx942
(the table below holds both): a reader that answered the same for every file would fail here.

usage: code_objects_check.py WORKDIR
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rocmcheck.facts.parsers.code_objects import code_objects_of_bytes, zstd_module

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "code-objects"
ASKED = {  # build.sh's --offload-arch values, per library
    "libscale_gfx90a.so": [["gfx90a"]],
    "libscale_gfx942.so": [["gfx942"]],
    "libscale_gfx942_gfx950.so": [["gfx942", "gfx950"]],
    "libscale_gfx942_xnack_on.so": [["gfx942:xnack+"]],
    "libscale_gfx90a_gfx942_compressed.so": [["gfx90a", "gfx942"]],
    "libscale_gfx942_compressed_v3.so": [["gfx942"]],
    "libscale_two_bundles.so": [["gfx942"], ["gfx90a", "gfx942"]],
    "libhost_only.so": [],
}
COMPRESSED = {"libscale_gfx90a_gfx942_compressed.so", "libscale_gfx942_compressed_v3.so"}
_EXTRACTED = re.compile(r"Extracting offload bundle: \S+?\.so\.(\d+)\.hipv4-amdgcn-amd-amdhsa--(\S+)")


def reader(path: Path, zstd) -> tuple[list[list[str]] | None, str]:
    """(targets per bundle, "") or (None, why not known)."""
    lib = code_objects_of_bytes(path.read_bytes(), zstd)
    if lib.problem:
        return None, lib.problem
    unread = [c.unread for c in lib.containers if c.targets is None]
    if unread:
        return None, "; ".join(sorted(set(u or "not read" for u in unread)))
    return sorted(sorted(c.targets or []) for c in lib.containers), ""


def objdump(path: Path) -> tuple[list[list[str]] | None, str]:
    clang_dir = subprocess.run(["hipconfig", "--hipclangpath"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / path.name  # llvm-objdump writes what it extracts beside its input
        shutil.copyfile(path, copy)
        out = subprocess.run([os.path.join(clang_dir, "llvm-objdump"), "--offloading", str(copy)],
                             cwd=scratch, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        return None, text.strip().splitlines()[-1] if text.strip() else f"exit {out.returncode}"
    bundles: dict[str, list[str]] = {}
    for index, target in _EXTRACTED.findall(text):
        bundles.setdefault(index, []).append(target)
    return sorted(sorted(t) for t in bundles.values()), ""


def main(workdir: str) -> int:
    work = Path(workdir)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    build = FIXTURES / "build.sh"
    for kind in ("hip", "host"):
        env = dict(os.environ, CXX=os.path.join(subprocess.run(["hipconfig", "--hipclangpath"], capture_output=True,
                                                               text=True).stdout.strip(), "clang++"))
        done = subprocess.run(["bash", str(build), kind, str(work / kind)], capture_output=True, text=True,
                              env=env, timeout=900)
        if done.returncode != 0:
            print(f"PROBLEM: build.sh {kind} failed: {(done.stderr or done.stdout)[-2000:]}", file=sys.stderr)
            return 1
    zstd = zstd_module()
    print(f"zstandard: {'importable' if zstd else 'not importable (zstd bundles must read as not known)'}")
    problems: list[str] = []
    for name, asked in ASKED.items():
        kind = "host" if name == "libhost_only.so" else "hip"
        built = work / kind / name
        committed = FIXTURES / kind / name
        want = sorted(sorted(t) for t in asked)
        for what, path in (("built here", built), ("committed fixture", committed)):
            got, why = reader(path, zstd)
            if name in COMPRESSED and zstd is None:
                ok = got is None and "zstandard" in why
                said = f"not known ({why})"
            else:
                ok = got == want
                said = str(got) if got is not None else f"not known ({why})"
            print(f"  {'ok  ' if ok else 'FAIL'} reader, {what}: {name}: asked {want}, read {said}")
            if not ok:
                problems.append(f"reader on the {what} {name}: asked {want}, read {said}")
        truth, why = objdump(built)
        if truth is None:
            print(f"  note llvm-objdump cannot read {name}: {why}")
            if name not in COMPRESSED:
                problems.append(f"llvm-objdump could not read {name}: {why}")
        elif truth != want:
            problems.append(f"llvm-objdump on {name}: asked {want}, it lists {truth}")
        else:
            print(f"  ok   llvm-objdump agrees on {name}: {truth}")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
