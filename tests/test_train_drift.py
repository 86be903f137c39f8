"""smoke-train --drift: the bf16 run against an fp32 run of the same steps (rocmcheck/train/drift.py, judged by
verdicts.check_drift).

Two kinds of test. The judge on curves recorded on this CPU (tests/fixtures/drift/curves.json: healthy runs of the
bundled model over ten seeds, with LoRA and --pure-bf16, random-init LLaMAs, and the planted faults below), so
every threshold is held to the runs it was set on. And real runs with the faults planted through the run's own
hooks, which reach the bf16 run only (the fp32 reference is built apart, without them):
  - a backward kernel that returns every gradient 1000x too large (a hook on every parameter's gradient);
  - a loss spike: the weights corrupted once, after step K's backward;
  - a slowly drifting bf16: noise on the final norm's output that grows with the step.
Plus the plumbing: --drift through the CLI on a random-init --model, the doctor's train stage at --level 2, the
refusals, and a run without --drift that is unchanged."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from model_folders import make_random_llama

from rocmcheck.errors import BadInput
from rocmcheck.result import Status
from rocmcheck.train import verdicts
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.drift import sampled
from rocmcheck.train.request import decide

REPO = Path(__file__).resolve().parents[1]
RECORDED = json.loads((REPO / "tests" / "fixtures" / "drift" / "curves.json").read_text())["runs"]
HEALTHY = sorted(name for name, run in RECORDED.items() if run["fault"] is None)


def judge(name: str, **changes):
    run = RECORDED[name]
    return verdicts.check_drift(run["bf16"], run["fp32"], precision="bf16 autocast over fp32 weights", **changes)


def strict_json(result) -> str:
    return json.dumps(result.to_dict(), allow_nan=False)  # raises on a NaN or inf left in the data


# -- the judge on recorded curves ----------------------------------------------------------------------------------
def test_recorded_runs_cover_the_healthy_kinds_the_thresholds_were_set_on():
    settings = [RECORDED[name]["settings"] for name in HEALTHY]
    assert len({s.get("seed") for s in settings if s.get("model") is None and "lora_rank" not in s}) >= 10
    assert any(s.get("lora_rank") for s in settings) and any(s.get("pure_bf16") for s in settings)
    assert any(s.get("model") for s in settings)


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_recorded_runs_pass(name):
    result = judge(name)
    assert result.status is Status.PASS, result.summary
    assert result.data["worst_loss_excess"] < 0.8  # the healthy worst (LoRA) used 66% of the tolerance
    assert 1 / verdicts.DRIFT_NORM_WARN_FACTOR < result.data["norm_ratio_min"] <= result.data["norm_ratio_max"] \
        < verdicts.DRIFT_NORM_WARN_FACTOR
    assert result.summary.startswith("bf16 tracks fp32 over") and result.fix is None
    strict_json(result)


def test_gradients_scaled_1000x_fail_as_exploded_norms_from_step_0_though_the_loss_is_unchanged():
    result = judge("scale1000-120")
    assert result.status is Status.FAIL, result.summary
    assert [f["kind"] for f in result.data["findings"]] == ["norm"]  # clipping and Adam hide the scale from the loss
    assert result.data["started_at"] == 0
    assert "exploded" in result.summary and result.data["norm_ratio_min"] > 500
    assert result.fix.kind.value == "shell" and result.fix.text == "rocmcheck smoke-train --drift --attn eager"
    assert "RMSNorm in fp32" in result.fix.why and "upcast" in result.fix.why
    assert any(line.startswith("steps 0-9: loss") for line in result.evidence)


def test_gradients_scaled_10x_still_fail_and_3x_warn():
    assert judge("scale10-40").status is Status.FAIL
    run = RECORDED["bundled-s0"]
    tripled = {"loss": run["bf16"]["loss"], "grad_norm": [3.5 * v for v in run["bf16"]["grad_norm"]]}
    result = verdicts.check_drift(tripled, run["fp32"])
    assert result.status is Status.WARN and result.data["findings"][0]["kind"] == "norm", result.summary


def test_gradients_that_vanish_fail_too():
    run = RECORDED["bundled-s0"]
    vanished = {"loss": run["bf16"]["loss"], "grad_norm": [v / 100 for v in run["bf16"]["grad_norm"]]}
    result = verdicts.check_drift(vanished, run["fp32"])
    assert result.status is Status.FAIL and "vanished" in result.summary


@pytest.mark.parametrize("name", ["spike60-120-s1", "spike60-120-s3"])
def test_weights_corrupted_after_step_60_fail_as_a_spike_at_step_61_that_does_not_come_back(name):
    result = judge(name)
    assert result.status is Status.FAIL, result.summary
    assert result.data["started_at"] == 61 and result.data["spike"]["came_back"] is False
    assert result.summary.startswith("bf16 loss spikes at step 61 and did not come back")
    assert "diverged" in result.summary  # the windows after it are out too
    assert result.fix.text == "rocmcheck smoke-train --drift --attn eager"  # on a CPU run; on a GPU: --device cpu


def test_a_spike_that_comes_back_warns_and_one_at_the_last_step_is_not_known():
    run = RECORDED["bundled-s0"]
    for step, came_back in ((50, True), (119, None)):
        low = dict(run["bf16"], loss=list(run["bf16"]["loss"]))
        low["loss"][step] *= 4
        result = verdicts.check_drift(low, run["fp32"])
        assert result.status is Status.WARN, result.summary
        assert result.data["spike"]["step"] == step and result.data["spike"]["came_back"] is came_back
        assert ("came back" if came_back else "not known") in result.summary


def test_a_spike_that_fp32_shares_is_the_batch_not_bf16():
    run = RECORDED["bundled-s0"]
    low = dict(run["bf16"], loss=list(run["bf16"]["loss"]))
    ref = dict(run["fp32"], loss=list(run["fp32"]["loss"]))
    low["loss"][50] *= 4
    ref["loss"][50] *= 4
    assert verdicts.find_spike(low["loss"], ref["loss"]) is None


def test_noise_growing_with_the_step_warns_as_drifting_from_where_it_left_the_tolerance():
    result = judge("noise002-120")
    assert result.status is Status.WARN, result.summary
    assert result.data["started_at"] == 80 and result.summary.startswith("bf16 loss drifts from fp32's from step 80")
    assert [f["kind"] for f in result.data["findings"]] == ["loss"]
    out = [line for line in result.evidence if line.endswith(")") and ": OUT)" in line]
    assert [line.split(":")[0] for line in out] == ["steps 80-89", "steps 90-99", "steps 100-109", "steps 110-119"]


def test_on_a_gpu_a_drifting_loss_is_compared_on_the_cpu_next():
    result = judge("noise002-120", on_gpu=True)
    assert result.fix.text == "rocmcheck smoke-train --drift --device cpu"
    assert judge("scale1000-120", attn="eager").fix.text == "rocmcheck smoke-train --drift --attn sdpa"


def test_what_cannot_be_judged_is_said():
    run = RECORDED["bundled-s0"]
    assert verdicts.check_drift(run["bf16"], None, "the fp32 reference ran out of memory at step 3").status \
        is Status.SKIP
    short = {k: v[:50] for k, v in run["fp32"].items()}
    assert "ran 50 of 120" in verdicts.check_drift(run["bf16"], short).summary
    diverging = {k: v[:30] + [math.nan] for k, v in run["fp32"].items()}
    skip = verdicts.check_drift(run["bf16"], diverging)
    assert skip.status is Status.SKIP and "non-finite at step 30" in skip.summary
    assert verdicts.check_drift({"loss": [1.0] * 5, "grad_norm": [1.0] * 5}, run["fp32"]).status is Status.SKIP


def test_a_non_finite_bf16_step_against_a_finite_fp32_one_fails():
    run = RECORDED["bundled-s0"]
    low = {"loss": run["bf16"]["loss"][:-1] + [math.inf], "grad_norm": run["bf16"]["grad_norm"][:-1] + [math.nan]}
    result = verdicts.check_drift(low, run["fp32"])
    assert result.status is Status.FAIL and result.data["started_at"] == 119 and "non-finite" in result.summary
    strict_json(result)


def test_a_long_run_shows_a_bounded_sample_of_windows_with_the_first_one_out():
    run = RECORDED["noise002-120"]
    low = {k: v * 10 for k, v in run["bf16"].items()}  # 1200 steps: the recorded curve ten times over
    ref = {k: v * 10 for k, v in run["fp32"].items()}
    result = verdicts.check_drift(low, ref)
    windows = [line for line in result.evidence if line.startswith("steps ")]
    assert len(windows) <= verdicts.DRIFT_EVIDENCE_WINDOWS + 2 and "steps 80-89" in " ".join(windows)
    assert len(result.data["windows"]) == len(windows)


def test_a_zero_fp32_gradient_norm_leaves_no_infinity_in_the_json():
    run = RECORDED["bundled-s0"]
    ref = dict(run["fp32"], grad_norm=[0.0] * 120)
    result = verdicts.check_drift(run["bf16"], ref)
    assert result.status is Status.FAIL
    assert result.data["norm_ratio_max"] is None  # inf: not a number JSON can hold
    strict_json(result)


def test_sampled_keeps_the_first_and_last_step():
    assert sampled([1.0, 2.0]) == [[0, 1.0], [1, 2.0]]
    picks = sampled([float(i) for i in range(1000)], limit=5)
    assert [s for s, _ in picks] == [0, 250, 500, 749, 999]


# -- real runs with planted faults ---------------------------------------------------------------------------------
needs_torch = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("torch", "transformers")),
                                 reason="the runs need torch and transformers")


def drift_run(hooks=None, **kw):
    from rocmcheck.train.run import run_smoke_train

    cfg = TrainConfig(device="cpu", steps=kw.pop("steps", 40), profile=False, eval_prompts=8, drift=True, **kw)
    report = run_smoke_train(cfg, hooks)
    return report, {r.id: r for r in report.results}


def gradients_scaled(factor: float):
    """A backward kernel that returns every gradient `factor` times too large."""
    from rocmcheck.train.run import RunHooks

    def on_model(model):
        for p in model.parameters():
            if p.requires_grad:
                p.register_hook(lambda grad: grad * factor)
    return RunHooks(on_model=on_model)


def weights_corrupted_after(step_k: int, scale: float):
    """After step K's backward (before its optimizer step), noise of `scale` x each tensor's spread on every weight."""
    import torch

    from rocmcheck.train.run import RunHooks

    model_box: list = []

    def on_step_end(step, loss):
        if step == step_k:
            with torch.no_grad():
                gen = torch.Generator().manual_seed(1)
                for p in model_box[0].parameters():
                    p.add_(torch.randn(p.shape, generator=gen) * scale * p.std())
    return RunHooks(on_model=model_box.append, on_step_end=on_step_end)


def noise_growing(per_step: float):
    """Noise on the final norm's output, its spread `per_step` x the step: bf16 that drifts further every step."""
    import torch

    from rocmcheck.train.run import RunHooks

    steps_done = [0]

    def on_model(model):
        def hook(module, args, output):
            return output + torch.randn_like(output) * per_step * steps_done[0] if module.training else output
        model.model.norm.register_forward_hook(hook)

    def on_step_end(step, loss):
        steps_done[0] = step + 1
    return RunHooks(on_model=on_model, on_step_end=on_step_end)


@pytest.fixture(scope="module")
def healthy():
    return drift_run()


@needs_torch
def test_a_healthy_bundled_run_passes_and_records_both_curves(healthy):
    report, by_id = healthy
    drift = by_id["train.drift"]
    assert drift.status is Status.PASS, (drift.summary, drift.evidence)
    info = report.info["drift"]
    assert info["steps"] == 40 and len(info["bf16"]["loss"]) == len(info["fp32"]["loss"]) == 40
    assert [row["loss"] for row in report.metrics] == [v for _, v in info["bf16"]["loss"]]
    # The same weights and the first batch: step 0 differs by bf16 rounding only (train.numerics' tolerance).
    b0, f0 = info["bf16"]["loss"][0][1], info["fp32"]["loss"][0][1]
    assert abs(b0 - f0) / f0 < verdicts.NUMERICS_LOSS_REL_TOL
    assert "fp32 run: train" in report.info["timings_s"] and info["reference_loop_s"] > 0
    assert all(r.status is not Status.FAIL for r in report.results if r.id != "train.task_accuracy"), \
        [(r.id, r.summary) for r in report.results]  # 40 steps are too few for the accuracy threshold, on purpose


@needs_torch
def test_the_same_run_without_drift_has_no_fp32_run_and_the_same_curve(healthy):
    from rocmcheck.train.run import run_smoke_train

    report = run_smoke_train(TrainConfig(device="cpu", steps=40, profile=False, eval_prompts=8))
    assert "train.drift" not in {r.id for r in report.results} and "drift" not in report.info
    assert not any(k.startswith("fp32 run") for k in report.info["timings_s"])
    assert [r["loss"] for r in report.metrics] == [r["loss"] for r in healthy[0].metrics]


@needs_torch
def test_planted_gradient_scaling_fails_from_step_0():
    report, by_id = drift_run(gradients_scaled(1000.0), steps=20)
    drift = by_id["train.drift"]
    assert drift.status is Status.FAIL and drift.data["started_at"] == 0, drift.summary
    assert drift.data["findings"][0]["kind"] == "norm" and drift.data["norm_ratio_min"] > 500
    assert by_id["train.numerics"].status is Status.PASS  # the first batch alone does not see it: the hook came later


@needs_torch
def test_planted_loss_spike_fails_at_the_step_after_the_corruption():
    _, by_id = drift_run(weights_corrupted_after(10, 3.0), steps=20)
    drift = by_id["train.drift"]
    assert drift.status is Status.FAIL, drift.summary
    assert drift.data["started_at"] == 11 and drift.data["spike"]["came_back"] is False


@needs_torch
def test_planted_growing_noise_warns_as_drifting_after_healthy_steps():
    _, by_id = drift_run(noise_growing(0.06))
    drift = by_id["train.drift"]
    assert drift.status is Status.WARN, drift.summary
    assert drift.data["findings"][0]["kind"] == "loss" and drift.data["started_at"] >= 10


@pytest.fixture(scope="module")
def random_llama(tmp_path_factory) -> Path:
    return make_random_llama(tmp_path_factory.mktemp("own") / "random-llama")


@needs_torch
def test_lora_passes_and_its_reference_trains_an_fp32_base(random_llama):
    import torch

    from rocmcheck.train.distributed import World
    from rocmcheck.train.plain_strategy import PlainStrategy

    report, by_id = drift_run(model=random_llama, steps=30, lora_rank=8, lr=5e-3)
    assert by_id["train.drift"].status is Status.PASS, by_id["train.drift"].summary
    assert by_id["train.learns"].status is Status.PASS
    cfg = TrainConfig(model=random_llama, device="cpu", lora_rank=8)
    dtypes = {}
    for fp32 in (False, True):  # the run's frozen base is bf16 (as the planner counts it), the reference's fp32
        strategy = PlainStrategy(cfg, torch.device("cpu"), World(0, 1, 0), fp32=fp32)
        model = strategy.build(lambda step, micro: None)
        dtypes[strategy.name] = {p.dtype for p in model.parameters() if not p.requires_grad}
        strategy.close()
    assert dtypes == {"plain": {torch.bfloat16}, "fp32": {torch.float32}}


# -- the plumbing: the CLI on a random-init --model, the doctor, the refusals --------------------------------------
@needs_torch
def test_drift_on_a_random_init_model_through_the_cli(random_llama):
    folder = random_llama
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1",
               HF_ENDPOINT="http://127.0.0.1:9")
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--json", "--device", "cpu", "--model",
                           str(folder), "--steps", "30", "--no-profile", "--drift"], capture_output=True, text=True,
                          timeout=600, env=env, cwd=REPO)
    assert proc.stdout.startswith("{"), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    by_id = {r["id"]: r for r in doc["results"]}
    assert by_id["train.drift"]["status"] == "pass", by_id["train.drift"]
    assert doc["info"]["config"]["drift"] is True and proc.returncode == 0


@needs_torch
def test_the_doctor_train_stage_carries_drift_to_its_child():
    from rocmcheck.train import doctor_stage

    results = doctor_stage.run_train_stage(timeout_s=300, config=TrainConfig(device="cpu", steps=12, profile=False,
                                                                             eval_prompts=8, drift=True))
    by_id = {r.id: r for r in results}
    assert by_id["train.run"].status is Status.PASS and by_id["train.drift"].status is Status.PASS, \
        [(r.id, r.summary) for r in results]


def test_doctor_level_2_and_up_turn_drift_on(monkeypatch):
    from rocmcheck import doctor
    from rocmcheck.train import doctor_stage

    asked = []
    monkeypatch.setattr(doctor_stage, "run_train_stage", lambda **kw: asked.append(kw) or [])
    ctx = SimpleNamespace(torch={"version": "2.13.0", "device_count": 0})
    for level in (1, 2, 3):
        doctor.run_train_stage(ctx, doctor.DoctorOptions(level=level))
    assert [kw["drift"] for kw in asked] == [False, True, True] and asked[0]["device"] == "cpu"


def test_the_doctor_child_started_early_gets_drift_at_level_2(monkeypatch):
    from rocmcheck import doctor
    from rocmcheck.train import doctor_stage

    made = []
    monkeypatch.setattr(doctor_stage, "EarlyTrain", lambda timeout_s, wait_s, **kw: made.append(kw) or kw)
    for level in (1, 2):
        opts = doctor.DoctorOptions(level=level)
        doctor.start_early_train(opts, doctor.plan_stages(opts, []))
    assert [kw.get("drift") for kw in made] == [False, True]


@pytest.mark.parametrize("kw", [{"bench": True}, {"deepspeed": REPO / "recipes" / "zero2.json"}])
def test_drift_is_refused_with_bench_and_deepspeed(kw):
    with pytest.raises(BadInput, match="--drift"):
        decide(TrainConfig(drift=True), env={}, **kw)
