"""Score `rocmcheck triage` on the recorded issue threads (tests/fixtures/triage_threads/): per split (the frozen
test parts frozen-b/ to frozen-f/, and the tuning part tune/), the share of threads whose accepted cause
family is among the first three answers triage names (its causes, then the recorded threads most like the paste), and
the number of threads where a fix for another platform than the paste's own was offered among those three. Tuning
threads are scored against the similar-thread index less themselves (leave-one-out) with --in-process.

    python scripts/triage_score.py                      # every split, a line per split
    python scripts/triage_score.py --misses tune        # also each tuning thread whose family was missed
    python scripts/triage_score.py --in-process         # the same triage called in worker processes (fast)

Each thread's paste goes to the real command (`python -m rocmcheck triage --json -`, the paste on stdin), as a
person would run it; with --in-process, worker processes call the command's own functions (rocmcheck.triage.triage
and its causes_payload) on the same text, which skips an interpreter start per thread.
A cause id is mapped to its family by rocmcheck/knowledge/cause_families.json (the map triage reads); an id
missing there is listed at the end (the map has to learn it), and counts as no family.

"Another platform" is read from the fix texts of the three causes shown: a ROCm-only fix (a ROCm wheel index,
HSA_OVERRIDE_GFX_VERSION, /dev/kfd, amdgpu, rocminfo, hipcc...) to a CUDA, Windows, WSL or macOS paste, a
CUDA-only fix (a CUDA wheel index, the NVIDIA driver, nvcc...) to a ROCm or macOS paste, and a Linux-only host
fix (apt, modprobe, dkms, usermod, /dev/...) to a Windows or macOS paste, and a Linux kernel-driver fix to a WSL
paste (WSL uses the Windows driver). Threads whose platform is unknown or
CPU-only are not counted there. Also printed: the fail / warn verdicts per thread whose cause family is not the
accepted one (unrelated to the thread's cause).
The figures are printed, never asserted: this measures, it tunes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rocmcheck.runner import run_command  # noqa: E402

THREADS = ROOT / "tests" / "fixtures" / "triage_threads"
FAMILIES = ROOT / "rocmcheck" / "knowledge" / "cause_families.json"
# The test parts (README-frozen-?.md), then the tuning part.
SPLITS = ("frozen-b", "frozen-c", "frozen-d", "frozen-e", "frozen-f", "tune")
SHOWN = 3  # the causes a reply names (rocmcheck.triage.SHOWN)
# The parts the similar-thread index is made from (scripts/make_thread_index.py): each of their threads is scored
# with the index less that thread (leave-one-out) when triage runs in process; the command always uses the whole
# index, so there a tuning thread finds itself.
INDEXED = ("tune",)
TRIAGE_TIMEOUT_S = 120.0
OUTPUT_CAP = 4_000_000

ROCM_ONLY = re.compile(
    r"whl/rocm|rocm\d|HSA_OVERRIDE_GFX_VERSION|/dev/kfd|amdgpu|rocminfo|rocm-smi|amd-smi|hipcc|"
    r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|PYTORCH_ROCM_ARCH|/opt/rocm",
    re.IGNORECASE,
)
CUDA_ONLY = re.compile(r"whl/cu\d|\+cu\d|nvidia|nvcc|CUDA_VISIBLE_DEVICES|cuda-toolkit|libcuda", re.IGNORECASE)
LINUX_ONLY = re.compile(
    r"\bapt(-get)?\s|\bdnf\s|\byum\s|modprobe|dkms|usermod|/dev/|/etc/|ldconfig|"
    r"\bsudo\s",
    re.IGNORECASE,
)
HOST_DRIVER = re.compile(r"modprobe|dkms|nouveau|linux-headers|amdgpu-install(?!.*wsl)", re.IGNORECASE)
OTHER_PLATFORM = {  # paste platform -> the fix markers that belong to another platform
    "cuda-linux": (ROCM_ONLY,),
    "rocm-linux": (CUDA_ONLY,),
    "wsl": (HOST_DRIVER,),  # WSL runs either vendor's stack on the Windows driver: a vendor marker decides nothing
    "windows": (ROCM_ONLY, LINUX_ONLY),
    "macos": (ROCM_ONLY, CUDA_ONLY, LINUX_ONLY),
}


@dataclass
class Scored:
    name: str
    family: str
    platform: str
    shown: list[tuple[str, str | None]] = field(default_factory=list)  # (cause id, family)
    hit: bool = False  # the accepted family among the first SHOWN answers: the causes, then similar threads
    causes_hit: bool = False  # ... among the causes alone
    other_platform: str = ""  # the fix text that belongs to another platform, if one was offered
    unrelated: int = 0  # fail / warn verdicts of another cause family than the accepted one
    error: str = ""


def load_families(path: Path) -> dict[str, str | None]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data["families"])


def fix_texts(cause: dict) -> list[str]:
    fix = cause.get("fix") or {}
    return [str(fix.get(k) or "") for k in ("text", "why", "file")]


def other_platform_fix(platform: str, causes: list[dict]) -> str:
    for cause in causes:
        for text in fix_texts(cause):
            for marker in OTHER_PLATFORM.get(platform, ()):
                if text and marker.search(text):
                    return text
    return ""


def causes_in_process(paste: str, leave_out: str = "") -> tuple[list[dict], list[dict], list[dict]]:
    """The causes, the verdicts and the similar threads `rocmcheck triage --json -` prints for this paste, computed
    by the command's own functions; `leave_out`: a URL the similar-thread index is used without (the thread being
    scored, when the index holds it: leave-one-out). The index less that thread is made only where the answer shows
    similar threads (fewer than SHOWN causes): elsewhere none of them is among the first SHOWN answers."""
    from rocmcheck.triage import triage
    from rocmcheck.triage.similar import index

    t = triage([("-", paste + "\n")])
    causes = t.causes_payload()
    if leave_out:
        t.similar = t.nearest(index().without([leave_out])) if len(causes) < SHOWN else []
    return causes, [r.to_dict() for r in t.results()], t.similar_payload()


def score_one(path: Path, families: dict[str, str | None], unmapped: set[str], in_process: bool = False) -> Scored:
    rec = json.loads(path.read_text(encoding="utf-8"))
    s = Scored(path.stem, rec["cause_family"], rec["platform"])
    if in_process:
        causes, results, similar = causes_in_process(rec["paste"], rec["url"] if path.parent.name in INDEXED else "")
        return _judge(s, causes, families, unmapped, results, similar)
    res = run_command(
        [sys.executable, "-m", "rocmcheck", "triage", "--json", "-"],
        TRIAGE_TIMEOUT_S,
        input_text=rec["paste"] + "\n",
        cwd=str(ROOT),
        stdout_cap=OUTPUT_CAP,
    )
    if res.returncode not in (0, 1, 3) or not res.stdout.strip():
        s.error = res.describe_failure() if res.returncode is None else f"exit {res.returncode}: {res.stderr[-300:]}"
        return s
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError as exc:
        s.error = f"not JSON: {exc}"
        return s
    return _judge(s, doc.get("causes") or [], families, unmapped, doc.get("results") or [], doc.get("similar") or [])


def _judge(s: Scored, causes: list[dict], families: dict[str, str | None], unmapped: set[str],
           results: list[dict] | None = None, similar: list[dict] | None = None) -> Scored:
    # A fail or warn verdict whose cause family is not the thread's accepted one (or is no family at all) is
    # unrelated to what the thread was about: noise a reader has to read past.
    s.unrelated = sum(1 for r in results or [] if r.get("status") in ("fail", "warn")
                      and families.get(str(r.get("id"))) != s.family)
    top = sorted(causes, key=lambda c: c.get("rank", 0))[:SHOWN]
    for cause in top:
        cid = str(cause.get("id"))
        if cid not in families:
            unmapped.add(cid)
        s.shown.append((cid, families.get(cid)))
    s.causes_hit = any(fam == s.family for _, fam in s.shown)
    # The reply names the causes first, then the recorded threads most like the paste: the first SHOWN of both.
    threads = (similar or [])[:max(0, SHOWN - len(top))]
    s.shown += [(f"similar:{t.get('url')}", t.get("family")) for t in threads]
    s.hit = any(fam == s.family for _, fam in s.shown)
    s.other_platform = other_platform_fix(s.platform, top + [{"fix": {"text": t.get("fix")}} for t in threads])
    return s


def _score_in_worker(path: Path, families: dict[str, str | None]) -> tuple[Scored, set[str]]:
    unmapped: set[str] = set()
    return score_one(path, families, unmapped, in_process=True), unmapped


def score_splits(threads: Path, families: dict[str, str | None], unmapped: set[str], jobs: int = 2,
                 in_process: bool = False) -> dict[str, list[Scored]]:
    """Each split's threads, scored (by the command, or in worker processes)."""
    by_split: dict[str, list[Scored]] = {}
    for split in SPLITS:
        paths = sorted((threads / split).glob("*.json"))
        if in_process:
            with ProcessPoolExecutor(max_workers=max(1, jobs)) as procs:
                done = list(procs.map(_score_in_worker, paths, [families] * len(paths), chunksize=8))
            by_split[split] = [s for s, _ in done]
            for _, more in done:
                unmapped |= more
        else:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                by_split[split] = list(pool.map(lambda p: score_one(p, families, unmapped), paths))
    return by_split


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=Path, default=THREADS,
                    help="the folder holding frozen-b/ to frozen-f/ and tune/")
    ap.add_argument(
        "--misses",
        choices=("tune",),  # the frozen parts are read by their totals only
        action="append",
        default=[],
        help="list each thread of the tuning part whose accepted family was not among the three shown",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--in-process", action="store_true", help="call triage in worker processes, not the command")
    args = ap.parse_args(argv)
    if not all((args.threads / s).is_dir() for s in SPLITS):
        print(f"triage_score: {args.threads} holds no {', '.join(SPLITS)}", file=sys.stderr)
        return 2
    families = load_families(FAMILIES)
    unmapped: set[str] = set()
    by_split = score_splits(args.threads, families, unmapped, args.jobs, args.in_process)
    for split in SPLITS:
        rows = by_split[split]
        judged = [r for r in rows if not r.error]
        hits = sum(r.hit for r in judged)
        alone = sum(r.causes_hit for r in judged)
        counted = [r for r in judged if r.platform in OTHER_PLATFORM]
        other = sum(bool(r.other_platform) for r in counted)
        share = f"{100 * hits / len(judged):.0f}%" if judged else "n/a"
        print(
            f"{split}: {len(rows)} threads, accepted family among the top {SHOWN}: {hits}/{len(judged)} ({share}; "
            f"{alone} by the causes alone); "
            f"a fix for another platform: {other} of {len(counted)} platform-known threads; "
            f"unrelated fail/warn per thread: {sum(r.unrelated for r in judged) / max(1, len(judged)):.2f}"
            + (f"; {len(rows) - len(judged)} could not be scored" if len(judged) < len(rows) else "")
        )
    for split in args.misses:
        for r in by_split[split]:
            if r.error:
                print(f"  {split} {r.name}: not scored: {r.error}")
            elif not r.hit or r.other_platform:
                shown = ", ".join(f"{cid}={fam}" for cid, fam in r.shown) or "nothing"
                note = f"  [other-platform fix: {r.other_platform[:80]}]" if r.other_platform else ""
                print(f"  {split} {r.name} ({r.platform}, {r.family}): {shown}{note}")
    if unmapped:
        print("cause ids missing from cause_families.json: " + ", ".join(sorted(unmapped)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
