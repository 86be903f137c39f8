"""The doctor's smoke-train child started early and held at a gate (rocmcheck/train/gate.py): real children over the
child protocol. Opened, it runs and reports as the plain stage does (tests/test_train_cli.py: the real child run,
spied on); cancelled, it leaves without a run; a run that
hangs past its own limit (counted from the gate opening, not from the start) is called hung; and the doctor sends it
on once the earlier stages are done."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from rocmcheck import doctor
from rocmcheck.train import gate
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.doctor_stage import EarlyTrain

pytest.importorskip("torch")
pytest.importorskip("transformers")


def short() -> TrainConfig:
    return TrainConfig(device="auto", steps=10, profile=False, eval_prompts=8)


def test_the_gate_is_decided_once_and_atomically():
    g = gate.Gate()
    try:
        assert gate.read_decision(g.path) is None
        g.open("cpu")
        g.cancel()  # too late: the child may already be running
        assert gate.read_decision(g.path) == {"device": "cpu"} and g.opened_at is not None
        assert [p.name for p in g.folder.iterdir()] == [gate.FILE_NAME]  # nothing half-written left beside it
        assert g.folder.stat().st_mode & 0o077 == 0  # only this user can read or plant a decision
    finally:
        g.remove()
    assert not g.folder.exists()
    g.cancel()  # after the folder is gone too (the doctor lets every early child go at the end of its stage)


def test_a_child_that_never_hears_gives_up_after_its_wait(tmp_path):
    start = time.monotonic()
    spec = {"path": str(tmp_path / gate.FILE_NAME), "wait_s": 0.3, "timeout_s": 60}
    assert gate.wait_at_gate(spec, short()) is None
    assert time.monotonic() - start < 30  # the imports ahead, then at most the wait
    (tmp_path / gate.FILE_NAME).write_text(json.dumps({"device": "sideways"}))
    assert gate.wait_at_gate(spec, short()) is None  # not a device this run can take


def test_cancelled_it_leaves_without_a_run():
    early = EarlyTrain(120, 120, config=short())
    start = time.monotonic()
    early.cancel()
    run = early._runs[0]
    assert run.command.returncode == 0 and run.last("report") is None and not run.hung
    assert time.monotonic() - start < 60 and not early.gate.folder.exists()


def test_a_run_that_outlives_its_limit_after_the_gate_is_hung():
    early = EarlyTrain(0.3, 120, config=short())
    time.sleep(1)  # a wait before the gate opens does not count against the run's limit
    results = early.go("cpu")
    assert [r.id for r in results] == ["train.run"] and results[0].status.value == "fail"
    assert "hung" in results[0].summary and "0.3 s" in results[0].summary


def test_the_doctor_sends_its_early_child_on_and_lets_it_go_when_torch_is_missing(monkeypatch):
    calls: list = []

    class Recorder:
        def go(self, device):
            calls.append(("go", device))
            return []

        def cancel(self):
            calls.append(("cancel",))

    with_torch = SimpleNamespace(torch={"version": "2.13.0", "device_count": 0})
    doctor.run_train_stage(with_torch, doctor.DoctorOptions(), Recorder())
    doctor.run_train_stage(SimpleNamespace(torch={}), doctor.DoctorOptions(), Recorder())
    assert calls == [("go", "cpu"), ("cancel",), ("cancel",)]  # cancel after go decides nothing new
    assert doctor.start_early_train(doctor.DoctorOptions(train=False)) is None
    assert doctor.start_early_train(doctor.DoctorOptions(only=("gpu",))) is None
    # The child waits no longer than the stages before it may take: facts, and the GPU probes' budget.
    assert doctor._time_before_train_s(doctor.DoctorOptions(gpu_probes=False)) < \
        doctor._time_before_train_s(doctor.DoctorOptions())
