"""When does a person see doctor's first verdict? Runs `rocmcheck doctor` (1) through a pipe, stamping each line as
it arrives, and (2) on a real terminal: a tmux pane 80 columns wide, captured every 0.5 s. Prints as it goes and
writes the recordings under benchmarks/recordings/. Usage (repo root):

    python benchmarks/bench_doctor_stream.py [-- doctor args, default: --no-train]

On a GPU machine run it as is (GPU probes on, train off); add `-- ` with no args for the full doctor.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "recordings"
VERDICT_WORDS = ("pass ", "warn ", "FAIL ", "skip ", "CRASH ")


def pipe(args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "rocmcheck", "doctor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO, bufsize=1)
    lines, first_verdict, stages = [], None, 0
    for line in proc.stdout:
        at = time.monotonic() - start
        lines.append(f"{at:7.2f}  {line.rstrip()}")
        print(lines[-1], flush=True)
        if first_verdict is None and line.startswith(VERDICT_WORDS):
            first_verdict = at
        if line.startswith("doctor ["):
            stages += 1
    proc.wait()
    total = time.monotonic() - start
    (OUT / "doctor-pipe.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"PIPE: first verdict at {first_verdict:.2f} s, {stages} stage lines, whole run {total:.1f} s, "
          f"exit {proc.returncode}", flush=True)


def tmux(args: list[str]) -> None:
    if shutil.which("tmux") is None:
        print("TMUX: tmux not installed; skipped (apt install tmux)", flush=True)
        return
    session = f"rocmcheck-bench-{os.getpid()}"
    cmd = f"cd {REPO} && PYTHONPATH={REPO} {sys.executable} -m rocmcheck doctor {' '.join(args)}; sleep 30"
    start = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "50", cmd], check=True)
    frames, first_verdict, last = [], None, ""
    try:
        while time.monotonic() - start < 600:
            time.sleep(0.5)
            pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout
            at = time.monotonic() - start
            if pane != last:
                frames.append(f"----- {at:6.2f} s -----\n{pane.rstrip()}")
                last = pane
            if first_verdict is None and any(l.startswith(VERDICT_WORDS) for l in pane.splitlines()):
                first_verdict = at
                print(f"TMUX: first verdict visible at {at:.2f} s", flush=True)
            if "Verdict:" in pane:
                break
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    (OUT / "doctor-tmux-80col.txt").write_text("\n".join(frames) + "\n", encoding="utf-8")
    print(f"TMUX: {len(frames)} distinct frames, run ended by {time.monotonic() - start:.1f} s", flush=True)


def main() -> None:
    args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else ["--no-train"]
    OUT.mkdir(parents=True, exist_ok=True)
    pipe(args)
    tmux(args)


if __name__ == "__main__":
    main()
