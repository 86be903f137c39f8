"""The bundled key table (rocmcheck/lint/deepspeed_keys.json) against the installed DeepSpeed:
if a DeepSpeed upgrade adds or drops keys, these fail and say which (regenerate the table)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lint_helpers import REPO, needs_deepspeed

from rocmcheck.lint import known_keys

CHILD_ENV = dict(os.environ, DS_ACCELERATOR="cpu", PYTHONPATH=str(REPO))


def _in_child(code: str) -> object:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=CHILD_ENV, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_deepspeed
def test_top_level_keys_cover_what_the_installed_deepspeed_reads():
    out = subprocess.run([sys.executable, "-m", "rocmcheck.lint.deepspeed_child", "--top-level-keys"],
                         capture_output=True, text=True, env=CHILD_ENV, timeout=120)
    read_by_deepspeed = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert read_by_deepspeed - known_keys.top_level_keys() == set()


@needs_deepspeed
def test_strict_sections_match_the_installed_pydantic_models():
    installed = _in_child(textwrap_code())
    if installed["version"] != known_keys.table()["deepspeed_version"]:
        import pytest

        pytest.skip(f"table made from DeepSpeed {known_keys.table()['deepspeed_version']}, "
                    f"installed {installed['version']}")
    for section, keys in installed["sections"].items():
        assert set(keys) == known_keys.section_keys(section), section


def textwrap_code() -> str:
    return (
        "import json, deepspeed\n"
        "from deepspeed.runtime.zero.config import DeepSpeedZeroConfig as Z\n"
        "from deepspeed.runtime.zero.offload_config import DeepSpeedZeroOffloadParamConfig as P, "
        "DeepSpeedZeroOffloadOptimizerConfig as O\n"
        "from deepspeed.runtime.precision_config import DeepSpeedBF16Config as B, DeepSpeedFP16Config as F\n"
        "def keys(m):\n"
        "    return sorted({n for n in m.model_fields} | {f.alias for f in m.model_fields.values() if f.alias})\n"
        "print(json.dumps({'version': deepspeed.__version__, 'sections': {'zero_optimization': keys(Z), "
        "'zero_optimization.offload_param': keys(P), 'zero_optimization.offload_optimizer': keys(O), "
        "'bf16': keys(B), 'fp16': keys(F)}}))\n"
    )


def test_table_is_self_consistent():
    table = known_keys.table()
    assert set(table["strict_sections"]) == set(known_keys.STRICT_SECTIONS)
    for path in table["phantom"]:
        section, key = path.rsplit(".", 1)
        assert key not in known_keys.section_keys(section)  # a phantom must really be unknown
    assert known_keys.closest("zero_optimisation", known_keys.top_level_keys()) == "zero_optimization"
