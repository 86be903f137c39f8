"""axolotl configs judged by the installed axolotl's own config schema (a real child process importing axolotl, in
this Python or the one ROCMCHECK_AXOLOTL_PYTHON names; skipped when neither has axolotl), on axolotl's own example
(tests/fixtures/public-configs/not-judged, README there); without axolotl, named and skipped."""

from __future__ import annotations

import os

import pytest
from lint_helpers import REPO, by_code

from rocmcheck.lint import lint_file
from rocmcheck.lint.axolotl_config import AXOLOTL_PYTHON_ENV, axolotl_python
from rocmcheck.lint.files import NotJudged
from rocmcheck.lint.run import LintRun
from rocmcheck.result import Status

# axolotl-ai-cloud/axolotl examples/llama-3/3b-fp8-fsdp2.yaml: Llama-3.2-3B, FP8, FSDP2, the Liger plugin.
EXAMPLE = REPO / "tests" / "fixtures" / "public-configs" / "not-judged" / "axolotl-3b-fp8-fsdp2.yaml"


def needs_axolotl() -> None:
    if not os.environ.get(AXOLOTL_PYTHON_ENV):
        pytest.importorskip("axolotl")


def run(path) -> LintRun:
    lint = LintRun(options={"deep": True})
    lint.lint_all([str(path)])
    return lint


def test_without_axolotl_the_config_is_skipped_naming_axolotl(monkeypatch):
    with pytest.raises(NotJudged, match="an axolotl config: not judged \\(axolotl's own config schema judges it, and "
                                        "deep validation is turned off\\)"):
        lint_file(EXAMPLE, deep=False)
    monkeypatch.setattr("rocmcheck.lint.files.axolotl_python", lambda: None)
    [result] = run(EXAMPLE).results()
    assert result.id == "lint.file.not_judged" and result.data["owner"] == "axolotl"
    assert "axolotl is not installed in this Python" in result.summary


@pytest.mark.side_venv
def test_axolotls_own_example_passes_its_schema_with_its_plugins_keys():
    """liger_rope and the other liger_* keys are the Liger plugin's (plugins:), known once it is registered."""
    needs_axolotl()
    lint = run(EXAMPLE)
    assert [m.render() for m in lint.messages] == [] and lint.refused == []
    [(_, _, choice)] = lint.judged
    assert choice.consumer.id == "axolotl"
    assert [r.id for r in lint.results()] == ["lint.file.clean"]


@pytest.mark.side_venv
def test_a_misspelt_key_and_a_wrong_type_are_named_by_axolotls_schema(tmp_path):
    """The example with one key misspelt and one value of the wrong type: axolotl's schema requires the key the
    misspelt one stands for (learning_rate: one finding, the rename) and refuses the value."""
    needs_axolotl()
    text = EXAMPLE.read_text(encoding="utf-8").replace("learning_rate: 2e-5", "learning_rat: 2e-5")
    broken = tmp_path / "3b-fp8-fsdp2.yaml"
    broken.write_text(text.replace("micro_batch_size: 16", "micro_batch_size: sixteen"), encoding="utf-8")
    lint = run(broken)
    [typo] = by_code(lint.messages, "lint.axolotl.unknown_key")
    assert typo.is_error and typo.key_path == "learning_rat" and typo.did_you_mean == "learning_rate"
    assert typo.line == 47 and "'learning_rate' is required (Field required)" in typo.message
    [value] = by_code(lint.messages, "lint.axolotl.rejected")
    assert value.is_error and value.key_path == "micro_batch_size" and "valid integer" in value.message
    assert any(r.status is Status.FAIL for r in lint.results())
    assert axolotl_python() is not None
    # a misspelt key the schema does not require: axolotl ignores it without a word
    quiet = tmp_path / "quiet.yaml"
    quiet.write_text(EXAMPLE.read_text(encoding="utf-8").replace("micro_batch_size: 16", "micro_batch_sise: 16"),
                     encoding="utf-8")
    [typo] = by_code(run(quiet).messages, "lint.axolotl.unknown_key")
    assert typo.did_you_mean == "micro_batch_size" and "the setting is not applied" in typo.message
