"""Keep the base image's torch while installing rocmcheck into it.

  keep_torch.py snapshot FILE   write pip constraints pinning each torch-family distribution to the
                                version installed now, or forbidding it ("<0") when it is absent
  keep_torch.py verify FILE     exit 1 if any of them changed since the snapshot

With PIP_CONSTRAINT=FILE pip cannot replace a ROCm (or CUDA) build of torch with another wheel: the
resolver fails instead. verify proves it afterwards. Standard library only: it runs before rocmcheck
and its dependencies are installed.
"""

from __future__ import annotations

import sys
from importlib import metadata

# Distributions that carry (or must match) the base image's GPU build of PyTorch.
FAMILY = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton-rocm", "pytorch-triton", "triton-rocm")


def installed() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in FAMILY:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def snapshot(path: str) -> int:
    lines = [f"{name}=={version}" if version else f"{name}<0" for name, version in installed().items()]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print("keep_torch: pinned " + ", ".join(lines))
    return 0


def verify(path: str) -> int:
    now = installed()
    changed = []
    with open(path, encoding="utf-8") as fh:
        for line in fh.read().split():
            if "==" in line:
                name, version = line.split("==", 1)
            else:
                name, version = line.split("<", 1)[0], None
            if now.get(name) != version:
                changed.append(f"{name}: {version or 'absent'} -> {now.get(name) or 'absent'}")
    if changed:
        print("keep_torch: the base image's torch stack changed: " + "; ".join(changed), file=sys.stderr)
        return 1
    print("keep_torch: torch stack unchanged")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("snapshot", "verify"):
        print("usage: keep_torch.py snapshot|verify FILE", file=sys.stderr)
        return 2
    return snapshot(argv[2]) if argv[1] == "snapshot" else verify(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
