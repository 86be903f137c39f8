"""smoke-train from the outside: bad input exits 2 with one line (--model on another checkpoint:
test_train_own_model.py), and the doctor stage turning a hung or crashing child into a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import make_tool

from rocmcheck.child import run_child
from rocmcheck.train import doctor_stage
from rocmcheck.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(env or os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


@pytest.mark.parametrize("make_bad, expected", [
    (lambda p: p / "missing", "not a directory"),
    (lambda p: p, "no config.json"),
    (lambda p: (p / "config.json").write_text('{"model_type": "wav2vec2"}') and p, "cannot build it as a causal LM"),
    (lambda p: (p / "config.json").write_text('{"model_type": "no-such-model"}') and p, "cannot build it as a causal"),
    (lambda p: (p / "config.json").write_text("{not json") and p, "config.json is unreadable"),
])
def test_bad_model_dir_exits_2_with_one_line(tmp_path, make_bad, expected):
    proc = cli("--model", str(make_bad(tmp_path)))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_refusal_with_json_prints_one_document_and_its_line(tmp_path):
    """An audio encoder's folder: a model_type transformers knows, but builds no causal LM for."""
    import jsonschema

    from rocmcheck.report.json_report import schema

    (tmp_path / "config.json").write_text('{"model_type": "wav2vec2"}')
    proc = cli("--model", str(tmp_path), "--json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "model_type 'wav2vec2': the installed transformers" in line and "cannot build it as a causal LM" in line
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    [verdict] = doc["results"]
    assert doc["verdict"] == "fail" and verdict["id"] == "train.input" and verdict["summary"] in line
    assert verdict["fix"]["text"] == "pip install -U transformers"
    proc = cli("--steps", "3", "--json")  # any refused option: the same document, with its own line
    assert proc.returncode == 2 and json.loads(proc.stdout)["results"][0]["fix"]["kind"] == "note"


def test_bad_numbers_exit_2():
    proc = cli("--steps", "3")
    assert proc.returncode == 2 and "--steps must be at least 10" in proc.stderr


def test_doctor_stage_hung_child_becomes_a_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(make_tool(tmp_path, "python", hang=True)))
    [verdict] = doctor_stage.run_train_stage(timeout_s=2, device="cpu")
    assert verdict.id == "train.run" and verdict.status.value == "fail" and "hung" in verdict.summary


def test_doctor_stage_crashing_child_becomes_a_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(make_tool(tmp_path, "python", crash_signal="SEGV")))
    [verdict] = doctor_stage.run_train_stage(timeout_s=30, device="cpu")
    assert verdict.status.value == "fail" and "signal 11" in verdict.summary and verdict.fix


def test_doctor_stage_garbage_output_is_a_crash_not_a_pass(tmp_path, monkeypatch):
    fake = make_tool(tmp_path, "python", stdout="Segmentation fault?\n", exit_code=1)
    monkeypatch.setattr(sys, "executable", str(fake))
    [verdict] = doctor_stage.run_train_stage(timeout_s=30, device="cpu")
    assert verdict.status.value == "crash"


def test_doctor_stage_real_child_speaks_the_child_protocol(monkeypatch):
    pytest.importorskip("torch")
    # The real interpreter and the real train child, spied on, started early and held until its word as the doctor
    # starts it (rocmcheck/child.py, Word), then sent on; the config only shortens the run for the suite.
    # Its steps reach the doctor's display as they arrive (on_step), each with its loss and speed.
    calls, steps = [], []

    def spy(module, request, timeout_s, **kw):
        calls.append((module, sorted(request["held"])))
        run = run_child(module, request, timeout_s, **kw)
        calls.append([e["event"] for e in run.events][-1])
        return run

    monkeypatch.setattr(doctor_stage, "run_child", spy)
    early = doctor_stage.EarlyTrain(240, 240, config=TrainConfig(device="auto", steps=12, profile=False))
    results = early.go("cpu", on_step=lambda step, total, event: steps.append((step, total, sorted(event))))
    early.cancel()  # what the doctor's stage does on every way out: nothing, once it was sent on
    assert calls == [("rocmcheck.train.child", ["timeout_s", "wait_s"]), "report"]
    assert results[0].data["duration_s"] < 240  # counted from the word
    assert [(s, n) for s, n, _ in steps] == [(s, 12) for s in range(1, 13)]
    assert all({"loss", "tokens_per_s"} <= set(keys) for _, _, keys in steps)
    by_id = {r.id: r for r in results}
    assert by_id["train.run"].status.value == "pass"
    assert "(CPU: " in by_id["train.run"].summary and " thread" in by_id["train.run"].summary  # its thread choice
    assert by_id["train.finite"].status.value == "pass" and by_id["train.reload"].status.value == "pass"
    assert "train.memory_leak" in by_id


def test_doctor_stage_bad_request_is_refused_input(tmp_path, monkeypatch):
    # A child that does not know a setting exits 2 with one line: the stage says the input was refused.
    monkeypatch.setattr(doctor_stage.train_child, "train_request", lambda cfg: {"config": {"no_such_setting": 1}})
    [verdict] = doctor_stage.run_train_stage(timeout_s=60, device="cpu")
    assert verdict.status.value == "fail" and "refused its input" in verdict.summary
    assert "no_such_setting" in verdict.summary
