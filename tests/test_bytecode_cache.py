"""rocmcheck's private bytecode cache (rocmcheck/bytecode.py), in real Python children on a real package folder: on only
where Python would compile the package in every process, writing only into the cache folder (never beside the
sources), read by the next process, inherited by children, off with ROCMCHECK_BYTECODE_CACHE=0; the doctor's
torch.bytecode fact still says what the person's own processes see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rocmcheck import bytecode

REPO = Path(__file__).resolve().parents[1]
CACHE_TAG = sys.implementation.cache_tag


def fake_torch(root: Path) -> Path:
    """A package named torch with no bytecode, found before any other (a site folder first on PYTHONPATH)."""
    pkg = root / "site" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 42\n")
    return root / "site"


def run(code: str, site: Path | None, cache: Path, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", bytecode.SWITCH_ENV, bytecode.MARKER_ENV)}
    full.update(env, XDG_CACHE_HOME=str(cache),
                PYTHONPATH=os.pathsep.join(([str(site)] if site else []) + [str(REPO)]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=60,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


ENABLE_AND_IMPORT = """
import json, os, sys, subprocess
from rocmcheck import bytecode
folder = bytecode.use_private_cache()
import torch
child = subprocess.run([sys.executable, "-c", "import json, os, sys; from rocmcheck import bytecode; "
                        "print(json.dumps([sys.pycache_prefix, sys.flags.dont_write_bytecode, "
                        "bytecode.persons_settings(), os.environ.get('PYTHONDONTWRITEBYTECODE')]))"],
                       capture_output=True, text=True, check=True)
print(json.dumps({"folder": folder, "why_not": bytecode.why_not(), "torch": torch.VALUE,
                  "child": json.loads(child.stdout)}))
"""


def test_on_where_every_process_would_compile_and_it_writes_only_into_its_folder(tmp_path):
    site, cache = fake_torch(tmp_path), tmp_path / "cache"
    first = run(ENABLE_AND_IMPORT, site, cache, PYTHONDONTWRITEBYTECODE="1")
    folder = cache / "rocmcheck" / "pycache"
    assert first["folder"] == str(folder) and first["torch"] == 42
    written = folder / str(site / "torch").lstrip(os.sep) / f"__init__.{CACHE_TAG}.pyc"
    assert written.is_file(), sorted(str(p) for p in folder.rglob("*.pyc"))[:5]
    assert not (site / "torch" / "__pycache__").exists()  # nothing beside the sources
    prefix, dont_write, persons, env_flag = first["child"]
    assert prefix == str(folder) and dont_write == 0 and env_flag is None  # children read and write the cache
    assert persons == [True, None]  # ... and still know what the person's own processes do
    mtime = written.stat().st_mtime_ns
    again = run(ENABLE_AND_IMPORT, site, cache, PYTHONDONTWRITEBYTECODE="1")
    assert again["folder"] == str(folder) and written.stat().st_mtime_ns == mtime  # read, not compiled again


WHY_NOT = ("import json; from rocmcheck import bytecode; "
           "print(json.dumps([bytecode.why_not(), bytecode.use_private_cache()]))")


def test_off_wherever_python_already_has_or_writes_bytecode_or_the_person_said_so(tmp_path):
    site, cache = fake_torch(tmp_path), tmp_path / "cache"
    assert run(WHY_NOT, site, cache) == ["Python writes bytecode next to the sources itself", None]
    assert run(WHY_NOT, site, cache, PYTHONDONTWRITEBYTECODE="1", ROCMCHECK_BYTECODE_CACHE="0") == \
        ["ROCMCHECK_BYTECODE_CACHE=0", None]
    mine = tmp_path / "mine"
    reason, folder = run(WHY_NOT, site, cache, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(mine))
    assert folder is None and "PYTHONPYCACHEPREFIX is set" in reason
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site)], check=True, timeout=60)
    reason, folder = run(WHY_NOT, site, cache, PYTHONDONTWRITEBYTECODE="1")
    assert folder is None and "bytecode is installed" in reason
    # ROCMCHECK_BYTECODE_CACHE=1: on all the same (what the benchmark measures a machine without bytecode with)
    assert run(WHY_NOT, site, cache, PYTHONDONTWRITEBYTECODE="1", ROCMCHECK_BYTECODE_CACHE="1")[1] == \
        str(cache / "rocmcheck" / "pycache")
    assert not list(cache.rglob("*.pyc"))  # nothing imported after it turned on, so nothing written


PROBE_STATE = ("import json; from rocmcheck.bytecode import use_private_cache; use_private_cache(); "
               "from rocmcheck.facts.python_probe import bytecode_state; print(json.dumps(bytecode_state('torch')))")


def test_the_torch_bytecode_fact_is_the_persons_view_not_the_private_cache(tmp_path):
    site, cache = fake_torch(tmp_path), tmp_path / "cache"
    run(ENABLE_AND_IMPORT, site, cache, PYTHONDONTWRITEBYTECODE="1")  # the private cache now holds torch's bytecode
    state = run(PROBE_STATE, site, cache, PYTHONDONTWRITEBYTECODE="1")
    assert state["cached"] is False and state["dont_write_bytecode"] is True and state["pycache_prefix"] is None
    assert state["bytecode"] == str(site / "torch" / "__pycache__" / f"__init__.{CACHE_TAG}.pyc")


def test_the_cli_turns_it_on_for_the_commands_that_import_torch_only(tmp_path):
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", bytecode.MARKER_ENV)}
    env.update(PYTHONDONTWRITEBYTECODE="1", ROCMCHECK_BYTECODE_CACHE="1", XDG_CACHE_HOME=str(cache),
               PYTHONPATH=str(REPO))
    for argv in (["lint", "--help"], ["doctor", "--list-checks"]):
        subprocess.run([sys.executable, "-m", "rocmcheck", *argv], capture_output=True, env=env, timeout=120,
                       check=True)
        written = sorted(p.name for p in cache.rglob("*.pyc"))
        if argv[0] == "lint":
            assert written == []  # lint imports no torch: it never turns the cache on
    assert any(name.startswith("checks") or name.startswith("doctor") for name in written), written[:10]
