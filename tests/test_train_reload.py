"""train.reload on real checkpoints: the files read back tensor by tensor (saved_weights.py) against the trained model,
and real short runs of the bundled model with a broken save planted between save_pretrained and the check (a flipped
bit, a tensor left out, a config changed, a truncated file), judged by both methods: from_pretrained and the files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from devices import TRAIN_DEVICE

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from rocmcheck.train import modeling, reload, saved_weights  # noqa: E402
from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig  # noqa: E402
from rocmcheck.train.run import RunHooks, run_smoke_train  # noqa: E402

FLIPPED = "model.layers.0.self_attn.q_proj.weight"


def flip_one_bit(folder: Path, key: str = FLIPPED) -> None:
    """Flip the lowest bit of the first byte of `key`'s data in the safetensors file that holds it."""
    for path in saved_weights.shard_files(folder):
        raw = bytearray(path.read_bytes())
        (length,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + length])
        if key in header:
            raw[8 + length + header[key]["data_offsets"][0]] ^= 1
            path.write_bytes(bytes(raw))
            return
    raise AssertionError(f"{key} is in no file of {folder}")


def drop_tensor(folder: Path, key: str = FLIPPED) -> None:
    path = folder / "model.safetensors"
    tensors = safetensors_torch.load_file(str(path))
    del tensors[key]
    safetensors_torch.save_file(tensors, str(path), metadata={"format": "pt"})


def change_config(folder: Path) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config["rms_norm_eps"] = config["rms_norm_eps"] * 100
    path.write_text(json.dumps(config))


def truncate(folder: Path) -> None:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.fixture(scope="module")
def bundled():
    return transformers.AutoModelForCausalLM.from_pretrained(BUNDLED_MODEL, dtype=torch.float32).eval()


def saved(model, tmp_path: Path, **kw) -> Path:
    folder = tmp_path / "ckpt"
    model.save_pretrained(folder, safe_serialization=True, **kw)
    return folder


# ---------------------------------------------------------------------------------------- the files, read back

def test_a_healthy_checkpoint_is_its_model_bit_for_bit(bundled, tmp_path):
    found = saved_weights.compare_files(saved(bundled, tmp_path), bundled)
    assert found.one_to_one and found.weights_equal and found.config_equal, found
    assert found.tensors == len(bundled.state_dict())
    assert found.bytes == saved_weights.weight_bytes(bundled)


def test_one_flipped_bit_is_found_and_named(bundled, tmp_path):
    folder = saved(bundled, tmp_path)
    flip_one_bit(folder)
    found = saved_weights.compare_files(folder, bundled)
    assert found.one_to_one and not found.weights_equal and found.first_difference == FLIPPED


def test_shards_with_an_index_are_all_read(bundled, tmp_path):
    folder = saved(bundled, tmp_path, max_shard_size="1MB")
    assert (folder / "model.safetensors.index.json").is_file() and len(saved_weights.shard_files(folder)) > 1
    found = saved_weights.compare_files(folder, bundled)
    assert found.one_to_one and found.weights_equal and found.tensors == len(bundled.state_dict())
    flip_one_bit(folder, "lm_head.weight")
    assert saved_weights.compare_files(folder, bundled).first_difference == "lm_head.weight"


def test_a_tied_weight_saved_once_is_still_one_to_one(tmp_path):
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64,
        tie_word_embeddings=True))
    found = saved_weights.compare_files(saved(model, tmp_path), model)
    assert found.one_to_one and found.weights_equal
    assert found.tensors == len(model.state_dict()) - 1  # lm_head.weight is embed_tokens.weight


def test_a_tensor_missing_from_the_files_is_left_to_the_full_reload(bundled, tmp_path):
    folder = saved(bundled, tmp_path)
    drop_tensor(folder)
    found = saved_weights.compare_files(folder, bundled)
    assert not found.one_to_one and FLIPPED in found.why_not


def test_a_tensor_saved_in_another_dtype_is_left_to_the_full_reload(bundled, tmp_path):
    folder = saved(bundled, tmp_path)
    path = folder / "model.safetensors"
    tensors = safetensors_torch.load_file(str(path))
    tensors[FLIPPED] = tensors[FLIPPED].to(torch.bfloat16)
    safetensors_torch.save_file(tensors, str(path), metadata={"format": "pt"})
    found = saved_weights.compare_files(folder, bundled)
    assert not found.one_to_one and "bfloat16" in found.why_not


def test_a_changed_config_is_found(bundled, tmp_path):
    folder = saved(bundled, tmp_path)
    change_config(folder)
    found = saved_weights.compare_files(folder, bundled)
    assert found.one_to_one and found.weights_equal and not found.config_equal
    assert any(d.startswith("rms_norm_eps:") for d in found.config_differences)


def test_the_method_follows_the_size_and_the_switch():
    big = saved_weights.FULL_RELOAD_MAX_BYTES + 1
    assert saved_weights.choose_method(big, None) == "files"
    assert saved_weights.choose_method(1000, None) == "full"
    assert saved_weights.choose_method(1000, "files") == "files"
    assert saved_weights.choose_method(big, "full") == "full"
    assert saved_weights.choose_method(big, "bogus") == "files"


# ------------------------------------------------- the run's reload check, with a broken save planted

def short() -> TrainConfig:
    return TrainConfig(device=TRAIN_DEVICE, steps=10, profile=False, eval_prompts=8)


def reload_check(model, plant=None, method: str | None = None, monkeypatch=None):
    """The run's own reload check (save_pretrained, the hook, then the chosen method) on `model`, untrained: what
    it judges is the save, whatever the weights are."""
    if method:
        monkeypatch.setenv(saved_weights.METHOD_ENV, method)
    batch = torch.randint(3, 100, (2, 16))
    live = model(input_ids=batch).logits.float()
    info: dict = {}
    return reload.check_reload(short(), reload.Reloaded(model, live, 0.0, batch), info, plant), info


@pytest.mark.parametrize("method", ["full", "files"])
def test_a_healthy_save_passes_either_way(bundled, method, monkeypatch):
    result, info = reload_check(bundled, method=method, monkeypatch=monkeypatch)
    assert result.status.value == "pass" and result.data["weights_equal"], result.summary
    assert info["method"] == method and info["save_s"] >= 0 and info["verify_s"] >= 0
    if method == "files":
        assert result.data["files"]["config_equal"] and "read back from the files" in result.summary
        assert result.data["max_abs_diff"] is None  # the trained model itself was saved: no second model to run
    else:
        assert result.data["max_abs_diff"] == 0.0


@pytest.mark.parametrize("method", ["full", "files"])
@pytest.mark.parametrize("plant", [flip_one_bit, change_config, drop_tensor], ids=["bit", "config", "dropped"])
def test_a_broken_save_fails_either_way(bundled, method, plant, monkeypatch):
    result, info = reload_check(bundled, plant, method, monkeypatch)
    assert result.status.value == "fail", (result.summary, result.evidence)
    if plant is drop_tensor and method == "files":
        assert info["method"] == "full" and FLIPPED in info["fallback"]  # the full reload decided
    if plant is flip_one_bit:
        assert not result.data["weights_equal"]


@pytest.mark.parametrize("method", ["full", "files"])
def test_a_truncated_checkpoint_fails_with_the_readers_error(bundled, method, monkeypatch):
    result, _ = reload_check(bundled, truncate, method, monkeypatch)
    assert result.status.value == "fail" and "save -> reload failed" in result.summary, result.summary


def test_a_real_run_with_a_flipped_bit_in_its_checkpoint_fails_reload(monkeypatch):
    monkeypatch.setenv(saved_weights.METHOD_ENV, "files")
    report = run_smoke_train(short(), RunHooks(on_saved=flip_one_bit))
    bad = {r.id: r for r in report.results}["train.reload"]
    assert bad.status.value == "fail" and bad.data["files"]["first_difference"] == FLIPPED, bad.summary
    assert report.info["reload"]["method"] == "files" and report.info["timings_s"]["reload"] > 0


# ------------------------------------------- host copies, and the save from them

def test_host_copies_keep_ties_bytes_and_dtypes():
    state = {"embed": torch.randn(1024, 1024), "norm": torch.ones(8, dtype=torch.bfloat16),
             "mask": torch.tensor([True, False]), "scalar": torch.tensor(3.0), "empty": torch.zeros(0, 4)}
    state["head"] = state["embed"]  # a tied weight: one tensor under two names
    host = saved_weights.host_copies(state)
    assert host is not None and host.keys() == state.keys()
    assert host["head"] is host["embed"] and host["embed"].data_ptr() != state["embed"].data_ptr()
    for key, t in state.items():
        assert host[key].dtype == t.dtype and host[key].shape == t.shape and torch.equal(host[key], t), key


def test_two_different_tensors_in_one_storage_are_left_to_save_pretrained():
    rows = torch.randn(4, 8)
    assert saved_weights.host_copies({"a": rows[0], "b": rows[1]}) is None
    assert saved_weights.host_copies({"a": rows, "b": "not a tensor"}) is None


def test_a_save_from_host_copies_writes_what_save_pretrained_writes_from_the_model(bundled, tmp_path):
    host = saved_weights.host_copies(bundled.state_dict())
    modeling.save_checkpoint(bundled, tmp_path / "copies", dict(host))
    plain = saved(bundled, tmp_path)
    assert (tmp_path / "copies" / "model.safetensors").read_bytes() == (plain / "model.safetensors").read_bytes()
    found = saved_weights.compare_files(tmp_path / "copies", bundled, host)
    assert found.one_to_one and found.weights_equal and found.config_equal, found
    flip_one_bit(tmp_path / "copies")
    assert saved_weights.compare_files(tmp_path / "copies", bundled, host).first_difference == FLIPPED


def test_the_files_method_in_a_real_run_saves_from_host_copies_in_the_verdict_order(monkeypatch):
    monkeypatch.setenv(saved_weights.METHOD_ENV, "files")
    report = run_smoke_train(short())
    ids = [r.id for r in report.results]
    assert ids[ids.index("train.loss_decrease"):][:3] == ["train.loss_decrease", "train.task_accuracy",
                                                          "train.reload"], ids
    assert {r.id: r for r in report.results}["train.reload"].status.value == "pass"
    shown = report.info["reload"]
    assert shown["method"] == "files" and 0 <= shown["host_copy_s"] <= shown["save_s"], shown
    assert 0 <= shown["compare_s"] <= shown["verify_s"], shown
