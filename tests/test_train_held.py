"""The doctor's smoke-train child started early and held until the doctor's word arrives on its stdin
(rocmcheck/child.py, Word): real children over the child protocol. Sent on, it runs and reports as the plain stage
does (tests/test_train_cli.py: the real child run, spied on); let go, it leaves without a run; a run that hangs past
its own limit (counted from the word, not from the start) is called hung; and the doctor sends it on once the
earlier stages are done, by one plan made before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from rocmcheck import doctor
from rocmcheck.child import Word
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.doctor_stage import EarlyTrain

pytest.importorskip("torch")
pytest.importorskip("transformers")


def short() -> TrainConfig:
    return TrainConfig(device="auto", steps=10, profile=False, eval_prompts=8)


def test_the_word_is_said_once():
    word = Word()
    assert word.text(0.01) is None and not word.said
    word.go(device="cpu")
    word.stop()  # too late: the child may already be running
    assert word.text(0.01) == '{"go": true, "device": "cpu"}\n' and word.go_at is not None
    stopped = Word()
    stopped.stop()
    stopped.go(device="cpu")
    assert stopped.text(0.01) == ""  # stdin ends without a word: the child leaves


WAITER = ("import json, sys; from rocmcheck.child import wait_for_word; "
          "print(json.dumps(wait_for_word(float(sys.argv[1]))))")


@pytest.mark.parametrize("stdin, wait_s, heard", [
    ('{"go": true, "device": "cpu"}\n', 30, {"go": True, "device": "cpu"}),
    ("", 30, None),  # stdin ended without a word: let go
    ('{"device": "cpu"}\n', 30, None),  # not a go
    ("not json\n", 30, None),
])
def test_a_child_hears_the_word_on_its_stdin(stdin, wait_s, heard):
    proc = subprocess.run([sys.executable, "-c", WAITER, str(wait_s)], input=stdin, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout) == heard, proc.stderr


def test_a_child_that_never_hears_gives_up_after_its_wait():
    with subprocess.Popen([sys.executable, "-c", WAITER, "0.3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as proc:
        out, _ = proc.communicate(timeout=60)  # stdin stays open until the child is done: it gives up by itself
    assert out.strip() == "null"


def test_cancelled_it_leaves_without_a_run():
    early = EarlyTrain(120, 120, config=short())
    start = time.monotonic()
    early.cancel()
    run = early._runs[0]
    assert run.command.returncode == 0 and run.last("report") is None and not run.hung
    assert time.monotonic() - start < 60


def test_a_run_that_outlives_its_limit_after_the_gate_is_hung():
    early = EarlyTrain(0.3, 120, config=short())
    time.sleep(1)  # a wait before the word does not count against the run's limit
    results = early.go("cpu")
    assert [r.id for r in results] == ["train.run"] and results[0].status.value == "fail"
    assert "hung" in results[0].summary and "0.3 s" in results[0].summary


def test_the_doctor_sends_its_early_child_on_and_lets_it_go_when_torch_is_missing(monkeypatch):
    calls: list = []

    class Recorder:
        def go(self, device, on_step=None):
            calls.append(("go", device))
            return []

        def cancel(self):
            calls.append(("cancel",))

    with_torch = SimpleNamespace(torch={"version": "2.13.0", "device_count": 0})
    doctor.run_train_stage(with_torch, doctor.DoctorOptions(), Recorder())
    doctor.run_train_stage(SimpleNamespace(torch={}), doctor.DoctorOptions(), Recorder())
    assert calls == [("go", "cpu"), ("cancel",), ("cancel",)]  # cancel after go decides nothing new
    for opts in (doctor.DoctorOptions(train=False), doctor.DoctorOptions(only=("gpu",))):
        assert doctor.start_early_train(opts, doctor.plan_stages(opts, [])) is None
    # The child waits no longer than the stages before it may take: facts, and the GPU probes' budget.
    assert doctor.plan_stages(doctor.DoctorOptions(gpu_probes=False), []).before_train_s < \
        doctor.plan_stages(doctor.DoctorOptions(), []).before_train_s


def test_one_plan_decides_the_probes_and_the_fine_tune():
    plan = doctor.plan_stages(doctor.DoctorOptions(level=1), [])
    assert plan.probes and plan.probe_stage and plan.train and plan.probe_budget_s > 0 and plan.python_probes
    assert doctor.plan_stages(doctor.DoctorOptions(only=("probe.memory",)), []).probes == ("memory",)
    assert doctor.plan_stages(doctor.DoctorOptions(only=("probe.nonesuch",)), []).probes is None
    quiet = doctor.plan_stages(doctor.DoctorOptions(gpu_probes=False, train=False, only=("os",)), [])
    assert quiet.probes == () and not quiet.python_probes and quiet.probe_budget_s == 0
