"""Generate rocmcheck/knowledge/wheel_platforms.json: for each package of the fine-tuning and serving stack whose
builds depend on the operating system, the systems its recent releases publish wheels for, whether they publish a
source distribution, and the systems their own classifiers name, read from the files the owners upload to PyPI.

    python scripts/make_wheel_platforms.py --fetch   # read PyPI's JSON API, keep trimmed snapshots, then write
    python scripts/make_wheel_platforms.py           # write the table from the snapshots
    python scripts/make_wheel_platforms.py --check   # exit 1 when the shipped table differs from the snapshots'

The snapshots (scripts/knowledge_sources/pypi/<package>.json) keep, per package, the URL read and the date, the
"Operating System ::" classifiers, and the file names of its RECENT newest releases (not yanked). A wheel's
platform tag (PEP 425: win_amd64, macosx_11_0_arm64, manylinux_2_28_x86_64, linux_aarch64, any) says the system it
runs on. The product reads the table only (rocmcheck/triage/system_shapes.py), never the network.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "scripts" / "knowledge_sources" / "pypi"
OUT = ROOT / "rocmcheck" / "knowledge" / "wheel_platforms.json"
RECENT = 8  # newest releases kept per package
FETCH_TIMEOUT_S = 30
# Packages of the stack whose builds differ by operating system (compiled GPU kernels, Linux-only runtimes, macOS-
# only frameworks), and pure-Python ones people meet beside them (their "any" wheels run everywhere).
PACKAGES = (
    "triton", "pytorch-triton-rocm", "vllm", "sglang", "deepspeed", "flash-attn", "bitsandbytes", "xformers",
    "uvloop", "mamba-ssm", "causal-conv1d", "auto-gptq", "autoawq", "exllamav2", "flashinfer-python",
    "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12", "cupy-cuda12x", "onnxruntime-gpu", "tensorrt", "decord",
    "torch", "torchvision", "torchaudio", "jaxlib", "tensorflow", "llama-cpp-python", "liger-kernel", "unsloth",
    "fairscale", "ray", "deepspeed-mii", "torchao", "transformer-engine", "megatron-core", "lmdeploy", "gptqmodel",
    "sentencepiece", "tokenizers", "mlx", "mlx-lm", "intel-extension-for-pytorch", "torch-scatter", "spconv-cu120",
    "natten", "apache-tvm", "accelerate", "peft", "transformers", "trl", "llamafactory", "axolotl",
)
_SYSTEMS = (("win", "windows"), ("macosx", "macos"), ("manylinux", "linux"), ("musllinux", "linux"),
            ("linux", "linux"))
_CLASSIFIERS = {"Operating System :: Microsoft :: Windows": "windows", "Operating System :: MacOS": "macos",
                "Operating System :: POSIX :: Linux": "linux", "Operating System :: OS Independent": "any",
                "Operating System :: POSIX": "posix"}


def wheel_system(filename: str) -> str | None:
    """The system a wheel file runs on, from its platform tag (the last dash-separated part), or "any"."""
    if not filename.endswith(".whl"):
        return None
    tag = filename[:-4].rsplit("-", 1)[-1]
    if tag == "any":
        return "any"
    return next((system for prefix, system in _SYSTEMS if tag.startswith(prefix)), None)


def fetch(name: str, today: str) -> dict:
    url = f"https://pypi.org/pypi/{name}/json"
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 - a fixed https URL
        data = json.load(response)
    releases = []
    for version, files in data.get("releases", {}).items():
        kept = [f for f in files if not f.get("yanked")]
        if kept:
            uploaded = max(f["upload_time_iso_8601"] for f in kept)
            releases.append((uploaded, version, sorted(f["filename"] for f in kept)))
    releases.sort(reverse=True)
    classifiers = sorted(c for c in data["info"].get("classifiers") or [] if c.startswith("Operating System ::"))
    return {"source": url, "read": today, "name": data["info"]["name"], "classifiers": classifiers,
            "releases": {version: {"uploaded": uploaded[:10], "files": files}
                         for uploaded, version, files in releases[:RECENT]}}


def row(snapshot: dict) -> dict:
    systems: set[str] = set()
    sdist = False
    for release in snapshot["releases"].values():
        for filename in release["files"]:
            system = wheel_system(filename)
            if system:
                systems.add(system)
            elif filename.endswith((".tar.gz", ".zip")):
                sdist = True
    named = snapshot["classifiers"]
    classified = sorted({_CLASSIFIERS[c] for c in named if c in _CLASSIFIERS}
                        | {s for c in named for p, s in _CLASSIFIERS.items() if c.startswith(p + " ::")})
    versions = sorted(snapshot["releases"], key=lambda v: snapshot["releases"][v]["uploaded"])
    return {"wheels": sorted(systems), "sdist": sdist, "classifiers": classified,
            "releases": f"{versions[0]} .. {versions[-1]}" if versions else "", "source": snapshot["source"],
            "read": snapshot["read"]}


def table() -> dict:
    rows = {}
    for path in sorted(SNAPSHOTS.glob("*.json")):
        snapshot = json.loads(path.read_text(encoding="utf-8"))
        rows[snapshot["name"].lower()] = row(snapshot)
    return {"about": ("Per package of the stack: the systems (linux, windows, macos, any) its newest releases publish "
                      "wheels for on PyPI, whether they publish a source distribution, and the systems its own "
                      "'Operating System' classifiers name. Generated by scripts/make_wheel_platforms.py from "
                      "snapshots of PyPI's JSON API (scripts/knowledge_sources/pypi/, each with its URL and the date "
                      "read): do not edit by hand."),
            "packages": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fetch", action="store_true", help="read PyPI's JSON API first and keep the snapshots")
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped table differs from the snapshots'")
    args = ap.parse_args(argv)
    if args.fetch:
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        today = datetime.date.today().isoformat()
        for name in PACKAGES:
            try:
                snapshot = fetch(name, today)
            except OSError as exc:
                print(f"make_wheel_platforms: {name}: {exc}", file=sys.stderr)
                continue
            (SNAPSHOTS / f"{name}.json").write_text(json.dumps(snapshot, indent=1) + "\n", encoding="utf-8")
    text = json.dumps(table(), indent=1, sort_keys=True) + "\n"
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"make_wheel_platforms: {OUT.relative_to(ROOT)} differs from the snapshots: run "
                  "python scripts/make_wheel_platforms.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(json.loads(text)['packages'])} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
