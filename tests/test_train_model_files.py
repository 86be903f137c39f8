"""A damaged model folder a person brings is a train.load fail naming the file and what is wrong with it, never a
"rocmcheck bug" crash: real runs of the bundled model's copy with one file broken the way downloads, hand edits
and hostile files break them. In process (a second each), and once through the CLI."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig  # noqa: E402
from rocmcheck.train.run import run_smoke_train  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = "model.safetensors"


def copy(tmp_path: Path, name: str = "m") -> Path:
    folder = tmp_path / name
    shutil.copytree(BUNDLED_MODEL, folder)
    return folder


def header(meta: dict) -> bytes:
    raw = json.dumps(meta).encode()
    return len(raw).to_bytes(8, "little") + raw


def truncated(folder: Path) -> None:
    (folder / WEIGHTS).write_bytes((folder / WEIGHTS).read_bytes()[:1000])  # a copy that stopped part way


def header_too_large(folder: Path) -> None:
    (folder / WEIGHTS).write_bytes((10**12).to_bytes(8, "little") + b"{}")


def shape_overflow(folder: Path) -> None:
    (folder / WEIGHTS).write_bytes(header({"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 4]}})
                                   + b"\0" * 4)


class MakesFolder:
    """A pickle that would create a folder when unpickled without weights_only."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def pickle_with_code(folder: Path) -> None:
    (folder / WEIGHTS).unlink()
    with open(folder / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"model.embed_tokens.weight": MakesFolder(folder / "code-ran")}, fh, protocol=2)


def sizes_of_another_model(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 256}))


def tokenizer_without_eos(folder: Path) -> None:
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("eos_token")
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def tokenizer_without_added_tokens(folder: Path) -> None:
    tok = json.loads((folder / "tokenizer.json").read_text())
    del tok["added_tokens"]
    (folder / "tokenizer.json").write_text(json.dumps(tok))


def tokenizer_not_json(folder: Path) -> None:
    (folder / "tokenizer.json").write_text("{nope")


@pytest.mark.parametrize("damage, file, words", [
    (truncated, WEIGHTS, "a damaged safetensors file (Error while deserializing header"),
    (header_too_large, WEIGHTS, "a damaged safetensors file (Error while deserializing header: header too large"),
    (shape_overflow, WEIGHTS, "a damaged safetensors file (Error while deserializing header: overflow"),
    (pickle_with_code, "pytorch_model.bin", "torch refuses to load this pickle checkpoint safely"),
    (sizes_of_another_model, "", "the weights do not have the sizes config.json gives"),
    (tokenizer_without_eos, "tokenizer_config.json", "the tokenizer has no eos token"),
    (tokenizer_without_added_tokens, "tokenizer.json", "the tokenizer cannot be loaded (KeyError: 'added_tokens')"),
    (tokenizer_not_json, "tokenizer.json", "the tokenizer cannot be loaded (JSONDecodeError"),
])
def test_a_damaged_file_is_a_load_failure_naming_it(tmp_path, damage, file, words):
    folder = copy(tmp_path)
    damage(folder)
    report = run_smoke_train(TrainConfig(model=folder, device="cpu", steps=10, profile=False, eval_prompts=8))
    [result] = report.results
    assert (result.id, result.status.value) == ("train.load", "fail"), (result.summary, result.evidence)
    assert result.summary.startswith(str(folder / file) if file else str(folder)), result.summary
    assert words in result.summary
    assert "rocmcheck bug" not in result.fix.line()
    assert not (folder / "code-ran").exists()  # the pickle was refused, never run


def test_the_missing_eos_fix_is_an_edit_of_the_tokenizer_config(tmp_path):
    folder = copy(tmp_path)
    tokenizer_without_eos(folder)
    [result] = run_smoke_train(TrainConfig(model=folder, device="cpu", steps=10, profile=False)).results
    assert result.fix.kind.value == "edit" and result.fix.file == str(folder / "tokenizer_config.json")
    assert "eos_token" in result.fix.text


def test_through_the_cli_a_refused_pickle_is_a_failed_verdict_exit_1(tmp_path):
    folder = copy(tmp_path, "pickled")
    pickle_with_code(folder)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--model", str(folder), "--device", "cpu",
                           "--json", "--steps", "10"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["verdict"] == "fail", proc.stderr[-2000:]
    assert [(r["id"], r["status"]) for r in report["results"]] == [("train.load", "fail")]
    assert str(folder / "pytorch_model.bin") in report["results"][0]["summary"]
    assert not (folder / "code-ran").exists()
