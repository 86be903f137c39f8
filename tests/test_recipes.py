"""The bundled recipes: the CLI, lint-clean, accepted by DeepSpeed's real DeepSpeedConfig, and (when
LLaMA-Factory is importable) by LLaMA-Factory's own argument parser."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from lint_helpers import REPO, llamafactory_data, needs_deepspeed

from rocmcheck.lint import Severity, lint_file
from rocmcheck.lint.deepspeed_deep import run_deep_validation
from rocmcheck.lint.hf_auto import TrainingSettings, resolve_auto
from rocmcheck.recipes import all_recipes, recipes_root, write_recipe

DS_RECIPES = ["zero2", "zero3", "zero3-offload"]
LF_RECIPES = {"llama2-7b-full-sft": ("zero2", 12, 8), "llama3-70b-lora-sft-zero3-offload": ("zero3-offload", 1, 8)}


def rocmcheck(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "rocmcheck", "recipes", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def test_catalog_has_the_five_recipes():
    catalog = all_recipes()
    assert sorted(catalog) == sorted(DS_RECIPES + list(LF_RECIPES))
    assert {r.kind for r in catalog.values()} == {"deepspeed", "llamafactory"}
    # found through the package (rocmcheck/recipes_data -> ../recipes), as an installed copy finds it
    found = recipes_root().joinpath("zero2.json")
    assert "recipes_data" in str(found) and Path(str(found)).resolve() == (REPO / "recipes" / "zero2.json").resolve()


def test_cli_list_show_write(tmp_path):
    listing = rocmcheck("list")
    assert listing.returncode == 0 and all(name in listing.stdout for name in all_recipes())
    shown = rocmcheck("show", "zero3-offload")
    assert shown.returncode == 0 and shown.stdout == (REPO / "recipes" / "zero3-offload.json").read_text()
    unknown = rocmcheck("show", "zero4")
    assert unknown.returncode == 2 and unknown.stderr.strip().count("\n") == 0
    assert "valid names:" in unknown.stderr and "zero3-offload" in unknown.stderr
    out = tmp_path / "out"
    first = rocmcheck("write", "llama3-70b-lora-sft-zero3-offload", str(out))
    assert first.returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["llama3-70b-lora-sft-zero3-offload.yaml", "zero3-offload.json"]
    again = rocmcheck("write", "zero3-offload", str(out))
    assert again.returncode == 2 and "use --force" in again.stderr
    assert rocmcheck("write", "zero3-offload", str(out), "--force").returncode == 0


def test_written_yaml_points_at_its_deepspeed_config_absolutely(tmp_path):
    written = write_recipe(all_recipes()["llama2-7b-full-sft"], tmp_path)
    data = yaml.safe_load(written[-1].read_text())
    assert Path(data["deepspeed"]) == (tmp_path / "zero2.json").resolve()


@pytest.mark.parametrize("name", DS_RECIPES)
def test_deepspeed_recipes_are_lint_clean(name):
    # rocmcheck's rules only: DeepSpeed's classes are exercised once per recipe below
    messages = lint_file(REPO / "recipes" / f"{name}.json", world_size=8, micro_batch=12, grad_accum=8, deep=False)
    assert [m.render() for m in messages if m.severity is not Severity.INFO] == []


@pytest.mark.parametrize("name", sorted(LF_RECIPES))
def test_llamafactory_recipes_are_lint_clean(name, tmp_path, monkeypatch):
    written = write_recipe(all_recipes()[name], tmp_path)
    llamafactory_data(tmp_path, "identity", "alpaca_en_demo")  # linted where it will run: its datasets are there
    monkeypatch.chdir(tmp_path)
    messages = lint_file(written[-1], world_size=8, deep=False)
    assert [m.render() for m in messages if m.severity is not Severity.INFO] == []


# Each DeepSpeed recipe with the training file that uses it (zero3 has none: a 7B-style 4 x 8 batch).
DS_USERS = {"zero2": "llama2-7b-full-sft", "zero3-offload": "llama3-70b-lora-sft-zero3-offload", "zero3": None}


@needs_deepspeed
@pytest.mark.parametrize("ds_name", DS_RECIPES)
def test_deepspeed_config_classes_accept_the_recipes(ds_name):
    """DeepSpeedConfig(...) with "auto" resolved the way the HF Trainer resolves it for the YAML that
    uses the recipe, on 8 GPUs: what the run hands to deepspeed.initialize."""
    import json

    user = DS_USERS[ds_name]
    if user:
        settings = TrainingSettings.from_args(yaml.safe_load((REPO / "recipes" / f"{user}.yaml").read_text()), 8)
        assert settings.bf16 and (settings.per_device_train_batch_size, settings.gradient_accumulation_steps) == \
            LF_RECIPES[user][1:]
    else:
        settings = TrainingSettings(per_device_train_batch_size=4, gradient_accumulation_steps=8, bf16=True,
                                    world_size=8)
    resolution = resolve_auto(json.loads((REPO / "recipes" / f"{ds_name}.json").read_text()), settings)
    assert resolution.mismatches == []
    result = run_deep_validation(resolution.config, world_size=8)
    assert result.ran, result.skipped_reason
    assert result.messages == []
    expected_batch = settings.per_device_train_batch_size * settings.gradient_accumulation_steps * 8
    assert result.parsed["train_batch_size"] == expected_batch
    assert result.parsed["bf16"] is True and result.parsed["fp16"] is False
    assert result.parsed["zero_stage"] == (2 if ds_name == "zero2" else 3)


def _llamafactory_python() -> str | None:
    """ROCMCHECK_LLAMAFACTORY_PYTHON (a venv with llamafactory, see docs/recipes.md), else this Python if it
    has llamafactory."""
    explicit = os.environ.get("ROCMCHECK_LLAMAFACTORY_PYTHON")
    if explicit:
        return explicit
    return sys.executable if importlib.util.find_spec("llamafactory") else None


LF_PARSE = textwrap.dedent("""\
    import os, socket, sys, yaml
    # A CPU box: no launcher, so provide the single-process torchrun environment LLaMA-Factory requires,
    # let TrainingArguments use the CPU, and skip its transformers upper pin (<=5.6.0). The port is one the
    # kernel hands out, so runs beside this one (other tests, other venvs) never meet on it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    os.environ.update(DISABLE_VERSION_CHECK="1", DS_ACCELERATOR="cpu", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0",
                      LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    from llamafactory.hparams import get_train_args
    args = yaml.safe_load(open(sys.argv[1]))
    args["use_cpu"] = True
    model, data, training, finetuning, generating = get_train_args(args)
    print("PARSED", finetuning.finetuning_type, training.per_device_train_batch_size,
          training.gradient_accumulation_steps, training.bf16, training.deepspeed)
""")


@pytest.mark.side_venv
@pytest.mark.skipif(_llamafactory_python() is None,
                    reason="llamafactory not importable (set ROCMCHECK_LLAMAFACTORY_PYTHON, see docs/recipes.md)")
@pytest.mark.parametrize("name", sorted(LF_RECIPES))
def test_llamafactory_parser_accepts_the_yaml(name, tmp_path):
    written = write_recipe(all_recipes()[name], tmp_path)
    out = subprocess.run([_llamafactory_python(), "-c", LF_PARSE, str(written[-1])], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    ds_name, micro, accum = LF_RECIPES[name]
    kind = "full" if "full" in name else "lora"
    assert f"PARSED {kind} {micro} {accum} True {tmp_path.resolve() / (ds_name + '.json')}" in out.stdout
