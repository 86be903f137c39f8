"""torch.bytecode: the fact is read by a real Python in a child process on a real package folder (before the
package is imported), the verdict warns only where every process would compile the package again, and the
fix, run as pasted by bash, writes the bytecode the next process finds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from machines import amd_machine, verdicts

from rocmcheck import fixes
from rocmcheck.fixes import FixKind
from rocmcheck.result import Status

REPO = Path(__file__).resolve().parents[1]
STATE = ("import json, sys; from rocmcheck.facts.python_probe import bytecode_state; "
         "print(json.dumps(bytecode_state(sys.argv[1])))")


def make_package(root: Path, name: str = "fakepkg") -> Path:
    pkg = root / "site" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 42\n")
    return root / "site"


def state(site: Path, package: str, **env: str) -> dict | None:
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    full.update(env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    out = subprocess.run([sys.executable, "-c", STATE, package], capture_output=True, text=True, env=full, timeout=60,
                         check=True)
    return json.loads(out.stdout)


def import_it(site: Path, **env: str) -> None:
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    full.update(env, PYTHONPATH=str(site))
    subprocess.run([sys.executable, "-c", "import fakepkg"], env=full, timeout=60, check=True)


def test_the_fact_follows_what_python_does(tmp_path):
    site = make_package(tmp_path)
    first = state(site, "fakepkg", PYTHONDONTWRITEBYTECODE="1")
    assert first["cached"] is False and first["dont_write_bytecode"] is True and first["writable"] is True
    assert first["site_dir"] == str(site) and first["source"].endswith("fakepkg/__init__.py")
    import_it(site, PYTHONDONTWRITEBYTECODE="1")  # the lent H200 image: nothing is written, every time
    assert state(site, "fakepkg")["cached"] is False
    import_it(site)  # a normal Python writes it on the first import
    assert state(site, "fakepkg")["cached"] is True
    prefix = tmp_path / "cache"
    moved = state(site, "fakepkg", PYTHONPYCACHEPREFIX=str(prefix))
    assert moved["bytecode"].startswith(str(prefix)) and moved["cached"] is False and moved["writable"] is True
    assert state(site, "no_such_package_here") is None


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_the_pasted_fix_writes_bytecode_despite_pythondontwritebytecode(tmp_path):
    site = make_package(tmp_path)
    before = state(site, "fakepkg", PYTHONDONTWRITEBYTECODE="1")
    fix = fixes.compile_bytecode(before["site_dir"], before["writable"])
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", fix.line()], env=env, timeout=120, check=True)
    assert state(site, "fakepkg", PYTHONDONTWRITEBYTECODE="1")["cached"] is True


def test_the_read_only_fix_is_for_whoever_builds_the_environment():
    fix = fixes.compile_bytecode("/opt/venv/lib/python3.12/site-packages", writable=False)
    assert fix.kind is FixKind.NOTE
    assert "python -m compileall -q -j 0 /opt/venv/lib/python3.12/site-packages" in fix.text
    assert "PYCACHEPREFIX" not in fix.line()


def test_the_verdict():
    machine = amd_machine()
    torch_rocm = machine.probes["torch"]
    site = "/opt/torch/.venv/lib/python3.12/site-packages"
    lent_image = {"source": f"{site}/torch/__init__.py",
                  "bytecode": f"{site}/torch/__pycache__/__init__.cpython-312.pyc",
                  "cached": False, "dont_write_bytecode": True, "pycache_prefix": None, "writable": True,
                  "site_dir": site}

    def verdict(bytecode):
        machine.probes["torch"] = {**torch_rocm, "bytecode": bytecode}
        return verdicts(machine, "torch.bytecode")["torch.bytecode"]

    warned = verdict(lent_image)
    assert warned.status == Status.WARN and "PYTHONDONTWRITEBYTECODE is set" in warned.summary
    assert warned.fix.line().startswith(f"python -m compileall -q -j 0 {site}")
    assert verdict({**lent_image, "cached": True}).status == Status.PASS
    assert verdict({**lent_image, "dont_write_bytecode": False}).status == Status.PASS  # the first import writes it
    readonly = verdict({**lent_image, "dont_write_bytecode": False, "writable": False})
    assert readonly.status == Status.WARN and "not writable" in readonly.summary
    assert readonly.fix.kind is FixKind.NOTE and "compileall" in readonly.fix.line()
    assert verdict(None).status == Status.SKIP  # an older bundle


def test_the_real_probe_reports_this_torch():
    """The probe child on this machine's own torch: the fact is there and its verdict is not a crash."""
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import json
        from rocmcheck.facts.python_probe import probe_torch
        print(json.dumps(probe_torch()["bytecode"]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    fact = json.loads(out.stdout.strip().splitlines()[-1])
    assert fact["source"].endswith(os.path.join("torch", "__init__.py"))
    assert isinstance(fact["cached"], bool) and isinstance(fact["writable"], bool)
