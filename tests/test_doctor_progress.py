"""What the doctor shows while its fine-tune runs: on a machine without a GPU a line saying the fine-tune runs on
the CPU, then its steps (count, loss, tokens/s, time left) as the child reports them and one line with the
estimate of the whole run from its first steps' pace; and --fixes-only, which never waits for the fine-tune."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from rocmcheck import doctor
from rocmcheck.report.progress import Progress, stream_console

REPO = Path(__file__).resolve().parents[1]


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


class SteppingChild:
    """The early train child's interface (train/doctor_stage.py, EarlyTrain) reporting 20 steps as a CPU run does:
    each step's event as the child protocol carries it."""

    def __init__(self) -> None:
        self.devices: list[str] = []

    def go(self, device, on_step=None):
        self.devices.append(device)
        for step in range(1, 21):
            time.sleep(0.01)
            on_step(step, 20, {"event": "step", "step": step, "steps": 20, "loss": 8.0 / step, "tokens_per_s": 1200.0})
        return []

    def cancel(self):
        pass


def test_on_a_machine_without_a_gpu_the_doctor_says_cpu_then_shows_steps_and_the_estimate():
    pipe = Pipe()
    child = SteppingChild()
    no_gpu = SimpleNamespace(torch={"version": "2.13.0", "device_count": 0})
    with Progress(stream_console(pipe), prefix="doctor ") as progress:
        progress.begin("smoke-train (the bundled tiny LLaMA)")
        doctor.run_train_stage(no_gpu, doctor.DoctorOptions(), child, progress)
    lines = pipe.getvalue().splitlines()
    assert child.devices == ["cpu"]
    cpu = next(i for i, line in enumerate(lines) if line.startswith("No GPU: the smoke-train fine-tune runs on the"))
    steps = [i for i, line in enumerate(lines) if "smoke-train (the bundled tiny LLaMA): " in line]
    assert steps and cpu < steps[0]  # said before the first step
    assert "1/20  loss 8.000  1,200 tok/s" in lines[steps[0]]
    [estimate] = [line for line in lines if line.startswith("CPU fine-tune: about ")]
    assert "for the other 17 steps (measured: the pace of steps 2-3, 1,200 tok/s)" in estimate
    assert any(line.endswith(" left") for line in lines[steps[0] + 1:])  # the later steps carry the time left


def test_with_a_gpu_there_is_no_cpu_line():
    pipe = Pipe()
    with Progress(stream_console(pipe), prefix="doctor ") as progress:
        progress.begin("smoke-train")
        doctor.run_train_stage(SimpleNamespace(torch={"version": "2.13.0", "device_count": 1}),
                               doctor.DoctorOptions(), SteppingChild(), progress)
    assert "CPU" not in pipe.getvalue() and "20/20" in pipe.getvalue()


def test_fixes_only_never_waits_for_the_fine_tune():
    """A real doctor: --fixes-only skips the train stage and says why (seen with --json, which shows every
    verdict), even with the stage asked for by name."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--fixes-only", "--json", "--only", "train",
                           "--no-gpu-probes"], capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    results = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    assert results["train.stage"]["status"] == "skip"
    assert "--fixes-only prints without waiting for it" in results["train.stage"]["summary"]
    assert not any(name.startswith("train.") and name != "train.stage" for name in results)
