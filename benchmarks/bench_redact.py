"""Wall time of the redactor (rocmcheck/facts/redact.py `redact_value`) on adversarial and real inputs, against a
linear floor measured in the same process: `str.split()` over the same string (one pass that looks at every
character). A redactor that rescans from every position (the URL rule once took 34 s for 100 kB of one letter)
shows as a ratio that grows with the size; a linear one keeps its seconds per MB flat.

Every tool output, environment value and replayed result goes through redact_value, and the runner keeps up to
2,000,000 characters per stream, so 2 MB is the size that matters.

    python benchmarks/bench_redact.py [--sizes 100000,1000000,2000000] [--kinds a://,key=a/] [--repeat 1]

Prints one row per (size, kind): characters, seconds, the floor's seconds, the ratio, seconds per MB and the
Meter's steps per character (rocmcheck/facts/redact.py: what tests/test_redact_linear.py bounds).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rocmcheck.facts.redact import Meter, redact_value  # noqa: E402

# Units repeated to the size asked for: long runs of each pattern's character class and prefixes that nearly
# match (a scheme with no "@", a JWT segment with no second part, a name with no separator, an open quote).
ADVERSARIAL_UNITS = {
    "one letter": "x",
    "hex": "0123456789abcdef",
    "scheme run": "a+b.c-",
    "a://": "a://",
    "a://b: (no @)": "a://b:",
    "a://a/ then @": "a://a/",
    "x://a/y://u:": "x://a/y://u:",
    "user:pass@": "u:p@",
    "key=a/": "key=a/",
    "key=hex/": "key=0123456789abcdefghij/",
    "?key=": "x?key=",
    "a=": "a=",
    "password=": "password=",
    "PATH: ": "PATH: ",
    "--pwd=": "--pwd=",
    'pass="\\': 'pass="\\',
    '"': '"',
    'JSON "token": {': '"token": {',
    'JSON "token": [ closed': '"token": [1]',
    "eyJ-": "eyJ-",
    "eyJ segment.": "eyJaaaaaaaa.",
    "sk-": "sk-",
    "hf_": "hf_",
    "glpat-": "glpat-",
    "AKIA": "AKIA",
    "Bearer ": "Bearer ",
    "-----BEGIN ": "-----BEGIN ",
    "BEGIN PRIVATE KEY, no END": "-----BEGIN PRIVATE KEY-----\n-----END x\n",
    "slack webhook": "hooks.slack.com/services/",
    "spaces": " ",
    "colons": ":",
    "equals": "=",
    "at signs": "@",
    "dashes": "-",
    "dotted name": "a.",
    "backslashes": "\\",
    # the passes by position: an option's next word, a password tool's line, curl's -u, netrc
    "--token word": "--token ",
    "--tokenword": "--tokenx",
    "sshpass (no -p)": "sshpass x ",
    "docker login": "docker login ",
    "-u a:": "-u a:",
    "password word": "password ",
    "machine (no password)": "machine m ",
    "8Q~": "ab8Q~",
    "zero-width": "a\u200b",
    "colour code": "\x1b[1m",
}
# Real tool outputs (tests/fixtures/public), repeated to the size: the everyday case.
REAL_OUTPUTS = {
    "rocminfo (real)": "tests/fixtures/public/rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt",
    "hipconfig --full (real)": "tests/fixtures/public/hipconfig/hipconfig-full-rocm6.3.2-linuxmint-gfx90c.txt",
    "nvidia-smi -q (real)": "tests/fixtures/public/nvidia-smi/h200x2-q-ecc-performance-clock.txt",
}
DEFAULT_SIZES = (100_000, 1_000_000, 2_000_000)


def adversarial(kind: str, size: int) -> str:
    unit = ADVERSARIAL_UNITS[kind]
    return (unit * (size // len(unit) + 1))[:size]


def real(kind: str, size: int) -> str:
    text = (REPO / REAL_OUTPUTS[kind]).read_text(encoding="utf-8")
    return (text * (size // len(text) + 1))[:size]


def measure(text: str, repeat: int = 1) -> tuple[float, float, float]:
    """(best seconds of redact_value, best seconds of the str.split floor, steps per character)."""
    best = floor = float("inf")
    meter = Meter()
    for i in range(repeat):
        start = time.perf_counter()
        redact_value(text, meter if i == 0 else None)
        best = min(best, time.perf_counter() - start)
        start = time.perf_counter()
        text.split()
        floor = min(floor, time.perf_counter() - start)
    return best, floor, meter.steps / max(1, len(text))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    kinds = [k for k in args.kinds.split(",") if k] or [*ADVERSARIAL_UNITS, *REAL_OUTPUTS]
    print(f"{'size':>9}  {'kind':28} {'seconds':>8} {'floor s':>8} {'ratio':>7} {'s/MB':>6} {'steps/char':>10}")
    worst = 0.0
    for size in sizes:
        for kind in kinds:
            text = real(kind, size) if kind in REAL_OUTPUTS else adversarial(kind, size)
            seconds, floor, steps = measure(text, args.repeat)
            per_mb = seconds / (size / 1e6)
            worst = max(worst, per_mb)
            print(f"{size:>9}  {kind:28} {seconds:8.3f} {floor:8.4f} {seconds / max(floor, 1e-6):7.0f} "
                  f"{per_mb:6.2f} {steps:10.2f}", flush=True)
    print(f"worst: {worst:.2f} s per MB")


if __name__ == "__main__":
    main()
