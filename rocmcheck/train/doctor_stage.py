"""The doctor's last stage: the default smoke-train in a child process, so a crash (segfault in HIP
init, a kernel fault) or a hang becomes a verdict instead of taking the doctor down. No torch here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rocmcheck.facts.runner import run_command
from rocmcheck.result import CheckResult, Status, failed, passed


def run_train_stage(timeout_s: float = 180.0, device: str = "auto") -> list[CheckResult]:
    argv = [sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--device", device]
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    # The child must import this same rocmcheck, installed or run from a checkout.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    res = run_command(argv, timeout=timeout_s, env=env)
    tail = [line for line in res.stderr.strip().splitlines()[-5:]]
    if res.timed_out:
        return [failed(f"smoke-train did not finish within {timeout_s:g} s (hung)",
                       "rocmcheck smoke-train --device cpu   (if that finishes, the GPU hangs; check dmesg for GPU resets)",
                       tail, timeout_s=timeout_s, id="train.run")]
    results = _parse(res.stdout)
    if results is None:
        if res.returncode is not None and res.returncode < 0:
            return [failed(f"smoke-train {res.describe_failure().split(' ', 1)[1]}",
                           "rocmcheck smoke-train --device cpu   (if that works, the GPU stack crashes: see rocmcheck doctor)", tail, id="train.run")]
        if res.returncode == 2:
            return [failed("smoke-train refused its input: " + (tail[-1] if tail else "exit 2"),
                           "rocmcheck smoke-train --help", tail, id="train.run")]
        return [CheckResult("train.run", Status.CRASH, f"smoke-train gave no verdicts ({res.describe_failure()})", tail,
                            "this is a rocmcheck bug: please report it with this output")]
    if any(r.id == "train.run" for r in results):  # the child caught its own crash and said so
        return results
    return [passed(f"smoke-train ran to the end in {res.duration_s:.1f} s", duration_s=res.duration_s, id="train.run")] + results


def _parse(stdout: str) -> list[CheckResult] | None:
    """The JSON object is the last line of stdout; anything a library printed before it is ignored."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return [CheckResult.from_dict(d) for d in json.loads(line)["results"]]
            except (ValueError, KeyError, TypeError):
                return None
    return None
