"""train.reload's checkpoint saved while the later steps run (rocmcheck/train/step_save.py), on real short runs of the
bundled model with the files method forced: where the save begins, that a broken save still fails, that --out
still gets the last step's weights, and that a run stopped or interrupted after the save began leaves nothing."""

from __future__ import annotations

import math
import tempfile
import threading
from pathlib import Path

import pytest
from devices import TRAIN_DEVICE

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from rocmcheck.train import saved_weights, step_save  # noqa: E402
from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig  # noqa: E402
from rocmcheck.train.modeling import load_model  # noqa: E402
from rocmcheck.train.run import RunHooks, _Run, run_smoke_train  # noqa: E402

STEPS = 10
SAVING_THREAD = "rocmcheck-save-pretrained"


def short(**kw) -> TrainConfig:
    return TrainConfig(device=TRAIN_DEVICE, steps=STEPS, profile=False, eval_prompts=8, **kw)


@pytest.fixture
def files_method(monkeypatch, tmp_path):
    """The files method whatever the size, and the scratch checkpoint in this test's own temporary folder. Each
    run's SaveDuringSteps is kept alive here, so a folder the run did not close is not removed by the collector
    either."""
    monkeypatch.setenv(saved_weights.METHOD_ENV, "files")
    kept = []
    made = _Run._save_during_steps
    monkeypatch.setattr(_Run, "_save_during_steps", lambda self, *args: kept.append(made(self, *args)) or kept[-1])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def reload_of(report):
    return {r.id: r for r in report.results}["train.reload"]


def left_in(folder: Path) -> list[str]:
    """rocmcheck's own folders in `folder` (torch puts its compile caches in the temporary folder too)."""
    return sorted(p.name for p in folder.iterdir() if "rocmcheck" in p.name)


def test_the_checkpoint_is_saved_while_the_later_steps_run(files_method):
    model_box: list = []
    final: dict = {}

    def saved(folder: Path) -> None:  # the checkpoint is the weights of an earlier step, not the last one's
        final["differs"] = any(not torch.equal(saved_t, model_box[0].state_dict()[k].cpu())
                               for k, saved_t in safetensors_torch.load_file(folder / "model.safetensors").items())

    report = run_smoke_train(short(), RunHooks(on_model=model_box.append, on_saved=saved))
    result, shown = reload_of(report), report.info["reload"]
    assert result.status.value == "pass", result.summary
    # A CPU run makes no buffers ahead, so the save begins after the first step; on a GPU, once they are made.
    after = shown["saved_after_step"]
    assert (after == 1 if TRAIN_DEVICE == "cpu" else 1 <= after < STEPS), shown
    assert result.data["files"]["saved_after_step"] == after, result.data
    assert f"checkpoint of step {after}, saved while the later steps ran" in result.summary
    assert shown["host_copy_s"] >= 0 and shown["save_s"] >= 0 and shown["saved_in"] == str(files_method)
    assert final["differs"], "the checkpoint holds the last step's weights, not step 1's"
    assert len(report.metrics) == STEPS and left_in(files_method) == []


def test_a_flipped_bit_in_a_checkpoint_saved_during_the_steps_fails(files_method):
    def flip(folder: Path) -> None:
        path = folder / "model.safetensors"
        data = bytearray(path.read_bytes())
        data[-1] ^= 1  # the last byte of the last tensor
        path.write_bytes(bytes(data))

    report = run_smoke_train(short(), RunHooks(on_saved=flip))
    result = reload_of(report)
    assert report.info["reload"]["saved_after_step"] >= 1
    assert result.status.value == "fail" and not result.data["weights_equal"], result.summary


def drop_a_tensor(folder: Path, dropped: list) -> None:
    """Leave one tensor out of the checkpoint: the files are then no one-to-one image of the model."""
    path = folder / "model.safetensors"
    tensors = safetensors_torch.load_file(str(path))
    key = sorted(tensors)[0]
    del tensors[key]
    safetensors_torch.save_file(tensors, str(path), metadata={"format": "pt"})
    dropped.append(key)


def test_files_that_are_not_its_image_are_saved_again_after_the_steps_and_reloaded(files_method):
    """The full reload compares with the trained model, which an early step's checkpoint is not: the last step's
    weights are saved again for it. A saver that leaves a tensor out of every save still fails."""
    dropped: list = []
    report = run_smoke_train(short(), RunHooks(on_saved=lambda folder: drop_a_tensor(folder, dropped)))
    result, shown = reload_of(report), report.info["reload"]
    assert len(dropped) == 2 and shown["method"] == "full" and dropped[0] in shown["fallback"], shown
    assert "saved_after_step" not in shown and shown["saved_again_s"] >= 0, shown
    assert result.status.value == "fail" and not result.data["weights_equal"], result.summary
    assert left_in(files_method) == []


def test_a_fallback_judges_the_last_steps_own_save(files_method):
    """Left out of the first save only, the tensor is in the one saved again: the full reload of that passes."""
    dropped: list = []

    def first_only(folder: Path) -> None:
        if not dropped:
            drop_a_tensor(folder, dropped)

    report = run_smoke_train(short(), RunHooks(on_saved=first_only))
    result, shown = reload_of(report), report.info["reload"]
    assert shown["method"] == "full" and "saved_again_s" in shown, shown
    assert result.status.value == "pass" and result.data["max_abs_diff"] == 0.0, result.summary


def test_a_checkpoint_asked_for_with_out_holds_the_last_steps_weights(files_method, tmp_path):
    model_box: list = []
    out = tmp_path / "out"
    report = run_smoke_train(short(out=out), RunHooks(on_model=model_box.append))
    assert reload_of(report).status.value == "pass"
    assert "saved_after_step" not in report.info["reload"], report.info["reload"]
    published = load_model(out / "checkpoint", short(), torch.device(TRAIN_DEVICE)).state_dict()
    trained = model_box[0].state_dict()
    assert all(torch.equal(t.cpu(), trained[k].cpu()) for k, t in published.items())


def test_a_run_stopped_after_the_save_began_waits_for_it_and_leaves_nothing(files_method):
    calls = {"n": 0}

    def inf_at_step_3(model):
        def hook(module, args, output):
            if module.training:
                calls["n"] += 1
                if calls["n"] > 3:
                    return output * math.inf
            return output
        model.model.layers[0].register_forward_hook(hook)

    report = run_smoke_train(short(), RunHooks(on_model=inf_at_step_3))
    assert "non-finite" in report.info["stopped"] and reload_of(report).status.value == "skip"
    assert left_in(files_method) == []
    assert not any(t.name == SAVING_THREAD for t in threading.enumerate())


def test_an_interrupted_run_removes_the_folder_at_once(files_method):
    def interrupt(step, loss):
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_smoke_train(short(), RunHooks(on_step_end=interrupt))
    assert left_in(files_method) == []


def test_a_save_that_cannot_begin_is_a_failed_reload(files_method, monkeypatch):
    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(step_save, "checkpoint_folder", no_room)
    report = run_smoke_train(short())
    result = reload_of(report)
    assert result.status.value == "fail" and "No space left on device" in result.summary, result.summary
    assert left_in(files_method) == []


@pytest.fixture(scope="module")
def bundled():
    return load_model(BUNDLED_MODEL, TrainConfig(device="cpu"), torch.device("cpu"))


def test_buffers_not_ready_leave_the_save_to_after_the_steps(bundled, monkeypatch):
    monkeypatch.setattr(saved_weights.HostBuffers, "ready", property(lambda self: False))
    buffers = saved_weights.HostBuffers(saved_weights.state_specs(bundled.state_dict()))
    early = step_save.SaveDuringSteps(bundled, saved_weights.weight_bytes(bundled), STEPS, buffers)
    for step in range(STEPS):
        early.after_step(step)
    assert not early.started and early.take_buffers() is buffers
    buffers.release()


def test_the_last_step_and_a_save_asked_to_wait_never_begin_one(bundled):
    nbytes = saved_weights.weight_bytes(bundled)
    last = step_save.SaveDuringSteps(bundled, nbytes, STEPS, None)
    last.after_step(STEPS - 1)  # nothing is left to overlap: the check after the steps saves
    waiting = step_save.SaveDuringSteps(bundled, nbytes, None, None)
    waiting.after_step(0)
    assert not last.started and not waiting.started


def test_an_interrupted_close_does_not_wait_for_buffers_still_being_faulted_in(bundled, monkeypatch):
    """Ctrl-C during the load: the buffers' thread may still be faulting in gigabytes; close(wait=False) leaves it."""
    gate = threading.Event()
    monkeypatch.setattr(saved_weights, "_touch_aside", lambda buffers: gate.wait(30) or True)
    buffers = saved_weights.HostBuffers([((1024, 1024), torch.float32)])
    early = step_save.SaveDuringSteps(bundled, saved_weights.weight_bytes(bundled), STEPS, buffers)
    try:
        early.close(wait=False)
        assert not buffers.ready  # still faulting: close did not wait for it
    finally:
        gate.set()
    assert buffers.take() != {}  # the thread ended on its own, its buffers made
