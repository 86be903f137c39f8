"""Record rocmcheck/bytecode_sources.txt: the Python sources rocmcheck's torch-importing commands import, which
bytecode_prefill.prefill compiles with every core on a machine without bytecode before a first run imports them.

    python scripts/record_bytecode_sources.py [--out rocmcheck/bytecode_sources.txt]

Runs the commands for real (the default smoke-train of the bundled model on the CPU, and the doctor without its
training stage) with Python writing bytecode into an empty folder of its own (PYTHONPYCACHEPREFIX, rocmcheck's own
cache off), so every source any of their processes compiled leaves one .pyc there; each is written back as its
source's place under the standard library or under the folder its top-level package is installed in. Needs torch,
transformers and rocmcheck's training extras installed (the packages a run imports are the ones recorded)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rocmcheck import bytecode, bytecode_prefill  # noqa: E402

# The default smoke-train (it passes on a CPU), and the doctor without its training stage (the same smoke-train run in
# a child), whose children import what it checks: on a machine without a GPU it exits 1, "no GPU found".
COMMANDS = (["smoke-train", "--device", "cpu", "--json"], ["doctor", "--no-train", "--json"])


def source_of(pyc: Path, prefix: Path) -> str:
    """PREFIX/usr/lib/x/name.TAG.pyc -> /usr/lib/x/name.py (the prefix mirrors the sources' folders)"""
    rel = pyc.relative_to(prefix)
    stem = pyc.name.split(".", 1)[0]
    return os.sep + str(rel.parent / f"{stem}.py")


def entry(source: str, roots: list[tuple[str, str]]) -> str | None:
    for kind, root in roots:
        if source.startswith(root + os.sep):
            return f"{kind}:{Path(os.path.relpath(source, root)).as_posix()}"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "rocmcheck" / bytecode_prefill.SOURCES_FILE))
    args = ap.parse_args()
    paths = sysconfig.get_paths()
    sites = {paths["purelib"], paths["platlib"], bytecode_prefill.install_folder("rocmcheck") or str(REPO)}
    # the longest root first: a site folder inside the standard library's tree (a venv's) is a site folder
    roots = sorted([("site", s) for s in sites] + [("stdlib", paths["stdlib"])], key=lambda r: -len(r[1]))
    with tempfile.TemporaryDirectory(prefix="rocmcheck-record-") as tmp:
        prefix = Path(tmp) / "pycache"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", bytecode.MARKER_ENV)}
        env.update(PYTHONPYCACHEPREFIX=str(prefix), **{bytecode.SWITCH_ENV: "0"}, HF_HUB_OFFLINE="1")
        for argv in COMMANDS:
            done = subprocess.run([sys.executable, "-m", "rocmcheck", *argv], env=env, cwd=tmp, timeout=900,
                                  capture_output=True, text=True)
            print(f"rocmcheck {' '.join(argv)}: exit {done.returncode}", flush=True)
        found = {source_of(p, prefix) for p in prefix.rglob("*.pyc")}
    # an editable install's finder module belongs to the machine that recorded, not to what a run imports
    lines = sorted({e for e in (entry(s, roots) for s in found) if e and not e.startswith("site:__editable__")})
    import torch
    import transformers

    header = [f"# {bytecode_prefill.SOURCES_FILE}: written by scripts/record_bytecode_sources.py (Python "
              f"{sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}).",
              "# What rocmcheck's torch-importing commands import; bytecode_prefill.prefill compiles these into its "
              "private cache on a first run."]
    Path(args.out).write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    kinds = {k: sum(1 for line in lines if line.startswith(k + ":")) for k in ("stdlib", "site")}
    print(f"wrote {args.out}: {len(lines)} sources ({kinds['stdlib']} standard library, {kinds['site']} installed "
          f"packages); {len(found) - len(lines)} outside both left out", flush=True)


if __name__ == "__main__":
    main()
