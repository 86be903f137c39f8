"""Triage throughput on big pastes, beside `grep -c` of the same text.

    python benchmarks/triage_throughput.py               # 1, 8 and 64 MiB
    python benchmarks/triage_throughput.py --sizes 1 8   # some of them
    python benchmarks/triage_throughput.py --profile 8   # cProfile of the in-process triage of 8 MiB (top 25)

The text is real-looking: the pastes in tests/fixtures/pastes (collect_env, rocminfo, ds_report, tracebacks, docker
run lines, NCCL and HIP logs, whole issue threads), concatenated in a fixed order and repeated to the size asked.
A size up to one paste's cap (rocmcheck.triage.inputs.MAX_PASTE_BYTES) is one file; a bigger one is cut into files
of that cap, given together, as a person attaching several logs would: triage reads them up to the total bound
(MAX_TOTAL_BYTES) and says in one line what it did not read. Each size runs `rocmcheck triage --all FILE...` in a
fresh process (as a person runs it; the start-up is in the time) and `grep -c invalid FILE...` on the same files.
Printed per size: seconds and CPU seconds (user + system, from the process's rusage), MB/s over the bytes given and
over the bytes triage read (wall time) and over the bytes read per CPU second, the peak resident memory of the
triage process (its rusage), grep's seconds and MB/s, and the load average (1 minute) after the row: on a shared box
the wall seconds move with the load (the CPU seconds much less), so compare rows taken one after the other."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PASTES = REPO / "tests" / "fixtures" / "pastes"
sys.path.insert(0, str(REPO))

from rocmcheck.triage.inputs import MAX_PASTE_BYTES, MAX_TOTAL_BYTES  # noqa: E402
from rocmcheck.units import MIB  # noqa: E402


def corpus() -> bytes:
    """Every paste fixture, in path order, each ended with a newline."""
    parts = []
    for path in sorted(PASTES.rglob("*")):
        if path.is_file() and path.suffix in (".txt", ".log", ".md", "") and path.name != "README.md":
            data = path.read_bytes()
            if b"\x00" not in data:
                parts.append(data if data.endswith(b"\n") else data + b"\n")
    return b"".join(parts)


def text_of(size: int, base: bytes) -> bytes:
    out = base * (size // len(base) + 1)
    cut = out.rfind(b"\n", 0, size)
    return out[:cut + 1]


def write_files(folder: Path, size: int, base: bytes) -> list[Path]:
    text = text_of(size, base)
    files = []
    for i in range(0, len(text), MAX_PASTE_BYTES):
        chunk = text[i:i + MAX_PASTE_BYTES]
        if len(chunk) == MAX_PASTE_BYTES:  # end the file at a line, the rest goes to the next
            chunk = chunk[:chunk.rfind(b"\n") + 1]
        path = folder / f"paste-{size // MIB}m-{len(files)}.txt"
        path.write_bytes(chunk)
        files.append(path)
    # the cut above moves bytes between files; make the files hold the whole text
    whole = b"".join(p.read_bytes() for p in files)
    if len(whole) < len(text):
        files[-1].write_bytes(files[-1].read_bytes() + text[len(whole):])
    return files


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, int, str]:
    """(seconds, CPU seconds, exit code, peak resident KiB, stderr's last line) of one fresh process."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, proc.returncode, usage.ru_maxrss, (err.strip().splitlines() or [""])[-1]


def run(sizes: list[int]) -> None:
    base = corpus()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"text: tests/fixtures/pastes, {len(base) / MIB:.2f} MiB repeated; one paste's cap "
          f"{MAX_PASTE_BYTES // MIB} MiB, all pastes' {MAX_TOTAL_BYTES // MIB} MiB; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'size':>6} {'files':>5} {'triage s':>9} {'cpu s':>6} {'MB/s given':>10} {'MB/s read':>9} "
          f"{'MB/s cpu':>8} {'peak MiB':>8} {'exit':>4} {'grep s':>7} {'grep MB/s':>9} {'load':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        # Bytecode compiled once beforehand, into the temporary folder, as an installed package has it (with
        # PYTHONDONTWRITEBYTECODE each run compiled every module from source, a fixed cost in every row).
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        (Path(tmp) / "warm.txt").write_text("warm-up\n")
        timed([sys.executable, "-m", "rocmcheck", "triage", str(Path(tmp) / "warm.txt")], env)
        for size_mib in sizes:
            files = write_files(Path(tmp), size_mib * MIB, base)
            given = sum(p.stat().st_size for p in files)
            read = min(given, MAX_TOTAL_BYTES)
            seconds, cpu, code, peak_kib, last = timed(
                [sys.executable, "-m", "rocmcheck", "triage", "--all", *map(str, files)], env)
            grep_s, _, _, _, _ = timed(["grep", "-c", "invalid", *map(str, files)], env)
            print(f"{size_mib:>4} Mi {len(files):>5} {seconds:>9.2f} {cpu:>6.2f} {given / 1e6 / seconds:>10.2f} "
                  f"{read / 1e6 / seconds:>9.2f} {read / 1e6 / cpu:>8.2f} {peak_kib / 1024:>8.0f} {code:>4} "
                  f"{grep_s:>7.3f} {given / 1e6 / grep_s:>9.0f} {os.getloadavg()[0]:>5.1f}")
            if given > MAX_TOTAL_BYTES:
                print(f"       triage said: {last}")


def profile(size_mib: int) -> None:
    import cProfile
    import pstats

    from rocmcheck.triage import triage
    from rocmcheck.triage.inputs import read_inputs

    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), size_mib * MIB, corpus())
        texts = read_inputs([str(p) for p in files])
        prof = cProfile.Profile()
        prof.enable()
        triage(texts)
        prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 64], metavar="MIB")
    parser.add_argument("--profile", type=int, metavar="MIB")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
    else:
        run(args.sizes)


if __name__ == "__main__":
    main()
