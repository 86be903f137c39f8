"""The doctor judges the person's Python, not its own: `--python PATH`, else an active virtualenv or conda
environment whose prefix is not rocmcheck's. Real venvs made here (`python -m venv --without-pip`, without
rocmcheck installed in them): one without torch, one holding a stand-in torch 2.99.0 (a package and its
dist-info, as pip would leave them), and this interpreter, which has the real torch, as rocmcheck's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmcheck.errors import BadInput
from rocmcheck.facts.python_env import find_target

REPO = Path(__file__).resolve().parents[1]
STAND_IN_TORCH = '''__version__ = "2.99.0+cpu"


class version:
    hip = None
    cuda = None
    git_version = "stand-in"


class cuda:
    @staticmethod
    def is_available():
        return False
'''


def _venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return folder


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    root = tmp_path_factory.mktemp("venvs")
    bare = _venv(root / "bare")
    with_torch = _venv(root / "with-torch")
    site = Path(subprocess.run([str(with_torch / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(STAND_IN_TORCH)
    (site / "torch-2.99.0.dist-info").mkdir()
    (site / "torch-2.99.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.99.0\n")
    (site / "torch-2.99.0.dist-info" / "RECORD").write_text("")
    return {"bare": bare, "with-torch": with_torch}


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    full.update(PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-m", "rocmcheck", "doctor", "--no-train", "--no-gpu-probes", "--only",
                           "torch,transformers", *args], capture_output=True, text=True, timeout=300, env=full)


def verdicts(proc: subprocess.CompletedProcess) -> tuple[dict, dict[str, str]]:
    report = json.loads(proc.stdout)
    return report["machine"], {r["id"]: r["status"] for r in report["results"]}


def test_the_active_virtualenv_is_judged_and_named(venvs):
    own, own_verdicts = verdicts(doctor("--json"))
    assert own_verdicts["torch.installed"] == "pass" and own["torch"] != "2.99.0"  # rocmcheck's own has torch
    machine, found = verdicts(doctor("--json", VIRTUAL_ENV=str(venvs["bare"])))
    assert found["torch.installed"] == "fail" and machine["torch"] is None
    machine, found = verdicts(doctor("--json", VIRTUAL_ENV=str(venvs["with-torch"])))
    assert found["torch.installed"] == "pass" and machine["torch"] == "2.99.0+cpu"
    text = doctor(VIRTUAL_ENV=str(venvs["bare"]), COLUMNS="300").stdout
    python = venvs["bare"] / "bin" / "python"
    assert f"stack: Python {sys.version.split()[0]} ({python}, the active virtualenv)" in text.splitlines()
    assert "torch.installed" in text


def test_python_names_the_interpreter_over_the_active_environment(venvs):
    machine, found = verdicts(doctor("--json", "--python", str(venvs["with-torch"]),
                                     CONDA_PREFIX=str(venvs["bare"])))
    assert found["torch.installed"] == "pass" and machine["torch"] == "2.99.0+cpu"
    proc = doctor("--python", str(venvs["bare"] / "nope"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "not an executable Python" in proc.stderr


def test_rocmchecks_own_environment_is_not_another_one(tmp_path):
    assert find_target(None, {"VIRTUAL_ENV": sys.prefix}) == (None, "")
    assert find_target(sys.executable, {}) == (None, "")
    with pytest.raises(BadInput):
        find_target(str(tmp_path), {})  # a folder that is no environment


def test_the_fine_tune_runs_in_the_judged_interpreter(tmp_path):
    """The doctor's train stage starts its child with the judged Python (here a second venv, made with
    --system-site-packages so it sees a real torch, without rocmcheck installed in it): the run reports that
    interpreter, and its steps reach the caller."""
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.doctor_stage import run_train_stage

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(tmp_path / "v")],
                   check=True, timeout=120)
    python = str(tmp_path / "v" / "bin" / "python")
    if subprocess.run([python, "-c", "import torch, transformers"], capture_output=True, timeout=300).returncode:
        pytest.skip("the base interpreter under this venv has no torch and transformers to see")
    steps: list[int] = []
    results = run_train_stage(timeout_s=900, device="cpu", python=python, on_step=lambda s, n, e: steps.append(s),
                              config=TrainConfig(device="cpu", steps=10, profile=False, eval_prompts=8))
    run = next(r for r in results if r.id == "train.run")
    assert run.status.value == "pass", run.summary
    assert run.data["python"] == python and run.data["python"] != sys.executable
    assert steps == list(range(1, 11))
