"""Every fix a check, a probe hint or smoke-train can print is one shell line that parses (`bash -n`), and an
environment variable name in it keeps its case. The checks are driven over the recorded machines (tests/machines.py)
and variants of them that break one thing each, so every reachable fix branch is produced by the real checks."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import pytest

from machines import amd_machine, ran
from rocmcheck import fixes
from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.facts.collect import ENV_NAMES, Facts
from rocmcheck.facts.runner import CommandResult
from rocmcheck.probes import hints
from test_checks_nvidia import nvidia_machine

CONTAINER = {"/.dockerenv": True, "/sys/module/amdgpu": True, "/dev/shm": True}


def _amd(**over) -> Facts:
    return amd_machine(**over)


def _with(facts: Facts, **over) -> Facts:
    facts = copy.deepcopy(facts)
    for key, value in over.items():
        setattr(facts, key, value)
    return facts


def _probes(**over) -> dict:
    base = amd_machine().probes
    return {**copy.deepcopy(base), **over}


def machines() -> dict[str, Facts]:
    """Recorded machines, each broken in one way (or several, where a branch needs it)."""
    amd = amd_machine()
    nv = nvidia_machine()
    torch_rocm = amd.probes["torch"]
    ds_ok = {"installed": True, "version": "0.15.0", "accelerator": "cuda",
             "torch_info": {"version": "2.5", "hip_version": "6.2", "cuda_version": "0.0"},
             "ops": {"fused_adam": {"known": True, "compatible": True, "installed": False},
                     "cpu_adam": {"known": True, "compatible": False}},
             "jit": {"ninja": False, "cxx": True, "python_headers": True, "hipcc": False}}
    out = {
        "amd-healthy": amd,
        "nvidia-h100": nv,
        "nvidia-old-driver": nvidia_machine(torch_cuda="12.8", arch_list=("sm_80",)),
        "nvidia-in-container": _with(nvidia_machine(), present={"/.dockerenv": True, "/sys/module/nvidia": True},
                                     commands={}),
        "cpu-only": Facts(platform={"system": "Linux", "kernel": "6.8.0"}, os_info={"id": "ubuntu", "version": "22.04"},
                          limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20}),
        "cpu-only-container": Facts(platform={"system": "Linux", "kernel": "7.1.0"},
                                    os_info={"id": "ubuntu", "version": "20.04", "name": "Ubuntu 20.04"},
                                    present={"/.dockerenv": True},
                                    limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20}),
        "macos": Facts(platform={"system": "Darwin", "kernel": "x"}, os_info={"id": "fedora", "version": "40"}),
        "amd-no-torch": _with(amd, probes={}, packages={"transformers": "4.30.0"}),
        "amd-torch-import-error": _with(amd, probes=_probes(torch={"installed": True, "error": "libamdhip64.so: cannot open"})),
        "amd-cpu-torch": _with(amd, probes=_probes(torch={**torch_rocm, "hip": None, "version": "2.5.1+cpu",
                                                          "device_count": 0})),
        "amd-cuda-torch": _with(amd, probes=_probes(torch={**torch_rocm, "hip": None, "cuda": "12.4",
                                                           "version": "2.5.1+cu124", "device_count": 0})),
        "amd-torch-lacks-arch": _with(amd, probes=_probes(torch={**torch_rocm, "arch_list": ["gfx90a"],
                                                                  "device_count": 4})),
        "amd-torch-no-arch-list": _with(amd, probes=_probes(torch={**torch_rocm, "arch_list": []})),
        "amd-no-devices-container": _with(amd, devices={}, present=CONTAINER, user={"uid": 1000, "groups": ["u"]},
                                          limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20},
                                          files={**amd.files, "/proc/self/status": "Seccomp:\t2\n"}),
        "amd-no-driver": _with(amd, commands={}, present={}),
        "amd-no-devices-host": _with(amd, devices={}, present={"/sys/module/amdgpu": False}),
        "amd-devices-not-rw": _with(amd, user={"uid": 1000, "groups": ["u"], "group_ids": {}},
                                    devices={p: {**a, "writable": False} for p, a in amd.devices.items()}),
        "amd-devices-not-rw-container": _with(amd, present=CONTAINER, user={"uid": 1000, "groups": ["u"]},
                                              devices={p: {**a, "writable": False} for p, a in amd.devices.items()}),
        "amd-groups-only": _with(amd, user={"uid": 1000, "groups": ["u"], "group_ids": {"render": 110}}),
        "amd-env-instinct-override": _with(amd, env={"HSA_OVERRIDE_GFX_VERSION": "9.4.2", "PYTORCH_ROCM_ARCH": "gfx940",
                                                     "HIP_VISIBLE_DEVICES": "0,9", "CUDA_VISIBLE_DEVICES": ""}),
        "amd-env-radeon-override": _with(amd_machine(env={"HSA_OVERRIDE_GFX_VERSION": "12.0.1", "PYTORCH_ROCM_ARCH": "gfx90a",
                                                          "ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1"})),
        "amd-host-untuned": _with(amd, files={**amd.files, "/proc/cmdline": "ro quiet",
                                              "/proc/sys/kernel/numa_balancing": "1\n"},
                                  limits={"memlock_soft": 64 << 20, "unlimited": -1, "shm_bytes": 64 << 20}),
        "amd-no-shm": _with(amd, limits={"memlock_soft": -1, "unlimited": -1, "shm_bytes": None}),
        "amd-no-rocm": _with(amd, rocm_layout={"roots": {}}),
        "amd-torch-only-rocm": _with(amd, rocm_layout={"roots": {}}, packages={**amd.packages}),
        "amd-two-rocms": _with(amd, rocm_layout={"roots": {"/opt/rocm": {"info_version": "6.2.3-119\n"},
                                                           "/opt/rocm-6.4.0": {"info_version": "6.4.0-1\n"}}}),
        "amd-hip-mismatch": _with(amd, commands={**amd.commands, "hipconfig": ran(
            "hipconfig", stdout="HIP version: 6.4.43482-0f2d60242\n")}),
        "amd-hipconfig-empty": _with(amd, commands={**amd.commands, "hipconfig": ran("hipconfig", stdout="")}),
        "amd-no-rocminfo": _with(amd, commands={}),
        "amd-rocminfo-hung": _with(amd, commands={"rocminfo": CommandResult(argv=["rocminfo"], timed_out=True,
                                                                             timeout_s=20)}),
        "amd-rocminfo-crash": _with(amd, commands={"rocminfo": ran("rocminfo", stdout="", returncode=-11)}),
        "amd-rocminfo-garbage": _with(amd, commands={"rocminfo": ran("rocminfo", stdout="hello\n")}),
        "amd-rocminfo-denied": _with(amd, commands={"rocminfo": ran(
            "rocminfo", "rocminfo/error-kfd-permission-denied-rocm-terminal-container.txt", returncode=1)}),
        "amd-rocminfo-invalid": _with(amd, commands={"rocminfo": ran(
            "rocminfo", "rocminfo/error-kfd-invalid-argument-mi300x-docker-rocm6.2.1.txt", returncode=1)}),
        "mi250x-old-arch": amd_machine("rocminfo/mi250x-1gcd-cray-slurm-rocm5.7-container.txt"),
        "radeon-gfx1100": amd_machine("rocminfo/rx7900xtx-gfx1100-rocm6.2.2-ubuntu24.04.txt"),
        "strix-halo": amd_machine("rocminfo/strix-halo-gfx1151-apu-rocm7.11-nightly.txt",
                                  env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}),
        "amd-libraries-broken": _with(amd, probes=_probes(
            flash_attn={"installed": True, "import_error": "undefined symbol: _ZN3c10"},
            deepspeed={**ds_ok, "torch_info": {"version": "2.3"}, "accelerator": "cpu"}),
            packages={"torch": "2.5.1+rocm6.2", "triton": "3.0.0", "pytorch-triton-rocm": "3.0.0"},
            torch_requires=['pytorch-triton-rocm==3.1.0; platform_system == "Linux"']),
        "amd-deepspeed-isolated": _with(amd, probes=_probes(deepspeed={**ds_ok, "torch_info": {"version": "0.0"}}),
                                        packages={"torch": "2.5.1+rocm6.2", "triton": "3.0.0"},
                                        torch_requires=['pytorch-triton-rocm==3.1.0']),
        "amd-deepspeed-ops": _with(amd, probes=_probes(deepspeed=ds_ok)),
        "amd-deepspeed-import-error": _with(amd, probes=_probes(deepspeed={"installed": True, "import_error": "boom"},
                                                                flash_attn={"installed": True, "version": "2.7.0"}),
                                            packages={"torch": "2.5.1+rocm6.2", "pytorch-triton-rocm": "3.0.0"},
                                            torch_requires=['pytorch-triton-rocm==3.1.0']),
        "amd-probe-died": _with(amd, probes={"torch": torch_rocm}, packages={"torch": "2.5.1+rocm6.2", "flash-attn": "2.7",
                                                                            "deepspeed": "0.15"},
                                probe_runs={n: ran("python_probe", stdout="", returncode=-11)
                                            for n in ("flash_attn", "deepspeed")}),
    }
    return out


def all_fixes() -> dict[str, str]:
    """{"machine / check id": fix} for every warn/fail verdict the checks give on every machine."""
    found: dict[str, str] = {}
    for name, facts in machines().items():
        for expected in ((), ("gfx90a",)):
            ctx = CheckContext(facts, expected_archs=expected)
            for r in run_checks(select_checks(), ctx):
                assert r.status.value != "crash", f"{name}: {r.id} crashed: {r.summary} {r.evidence}"
                if r.fix:
                    found.setdefault(f"{name} / {r.id}", r.fix)
    return found


def hint_fixes() -> dict[str, str]:
    out = {f"wheel {v}": hints.torch_wheel_fix(v, a) for v, a in (("amd", "gfx942"), ("nvidia", "sm_90"), ("none", ""))}
    out |= {f"error {v}": hints.error_fix(e, v, "gfx942", "gemm")[1] for v in ("amd", "nvidia")
            for e in ("HIP error: invalid device function", "CUDA out of memory", "ValueError: x")}
    out |= {f"hang {v}": hints.hang_fix("gemm", v) for v in ("amd", "nvidia")}
    for cmdline, numa in (("ro quiet", "0"), ("ro iommu=pt", "1"), ("ro amd_iommu=pt", "0")):
        out[f"collective {cmdline}"] = fixes.collective_hang_fix("amd", cmdline, numa)[1]
    out["collective nvidia"] = fixes.collective_hang_fix("nvidia", None, None)[1]
    return out


FIXES = {**all_fixes(), **hint_fixes()}


def test_the_machines_reach_most_fix_branches():
    # Each distinct fix text is a branch: the variants above must reach a broad set of them, across areas.
    areas = {key.split(" / ")[1].split(".")[0] for key in FIXES if " / " in key}
    assert {"os", "driver", "rocm", "devices", "container", "gpu", "env", "torch", "triton", "flash_attn",
            "deepspeed", "transformers", "host", "nvidia"} <= areas
    assert len(set(FIXES.values())) >= 45


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_every_fix_is_one_line_that_bash_parses():
    bad = {}
    for key, fix in FIXES.items():
        if "\n" in fix:
            bad[key] = "more than one line"
            continue
        proc = subprocess.run(["bash", "-n"], input=fix + "\n", capture_output=True, text=True)
        if proc.returncode != 0:
            bad[key] = f"{fix!r}: {proc.stderr.strip()}"
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


# The first word of every command in a fix: prose that happens to parse ("Restart the container with: docker
# run ...") is caught here. A new fix that needs another command adds it to this list.
COMMANDS = {"pip", "sudo", "export", "unset", "docker", "python", "rocmcheck", "echo", "rocminfo", "uname", "nvidia-smi",
            "hipconfig", "amd-smi", "eval", "ulimit", "newgrp", "tail", "grep", "mkdir"}


def _command_words(fix: str) -> list[str]:
    import shlex

    lexer = shlex.shlex(fix, posix=True, punctuation_chars=";&|")
    lexer.commenters = "#"
    lexer.whitespace_split = True
    words, start = [], True
    for tok in lexer:
        if tok in (";", "&&", "||", "|", "&"):
            start = True
            continue
        if start and not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", tok):  # VAR=value prefixes the command
            words.append(tok)
            start = False
    return words


def test_every_fix_starts_each_command_with_a_real_command():
    bad = [f"{key}: {w!r} in {fix!r}" for key, fix in FIXES.items() for w in _command_words(fix) if w not in COMMANDS]
    assert not bad, "\n".join(bad)


KNOWN_VARS = set(ENV_NAMES) | {"HSA_OVERRIDE_GFX_VERSION", "PYTORCH_ROCM_ARCH", "ROCR_VISIBLE_DEVICES",
                               "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NCCL_P2P_DISABLE", "NCCL_DEBUG",
                               "DS_ACCELERATOR", "MAX_JOBS", "ROCM_PATH", "GPU_ARCHS"}


def test_env_var_names_keep_their_case():
    bad = []
    for key, fix in FIXES.items():
        for word in re.findall(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+", fix):
            if word.upper() in KNOWN_VARS and word != word.upper():
                bad.append(f"{key}: {word!r} in {fix!r}")
    assert not bad, "\n".join(bad)


def test_the_hsa_override_fix_unsets_the_real_variable():
    fix = FIXES["amd-env-instinct-override / env.hsa_override"]
    assert fix.startswith("unset HSA_OVERRIDE_GFX_VERSION")


def test_no_bare_pip_install_torch_and_reinstalls_force():
    for key, fix in FIXES.items():
        for m in re.finditer(r"pip install( --force-reinstall)? torch(?P<rest>[^&;#]*)", fix):
            assert "--index-url" in m.group("rest"), f"{key}: bare pip install torch: {fix}"
    assert "--force-reinstall" in FIXES["amd-torch-lacks-arch / torch.arch_list"]
    assert "--force-reinstall" in FIXES["wheel amd"]
    assert "/whl/cpu" in FIXES["cpu-only / torch.installed"] if "cpu-only / torch.installed" in FIXES else True


def test_the_container_fix_carries_every_flag_the_host_checks_want():
    fix = FIXES["amd-no-devices-container / container.flags"]
    for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--ulimit memlock=-1:-1", "--ipc=host",
                 "--security-opt seccomp=unconfined", "--group-add render"):
        assert flag in fix


def test_flash_attn_fix_takes_max_jobs_from_build_env():
    fix = FIXES["amd-libraries-broken / flash_attn.import"]
    assert "MAX_JOBS=" not in fix and "rocmcheck build-env --target flash-attn --arch gfx942" in fix


def test_iommu_passthrough_is_one_fact_for_checks_and_probes(tmp_path):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/vmlinuz ro amd_iommu=pt\n")
    numa = tmp_path / "numa"
    numa.write_text("0\n")
    evidence, _ = hints.collective_hang_hints("amd", str(cmdline), str(numa))
    assert not any("iommu" in e for e in evidence)
    facts = amd_machine(files={"/proc/cmdline": "ro amd_iommu=pt", "/proc/sys/kernel/numa_balancing": "0\n"})
    assert [r.status.value for r in run_checks(select_checks(only=("host.iommu",)), CheckContext(facts))] == ["pass"]


def test_probe_wheel_index_follows_the_installed_rocm(tmp_path, monkeypatch):
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("6.3.1-48\n")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    assert "/whl/rocm6.3 " in hints.torch_wheel_fix("amd", "gfx942")
