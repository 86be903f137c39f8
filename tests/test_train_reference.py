"""The reference-curve tolerance, justified on real runs: a kernel change (eager vs SDPA attention)
stays well inside it; a run that learns at a third of the speed is far outside."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rocmcheck.train import reference, verdicts  # noqa: E402
from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig  # noqa: E402
from rocmcheck.train.run import run_smoke_train  # noqa: E402


def cpu_reference() -> list[float]:
    curve = reference.load_curves(BUNDLED_MODEL).get("cpu")
    assert curve, "the bundled model must ship a CPU reference curve"
    return curve["loss"]


def test_eager_attention_matches_the_sdpa_reference_with_margin():
    report = run_smoke_train(TrainConfig(device="cpu", attn="eager", profile=False, eval_prompts=8))
    verdict = {r.id: r for r in report.results}["train.reference_curve"]
    assert verdict.status.value == "pass", verdict.evidence  # attn is not part of the reference key
    worst = max(abs(w["diff"]) for w in verdict.data["windows"])
    assert worst < reference.ABS_TOL / 3, "kernel noise should use a third of the tolerance at most"


def test_a_run_that_learns_slower_is_outside_the_tolerance():
    report = run_smoke_train(TrainConfig(device="cpu", lr=3e-4, profile=False, eval_prompts=8))
    cmp = reference.compare([m["loss"] for m in report.metrics], cpu_reference())
    assert not cmp["ok"]
    assert abs(cmp["worst"]["diff"]) > 3 * cmp["worst"]["tolerance"]
    # And the verdict refuses to compare runs whose settings differ from the recorded one.
    verdict = {r.id: r for r in report.results}["train.reference_curve"]
    assert verdict.status.value == "skip" and "lr" in verdict.summary


def test_reference_lookup_reasons():
    key = TrainConfig().reference_key()
    assert reference.find_reference(BUNDLED_MODEL, "cpu", key)[0] is not None
    curve, why = reference.find_reference(BUNDLED_MODEL, "no-such-kind", key)
    assert curve is None and "no-such-kind" in why


def test_window_compare_on_the_shipped_curve():
    ref = cpu_reference()
    assert reference.compare(ref, ref)["ok"]
    shifted = [x + reference.ABS_TOL + reference.REL_TOL * x + 0.01 for x in ref]
    assert not reference.compare(shifted, ref)["ok"]


def test_a_rocm_run_is_judged_against_the_cuda_curve_naming_it():
    key = TrainConfig().reference_key()
    curve, why = reference.find_reference(BUNDLED_MODEL, "rocm", key)
    assert why == "" and curve["kind"] == "cuda" and curve["recorded_on"]["device"] == "NVIDIA H200"
    # The cross-vendor bound is the shipped tolerance: the cpu curve sits well inside it around the cuda one.
    cmp = reference.compare(cpu_reference(), curve["loss"])
    assert cmp["ok"] and max(abs(w["diff"]) / w["tolerance"] for w in cmp["windows"]) < 0.1
    bent = [x * 1.6 for x in curve["loss"]]
    verdict = verdicts.check_reference_curve(bent, curve, "", "rocm")
    assert verdict.status.value == "fail" and "departs from the cuda reference (NVIDIA H200)" in verdict.summary
    assert verdict.data["reference_kind"] == "cuda" and verdict.data["kind"] == "rocm"
    # A kind with its own curve uses it; one without and no cross-vendor curve still skips, saying why.
    assert reference.find_reference(BUNDLED_MODEL, "cpu", key)[0]["kind"] == "cpu"
    assert reference.find_reference(BUNDLED_MODEL, "xpu", key)[0] is None


def test_a_planted_rocm_device_compares_the_run_with_the_cuda_curve(monkeypatch):
    import torch

    from rocmcheck.train import run as train_run
    from rocmcheck.train.device import DeviceInfo

    mi300x = DeviceInfo(torch.device("cpu"), "rocm", "AMD Instinct MI300X", "gfx942", 1307.4, "CDNA3 MI300X", True)
    monkeypatch.setattr(train_run, "pick_device", lambda requested: mi300x)
    report = run_smoke_train(TrainConfig(device="cpu", profile=False, eval_prompts=8))
    verdict = {r.id: r for r in report.results}["train.reference_curve"]
    assert verdict.status.value == "pass", verdict.evidence
    assert verdict.summary == "loss curve matches the cuda reference (NVIDIA H200) within tolerance"
    assert "a rocm run has no curve of its own: judged against the cuda curve" in verdict.evidence[1]
    assert report.info["reference_curve"]["kind"] == "cuda" and report.info["reference_curve"]["run_kind"] == "rocm"
