"""The doctor's default text report puts the problems first: the header, only the verdicts that warn, fail or
crash, each group under the one fix that answers it, then a tally per area; `-v` prints every verdict. Run for
real on this machine (a CPU box: no GPU is a failure), and on results built here for the grouping."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from rich.console import Console

from rocmcheck.checks import AREA_TITLES
from rocmcheck.fixes import docker_run, note
from rocmcheck.report import render
from rocmcheck.result import CheckResult, Status

MAX_LINES = 40  # one screen


def doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", *args], capture_output=True,
                          text=True, timeout=300)


def test_this_cpu_box_fits_one_screen_with_every_problem_and_its_fix():
    text, report = doctor(), json.loads(doctor("--json").stdout)
    assert text.returncode == 1, text.stderr[-2000:]
    lines = (text.stdout + text.stderr).splitlines()
    assert len(lines) < MAX_LINES, text.stdout
    problems = [r for r in report["results"] if r["status"] in ("warn", "fail", "crash")]
    assert any(r["id"] == "gpu.present" for r in problems)
    for r in problems:
        assert r["id"] in text.stdout, r["id"]
        assert r["fix"]["text"] in text.stdout, r["id"]
    passed = [r["id"] for r in report["results"] if r["status"] == "pass"]
    assert not [i for i in passed if i in text.stdout]  # a passing check is in the tally, not a row of its own
    assert "Operating system ✓" in text.stdout and "Verdict: FAIL" in text.stdout
    commands = {r["fix"]["text"] for r in problems if r["fix"]["kind"] == "shell"}
    for command in commands:  # a fix several checks share is printed once
        assert text.stdout.count(command) == 1, command


def test_verbose_prints_every_verdict():
    proc, report = doctor("-v", "--no-gpu-probes"), json.loads(doctor("--json", "--no-gpu-probes").stdout)
    for r in report["results"]:
        assert r["id"] in proc.stdout, r["id"]


def _result(check_id: str, status: Status, fix=None, summary: str = "said") -> CheckResult:
    return CheckResult(check_id, status, summary, [], fix, area=check_id.split(".")[0])


def test_a_shared_fix_is_printed_once_with_the_checks_it_answers_worst_first():
    flags = docker_run("restart the container with these flags")
    results = [_result("os.release", Status.PASS), _result("container.flags", Status.WARN, flags),
               _result("gpu.present", Status.FAIL, docker_run("run where there is a GPU")),
               _result("host.memlock", Status.WARN, note("raise the locked-memory limit")),
               _result("driver.amdgpu", Status.SKIP, summary="no AMD GPU stack found (nothing to judge)")]
    out = io.StringIO()
    render.print_problems(results, Console(file=out, width=200), header=["machine"], area_titles=AREA_TITLES)
    text = out.getvalue()
    assert text.count(flags.text) == 1
    rows = [line.split()[1] for line in text.splitlines() if line.split()[:1] in (["FAIL"], ["warn"])]
    assert rows == ["gpu.present", "container.flags", "host.memlock"]
    assert text.index("container.flags") < text.index(flags.text) < text.index("host.memlock")
    assert "do: raise the locked-memory limit" in text
    assert "Operating system ✓ 1 · Driver – skipped: no AMD GPU stack found · Container ! 1 · GPUs ✗ 1" in text
    assert "os.release" not in text


def test_an_ascii_console_gets_an_ascii_tally():
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    results = [_result("os.release", Status.PASS), _result("os.kernel", Status.SKIP, summary="skipped: no kernel")]
    render.print_problems(results, Console(file=out, width=80), area_titles=AREA_TITLES)
    out.flush()
    assert "Operating system ok 1 - 1 skipped" in out.buffer.getvalue().decode("ascii")
