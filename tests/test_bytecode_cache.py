"""rocmcheck's private bytecode cache (rocmcheck/bytecode.py), in real Python children on a real package folder: on only
where Python would compile the package in every process, writing only into the cache folder (never beside the
sources), read by the next process, inherited by children, off with ROCMCHECK_BYTECODE_CACHE=0, filled ahead on a
first run from the shipped list of sources (bytecode_prefill.py); the doctor's torch.bytecode fact still says what the
person's own processes see."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from rocmcheck import bytecode, bytecode_prefill

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


def cached(cache: Path, source: Path) -> Path:
    """Where the private cache keeps `source`'s bytecode."""
    return cache / "rocmcheck" / "pycache" / str(source.parent).lstrip(os.sep) / f"{source.stem}.{CACHE_TAG}.pyc"


def test_the_cli_turns_it_on_for_the_commands_that_import_torch_only_and_prefills_it_once(tmp_path):
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", bytecode.MARKER_ENV)}
    env.update(PYTHONDONTWRITEBYTECODE="1", ROCMCHECK_BYTECODE_CACHE="1", XDG_CACHE_HOME=str(cache),
               PYTHONPATH=str(REPO))
    # a torch._dynamo source the doctor's check list never imports: only the prefill compiles it
    dynamo = Path(importlib.util.find_spec("torch").origin).parent / "_dynamo" / "symbolic_convert.py"
    for argv in (["lint", "--help"], ["doctor", "--list-checks"]):
        subprocess.run([sys.executable, "-m", "rocmcheck", *argv], capture_output=True, env=env, timeout=300,
                       check=True)
        written = sorted(p.name for p in cache.rglob("*.pyc"))
        if argv[0] == "lint":
            assert written == []  # lint imports no torch: it never turns the cache on
    assert any(name.startswith("checks") or name.startswith("doctor") for name in written), written[:10]
    assert cached(cache, dynamo).is_file() and cached(cache, Path(bytecode._source_of("torch"))).is_file()
    mtime = cached(cache, dynamo).stat().st_mtime_ns
    subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--list-checks"], capture_output=True, env=env,
                   timeout=120, check=True)
    assert cached(cache, dynamo).stat().st_mtime_ns == mtime  # the cache holds torch now: no second prefill


PREFILL = """
import json
from rocmcheck import bytecode, bytecode_prefill
folder = bytecode.use_private_cache()
cold = bytecode.cold()
first = bytecode_prefill.prefill(lines=LINES)
print(json.dumps({"folder": folder, "cold": [cold, bytecode.cold()], "first": first,
                  "again": bytecode_prefill.prefill(lines=LINES)}))
"""


def test_the_prefill_compiles_the_listed_sources_into_the_cache_with_the_cores(tmp_path):
    from rocmcheck.bytecode_compile import CHUNK, cores

    site, cache = fake_torch(tmp_path), tmp_path / "cache"
    many = [f"m{i}" for i in range(3 * CHUNK)]  # enough for a pool of workers on a 2-core machine
    for name in many:
        (site / "torch" / f"{name}.py").write_text(f"NAME = {name!r}\n")
    (site / "torch" / "broken.py").write_text("def (:\n")
    lines = (["# a comment", "site:torch/__init__.py", "site:torch/broken.py", "site:torch/gone.py",
              "site:no_such_package/x.py", "stdlib:json/decoder.py", "stdlib:", "later:a kind this version skips"]
             + [f"site:torch/{name}.py" for name in many])
    got = run(PREFILL.replace("LINES", repr(lines)), site, cache, PYTHONDONTWRITEBYTECODE="1")
    listed = 3 + len(many)  # torch/__init__, broken, json.decoder and the many: what exists and is not compiled
    workers = max(1, min(cores(), listed // CHUNK))
    assert got["cold"] == [True, False] and got["first"]["sources"] == listed, got
    assert got["first"]["said"].startswith(f"compiled {listed - 1} of {listed} sources in "), got["first"]
    assert got["first"]["said"].endswith(f" by {workers} processes")
    assert got["again"]["sources"] == 1  # only the source that does not compile is left, for its importer
    for source in [site / "torch" / "__init__.py", site / "torch" / "m7.py",
                   Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py"]:
        assert cached(cache, source).is_file(), source
    assert not (site / "torch" / "__pycache__").exists()  # nothing beside the sources
    assert not cached(cache, site / "torch" / "broken.py").exists()


def test_no_prefill_where_the_cache_is_off_or_by_a_nodes_later_ranks(tmp_path):
    site, cache = fake_torch(tmp_path), tmp_path / "cache"
    code = PREFILL.replace("LINES", repr(["site:torch/__init__.py"]))
    got = run(code, site, cache)  # Python writes its own bytecode here
    assert got == {"folder": None, "cold": [False, False], "first": None, "again": None}
    assert not cache.exists()
    got = run(code, site, cache, PYTHONDONTWRITEBYTECODE="1", LOCAL_RANK="3")  # rank 0 of the node prefills
    assert got["folder"] and got["cold"] == [True, True] and got["first"] is None
    assert run(code, site, cache, PYTHONDONTWRITEBYTECODE="1", LOCAL_RANK="0")["first"]["sources"] == 1


def test_the_shipped_list_names_what_a_run_imports_and_resolves_here():
    from rocmcheck import package_data

    lines = package_data.read_text("rocmcheck", bytecode_prefill.SOURCES_FILE).splitlines()
    entries = [line for line in lines if line and not line.startswith("#")]
    assert all(e.partition(":")[0] in ("stdlib", "site") and ".." not in e and not e.partition(":")[2].startswith("/")
               for e in entries), [e for e in entries if ".." in e][:3]
    for needed in ("site:torch/__init__.py", "site:torch/_dynamo/__init__.py", "site:transformers/modeling_utils.py",
                   "site:rocmcheck/cli.py", "stdlib:json/decoder.py"):
        assert needed in entries
    resolved = bytecode_prefill.listed_sources(entries)
    assert len(resolved) > 0.8 * len(entries), (len(resolved), len(entries))  # recorded with this test's packages
    assert all(os.path.isfile(p) for p in resolved)
