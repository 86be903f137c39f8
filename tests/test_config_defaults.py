"""Option defaults from the user's config file, the project's, and ROCMCHECK_* variables (rocmcheck/commands/
config.py), with the precedence README and docs/config.md state: flag > environment > project > user. Read
in-process for the precedence, and through the real command line for the wiring, a bad file, --fail-on, the
"did you mean" of a mistyped command and the completion of recipe, probe and check names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from rocmcheck.cli import COMMANDS, cli
from rocmcheck.commands.config import default_map, user_config_path
from rocmcheck.commands.monitor import reader_lines
from rocmcheck.errors import BadInput

REPO = Path(__file__).resolve().parents[1]


def commands(name: str):
    return cli.get_command(click.Context(cli), name)


def defaults(tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    return default_map(commands, sorted(COMMANDS), env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"), **(env or {})},
                       cwd=tmp_path / "project")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "xdg" / "rocmcheck").mkdir(parents=True)
    (tmp_path / "project").mkdir()
    (tmp_path / "xdg" / "rocmcheck" / "config.toml").write_text(
        '[doctor]\narch = ["mi300x"]\nlevel = 2\nno-train = true\n[smoke-train]\nsteps = 20\n')
    return tmp_path


def test_project_over_user_and_environment_over_both(files):
    assert defaults(files) == {"doctor": {"archs": ["mi300x"], "level": 2, "no_train": True},
                               "smoke-train": {"steps": 20}}
    (files / "project" / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.rocmcheck.doctor]\nlevel = 3\n')
    assert defaults(files)["doctor"]["level"] == 3
    (files / "project" / "rocmcheck.toml").write_text('[doctor]\nlevel = 1\nskip = "host.iommu"\n')
    got = defaults(files, {"ROCMCHECK_DOCTOR_LEVEL": "2", "ROCMCHECK_DOCTOR_ONLY": "os gpu"})
    assert got["doctor"] == {"archs": ["mi300x"], "level": "2", "no_train": True, "skip": ["host.iommu"],
                             "only": ["os", "gpu"]}


def test_the_user_file_follows_xdg_config_home():
    assert user_config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == Path("/x/rocmcheck/config.toml")
    assert user_config_path({"HOME": "/h"}) == Path("/h/.config/rocmcheck/config.toml")


@pytest.mark.parametrize("text, said", [
    ("[doctor\n", "not valid TOML"),
    ("[doctr]\nlevel = 2\n", "did you mean [doctor]?"),
    ("[doctor]\nlevle = 2\n", "levle is not an option of `rocmcheck doctor`"),
    ("[doctor]\nlevel = 9\n", "9 is not in the range"),
    ("[doctor]\nlevel = [1, 2]\n", "a list, but the option takes one value"),
    ("doctor = 1\n", "must be a table"),
])
def test_a_bad_file_names_itself(files, text, said):
    (files / "project" / "rocmcheck.toml").write_text(text)
    with pytest.raises(BadInput, match="rocmcheck.toml") as caught:
        defaults(files)
    assert said in str(caught.value)


def cli_run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "rocmcheck", *args], capture_output=True, text=True, timeout=120,
                          env=full, cwd=cwd)


def test_the_command_line_wins_and_a_bad_file_is_one_line_and_exit_2(files):
    env = {"XDG_CONFIG_HOME": str(files / "xdg")}
    project = '[doctor]\nonly = ["os.kernel"]\nno-gpu-probes = true\nlevel = 1\n'  # the user's level 2 needs probes
    (files / "project" / "rocmcheck.toml").write_text(project)
    quick = ("doctor", "--json")
    ids = [r["id"] for r in json.loads(cli_run(*quick, env=env, cwd=files / "project").stdout)["results"]]
    assert ids == ["os.kernel"]
    env["ROCMCHECK_DOCTOR_ONLY"] = "os.release"
    ids = [r["id"] for r in json.loads(cli_run(*quick, env=env, cwd=files / "project").stdout)["results"]]
    assert ids == ["os.release"]
    ids = [r["id"] for r in json.loads(cli_run(*quick, "--only", "host.shm", env=env,
                                               cwd=files / "project").stdout)["results"]]
    assert ids == ["host.shm"]
    (files / "project" / "rocmcheck.toml").write_text("[doctor]\nlevel = 'two'\n")
    proc = cli_run(*quick, env=env, cwd=files / "project")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "rocmcheck.toml" in proc.stderr


def test_fail_on_warn_makes_a_warning_exit_1(tmp_path):
    """container.flags warns on this box (a container started without the GPU devices)."""
    args = ("doctor", "--only", "container", "--no-train", "--no-gpu-probes", "--json")
    plain = cli_run(*args, cwd=tmp_path)
    if json.loads(plain.stdout)["verdict"] != "warn":
        pytest.skip("container.flags does not warn on this machine")
    assert plain.returncode == 0
    assert cli_run(*args, "--fail-on", "warn", cwd=tmp_path).returncode == 1


def test_a_mistyped_command_gets_the_closest_one():
    proc = cli_run("doctr")
    assert proc.returncode == 2 and "did you mean doctor?" in proc.stderr and len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("words, expected", [
    ("rocmcheck probe gemm_b", "gemm_blas"),
    ("rocmcheck recipes show zero", "zero3-offload"),
    ("rocmcheck doctor --only os,gpu.pr", "os,gpu.present"),
])
def test_names_complete_at_tab(words, expected):
    env = {"COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1), "_ROCMCHECK_COMPLETE": "bash_complete"}
    proc = cli_run(env=env)
    assert f"plain,{expected}" in proc.stdout.splitlines(), proc.stdout


def test_triage_help_says_a_warning_exits_0():
    assert "1: a cause that fails found" in " ".join(cli_run("triage", "--help").stdout.split())


def test_no_gpu_reader_is_one_short_line_per_family():
    problems = ["nvml: NVML: NVMLError_LibraryNotFound: NVML Shared Library Not Found",
                "amdsmi: amdsmi could not load libamd_smi.so (KeyError: 'libamd_smi.so'): /opt/rocm/lib/libamd_smi.so: "
                "cannot open shared object file: No such file or directory",
                "nvidia-smi: nvidia-smi not found on PATH or under the ROCm roots",
                "amd-smi: amd-smi not found on PATH or under the ROCm roots",
                "rocm-smi: rocm-smi not found on PATH or under the ROCm roots"]
    assert reader_lines(problems) == ["  NVIDIA: nvml library not found, nvidia-smi not installed",
                                      "  AMD: amdsmi library not found, amd-smi not installed, rocm-smi not installed"]
