"""TRL recipes judged by the installed TRL's own parser (a real child process importing trl; the files are in
tests/fixtures/public-configs/trl, README there; skipped when neither this Python nor ROCMCHECK_TRL_PYTHON has trl),
never by HfArgumentParser's "Some keys are not used"; without TRL, named and skipped."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from lint_helpers import REPO, by_code

from rocmcheck.lint import Severity, lint_file, owners, trl_recipe
from rocmcheck.lint.files import NotJudged
from rocmcheck.lint.run import LintRun
from rocmcheck.result import Status

FIXTURES = REPO / "tests" / "fixtures" / "public-configs" / "trl"
NEMO = FIXTURES / "trl-nemo_gym-config.yaml"  # huggingface/trl's own GRPO recipe
OPEN_R1 = FIXTURES / "open-r1-217-confg_full.yaml"  # huggingface/open-r1#217


def needs_trl() -> None:
    """TRL in this Python, or in the one ROCMCHECK_TRL_PYTHON names (CI's side venv)."""
    if not os.environ.get(trl_recipe.TRL_PYTHON_ENV):
        pytest.importorskip("trl")


def run(path: Path, **options) -> LintRun:
    lint = LintRun(options={"deep": True, **options})
    lint.lint_all([str(path)])
    return lint


def errors(lint: LintRun) -> list[str]:
    return [m.render() for m in lint.messages if m.is_error]


def test_a_recipe_is_a_trl_recipe_and_without_trl_it_is_skipped_naming_trl(monkeypatch):
    """Never judged by another program's parser: with deep validation off, or without TRL, a skip that names TRL."""
    with pytest.raises(NotJudged, match="a TRL recipe \\(TrlParser\\): not judged \\(TRL's own parser judges it, and "
                                        "deep validation is turned off\\)") as off:
        lint_file(NEMO, deep=False)
    assert off.value.owner == "trl"
    monkeypatch.setattr("rocmcheck.lint.files.trl_python", lambda: None)
    lint = LintRun(options={"deep": True})
    lint.lint_all([str(NEMO)])
    [result] = lint.results()
    assert result.id == "lint.file.not_judged" and result.status is Status.SKIP and result.data["owner"] == "trl"
    assert "TRL is not installed in this Python" in result.summary and lint.messages == []


def test_an_alignment_handbook_recipe_is_its_own_scripts_not_trls():
    data = {"model_name_or_path": "m", "dataset_mixture": {"datasets": []}, "use_peft": True}
    assert owners.foreign_owner(data) == "alignment_handbook"


@pytest.mark.side_venv
def test_trls_own_grpo_recipe_passes_with_trls_parser():
    needs_trl()
    lint = run(NEMO, world_size=16)
    assert errors(lint) == [] and lint.refused == []
    [(_, _, choice)] = lint.judged
    assert choice.consumer.id == "trl"
    assert not [m for m in lint.messages if m.code.startswith("lint.training.")]  # never HfArgumentParser's rule
    [keys] = by_code(lint.messages, "lint.trl.script_keys")
    assert "`trl grpo` classes" in keys.message and "gym_configs" in keys.message and "model_name" in keys.message
    assert [r.id for r in lint.results() if r.status is Status.PASS] == ["lint.file.clean"]
    # The run's process count unknown: GRPO's eval-batch check (1 x N divisible by 16 generations) is a warning that
    # says which counts fail, never an error.
    alone = run(NEMO)
    assert errors(alone) == []
    [warning] = by_code(alone.messages, "lint.trl.processes")
    assert warning.key_path == "num_generations" and "1, 2, 4, 8 processes" in warning.message
    assert "starts with 16" in warning.message


@pytest.mark.side_venv
def test_a_misspelt_key_and_a_wrong_type_are_named_by_trls_parser(tmp_path):
    """TRL's recipe with one key misspelt and one value of the wrong type (the real file, two lines changed)."""
    needs_trl()
    text = NEMO.read_text(encoding="utf-8")
    text = text.replace("lr_scheduler_type:", "lr_sheduler_type:").replace("per_device_train_batch_size: 1",
                                                                            "per_device_train_batch_size: one")
    broken = tmp_path / "config.yaml"
    broken.write_text(text, encoding="utf-8")
    lint = run(broken, world_size=16)
    [typo] = by_code(lint.messages, "lint.trl.unknown_key")
    assert typo.is_error and typo.key_path == "lr_sheduler_type" and typo.did_you_mean == "lr_scheduler_type"
    assert "unrecognized arguments" in typo.message and typo.line == 30
    [value] = by_code(lint.messages, "lint.trl.rejected")
    assert value.is_error and value.key_path == "per_device_train_batch_size" and "invalid int value" in value.message
    assert any(r.status is Status.FAIL for r in lint.results())


@pytest.mark.side_venv
def test_the_open_r1_recipe_of_the_thread_fails_at_num_generations_with_its_own_process_count(tmp_path):
    """huggingface/open-r1#217: run on 7 processes (its num_processes), GRPO's default 8 generations do not divide the
    batch; the thread's fix is num_generations: 7. Judged with the file's num_processes when --gpus is not given."""
    needs_trl()
    lint = run(OPEN_R1)
    [caught] = by_code(lint.messages, "lint.trl.rejected")
    assert caught.is_error and caught.key_path == "num_generations"
    assert "with 7 processes (num_processes in the file)" in caught.message
    fixed = tmp_path / "confg_full.yaml"
    shutil.copy(OPEN_R1, fixed)
    fixed.write_text(OPEN_R1.read_text(encoding="utf-8") + "num_generations: 7\n", encoding="utf-8")
    assert not by_code(run(fixed).messages, "lint.trl.rejected")


def test_a_trl_check_that_cannot_run_is_never_a_pass(monkeypatch, tmp_path):
    monkeypatch.setattr("rocmcheck.lint.files.trl_python", lambda: "/nonexistent/python")
    monkeypatch.setattr(trl_recipe, "trl_python", lambda: "/nonexistent/python")
    lint = run(NEMO)
    [m] = by_code(lint.messages, "lint.trl.not_asked")
    assert m.severity is Severity.WARNING and not [r for r in lint.results() if r.status is Status.PASS]


@pytest.mark.side_venv
def test_with_the_script_named_a_key_neither_trl_nor_the_script_defines_is_an_error(tmp_path):
    """--script: the recipe's own script's arguments (read from its source) and TRL's classes are the whole parser."""
    needs_trl()
    from rocmcheck.lint.script_args import script_keys

    script = tmp_path / "train_multi_environment.py"
    script.write_text("from dataclasses import dataclass\n\n\n@dataclass\nclass NemoGymArguments:\n"
                      "    model_name: str = ''\n    dataset_path: str = ''\n    eval_dataset_path: str = ''\n"
                      "    gym_configs: list = None\n    task: str = ''\n", encoding="utf-8")
    lint = run(NEMO, world_size=16, script=(script.name, frozenset(script_keys(script))))
    assert not by_code(lint.messages, "lint.trl.script_keys")
    [m] = by_code(lint.messages, "lint.trl.unknown_key")
    assert m.is_error and m.key_path == "project_name" and "train_multi_environment.py" in m.message
