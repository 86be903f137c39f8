"""Real short runs of the bundled model with faults put in through real hooks: a leak, an inf, an OOM."""

from __future__ import annotations

import math

import pytest
from devices import TRAIN_DEVICE

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rocmcheck.monitor.step_memory import MiB  # noqa: E402
from rocmcheck.train.config import TrainConfig  # noqa: E402
from rocmcheck.train.outputs import write_outputs  # noqa: E402
from rocmcheck.train.run import RunHooks, run_smoke_train  # noqa: E402

HIP_OOM = ("HIP out of memory. Tried to allocate 11.74 GiB. GPU 7 has a total capacity of 251.98 GiB of which "
           "6.94 GiB is free")


# The leak rule judges from 2 warm-up steps + staircase.MIN_POINTS (6) points on; 12 steps give it 10. Measured on
# the 2-core CPU box, fresh processes: the planted leak 53.7-54.5 MiB/step (380 MiB over the run), the clean run
# -8.2 to +7.5 MiB; 20 steps found the same per step and took 2.8x as long.
SHORT_STEPS = 12


def short(**kw) -> TrainConfig:
    return TrainConfig(device=TRAIN_DEVICE, steps=kw.pop("steps", SHORT_STEPS), profile=False, eval_prompts=8, **kw)


def by_id(report):
    return {r.id: r for r in report.results}


@pytest.fixture(scope="module")
def clean_and_leaking():
    clean = run_smoke_train(short())
    # The staircase of a classic leak: a "validation loss" computed every step without
    # torch.no_grad() and kept in a list for logging. Never backwarded, each kept loss holds its whole
    # autograd graph with every saved activation. (Keeping the *trained* loss leaks far less: backward
    # already freed its saved tensors.)
    model_box: list = []
    kept: list[torch.Tensor] = []
    batch = torch.randint(3, 100, (16, 64))

    def keep_validation_loss(step, loss):
        ids = batch.to(model_box[0].device)  # no copy on the CPU
        kept.append(model_box[0](input_ids=ids, labels=ids).loss)

    leaking = run_smoke_train(short(), RunHooks(on_model=model_box.append, on_step_end=keep_validation_loss))
    return clean, leaking


def test_leaking_run_is_caught(clean_and_leaking):
    _, leaking = clean_and_leaking
    leak = by_id(leaking)["train.memory_leak"]
    assert leak.status.value == "fail", leak.evidence
    assert leak.data["per_step_bytes"] > 1 * MiB
    assert "loss.item()" in leak.fix.line() and "no_grad" in leak.fix.line()


def test_clean_run_is_not_flagged(clean_and_leaking):
    clean, leaking = clean_and_leaking
    leak = by_id(clean)["train.memory_leak"]
    assert leak.status.value == "pass", leak.evidence
    # Same settings, so the difference is the leak alone: clean growth is far below the leaking one.
    assert abs(leak.data["growth_bytes"]) * 10 < by_id(leaking)["train.memory_leak"].data["growth_bytes"]


def test_outputs_written_for_a_real_run(clean_and_leaking, tmp_path):
    clean, _ = clean_and_leaking
    files = write_outputs(clean.to_dict(), tmp_path)
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == SHORT_STEPS
    assert files["plot"].endswith(".png") and (tmp_path / "loss_memory.png").stat().st_size > 1000


def test_inf_in_the_forward_pass_is_caught_and_stops_the_run():
    def poison(model):
        def hook(module, args, output):
            return output * math.inf if module.training else output
        model.model.layers[1].mlp.register_forward_hook(hook)

    report = run_smoke_train(short(), RunHooks(on_model=poison))
    results = by_id(report)
    assert results["train.finite"].status.value == "fail"
    assert results["train.finite"].data["nonfinite_loss_steps"] == [0]
    assert len(report.metrics) == 1 and "non-finite" in report.info["stopped"]
    assert results["train.loss_decrease"].status.value == "skip"


def test_out_of_memory_is_caught_by_type_with_peak_and_advice():
    # On a CPU no allocation fails with torch.OutOfMemoryError (the CPU allocator raises a plain
    # RuntimeError, and really exhausting 24 GiB would bring in the kernel's OOM killer), so the only
    # way to exercise the path is to raise the real exception type from inside a real step, with the
    # text ROCm printed on an MI300X-class machine (AMD-AGI/Primus#349).
    calls = {"n": 0}

    def oom_at_step_2(model):
        def hook(module, args):
            if module.training:
                calls["n"] += 1
                if calls["n"] == 3:
                    raise torch.OutOfMemoryError(HIP_OOM)
        model.model.layers[0].register_forward_pre_hook(hook)

    report = run_smoke_train(short(), RunHooks(on_model=oom_at_step_2))
    oom = by_id(report)["train.oom"]
    assert oom.status.value == "fail" and oom.data["step"] == 2
    assert "HIP out of memory" in oom.evidence[0] and oom.data["peak_bytes"] > 0
    assert "--gradient-checkpointing" in oom.fix.text and "--micro-batch" in oom.fix.text
    assert len(report.metrics) == 2 and by_id(report)["train.task_accuracy"].status.value == "skip"


def test_other_errors_are_not_mistaken_for_oom():
    def boom(model):
        def hook(module, args):
            if module.training:
                raise ValueError("not memory")
        model.model.layers[0].register_forward_pre_hook(hook)

    with pytest.raises(ValueError):
        run_smoke_train(short(), RunHooks(on_model=boom))


def test_memory_snapshot_names_the_line_that_keeps_the_graph(tmp_path):
    # smoke-train --memory-snapshot: the leak finder watches two steps of the loop; the validation loss kept with
    # its graph is found by what holds it (the list) and where it was put there (this file's line).
    model_box: list = []
    kept: list[torch.Tensor] = []
    batch = torch.randint(3, 100, (4, 32))

    def keep_validation_loss(step, loss):
        ids = batch.to(model_box[0].device)  # no copy on the CPU
        kept.append(model_box[0](input_ids=ids, labels=ids).loss)

    report = run_smoke_train(short(memory_snapshot=True, out=str(tmp_path)),
                             RunHooks(on_model=model_box.append, on_step_end=keep_validation_loss))
    snap = by_id(report)["train.memory_snapshot"]
    assert snap.status.value == "fail", (snap.summary, snap.evidence)
    assert "kept" in snap.summary and "test_train_faults.py" in snap.summary and "item()" in snap.fix.line()


def test_memory_snapshot_verdict_judges_the_finders_report():
    from rocmcheck.train.verdicts import check_memory_snapshot

    report = {"summary": "1 tensor survives", "fix": "keep `loss.item()` instead", "evidence": ["e"],
              "data": {"snapshot": "/tmp/s.pickle"}}
    assert check_memory_snapshot(None, False, False).status.value == "skip"
    assert check_memory_snapshot(report, True, True).status.value == "fail"
    assert check_memory_snapshot(report, True, False).status.value == "warn"
    ok = check_memory_snapshot(report, False, False)
    assert ok.status.value == "pass" and "/tmp/s.pickle" in ok.summary
