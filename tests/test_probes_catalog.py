"""The probe catalog: every probe defined once, in its own module, with its verdict id written out literally where
its judge is; the catalog only lists them; and nothing in the probes package (or the commands that run it)
assembles a probe id at run time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rocmcheck.probes.catalog import BY_ID, BY_NAME, PROBE_IDS, PROBE_NAMES, PROBES
from rocmcheck.probes.spec import Probe

PACKAGE = Path(__file__).resolve().parents[1] / "rocmcheck"
MINE = [*(PACKAGE / "probes").rglob("*.py"), PACKAGE / "commands" / "probe.py"]


def _string_constants() -> dict[str, list[str]]:
    """Every string literal in the probes package and `rocmcheck probe` -> the modules it is written in (the
    literal parts of f-strings included)."""
    found: dict[str, list[str]] = {}
    for path in MINE:
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.setdefault(node.value, []).append(module)
    return found


STRINGS = _string_constants()


@pytest.mark.parametrize("probe", PROBES, ids=PROBE_NAMES)
def test_each_id_is_written_once_in_the_module_of_its_judge(probe):
    assert STRINGS.get(probe.id) == [probe.judge.__module__]
    assert probe.judge.__module__ == f"rocmcheck.probes.catalog.{probe.name}"
    for runner in (probe.run, probe.run_cpu):
        assert runner is None or runner.__module__ == probe.judge.__module__


def test_no_probe_id_is_assembled_from_a_prefix():
    # f"probe.{name}" leaves the literal "probe." in the tree; only the spec's own prefix constant may hold it.
    assert STRINGS.get("probe.", []) == ["rocmcheck.probes.spec"]


def test_the_catalog_lists_every_definition_in_run_order():
    modules = sorted(p.stem for p in (PACKAGE / "probes" / "catalog").glob("*.py") if p.stem != "__init__")
    assert sorted(PROBE_NAMES) == modules
    assert PROBE_NAMES[0] == "memory" and PROBE_NAMES[-1] == "collective"  # free memory first; the interconnect last
    assert len(set(PROBE_IDS)) == len(PROBES) and set(BY_ID) == set(PROBE_IDS) and set(BY_NAME) == set(PROBE_NAMES)
    assert all(p.run is not None or p.child is not None for p in PROBES)  # each runs somewhere
    assert [p.name for p in PROBES if p.builds] == ["deepspeed_ops"]
    assert BY_NAME["deepspeed_ops"].limit(True) > BY_NAME["deepspeed_ops"].limit(False)


def test_a_probe_id_must_be_probe_dot_name():
    def judge(data, ctx):
        raise AssertionError("never called")

    assert Probe("probe.x_1", "x", 1, judge).name == "x_1"
    for bad in ("gemm", "probe.", "probe.a.b", "train.gemm"):
        with pytest.raises(ValueError):
            Probe(bad, "x", 1, judge)
