"""Recorded machines for check tests: Facts built from the real outputs in tests/fixtures/public.

Only the tool outputs come from fixtures; the surrounding facts (device nodes, groups, env) are the
doctor's own records, set per scenario. Torch probe records use values published in the fixtures' sources.
"""

from __future__ import annotations

from conftest import FIXTURES_DIR, read_fixture

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.facts.collect import Facts, os_info
from rocmcheck.result import CheckResult
from rocmcheck.runner import CommandResult

RW = {"exists": True, "readable": True, "writable": True, "mode": "crw-rw----", "group": "render"}

# torch.cuda.get_arch_list() of official wheels, as published in https://github.com/astral-sh/uv/issues/14086
ARCHS_2_5_1_ROCM62 = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100", "gfx942"]


def ran(key: str, fixture: str | None = None, *, stdout: str = "", returncode: int = 0, **kw) -> CommandResult:
    text = read_fixture(fixture) if fixture else stdout
    return CommandResult(argv=[key], returncode=returncode, stdout=text, timeout_s=20, **kw)


def amd_machine(rocminfo_fixture: str = "rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt", **over) -> Facts:
    gpus_cmd = ran("rocminfo", rocminfo_fixture)
    facts = Facts(
        platform={"system": "Linux", "kernel": "5.15.0-161-generic", "python": "3.11.7"},
        os_info=os_info(str(FIXTURES_DIR / "os-release/ubuntu-22.04.5-jammy.txt")),
        env={},
        files={"/proc/cmdline": "BOOT_IMAGE=/vmlinuz ro iommu=pt", "/proc/sys/kernel/numa_balancing": "0\n",
               "/sys/module/amdgpu/version": "6.8.5\n"},
        present={"/sys/module/amdgpu": True, "/dev/shm": True},
        devices={"/dev/kfd": dict(RW), **{f"/dev/dri/renderD{128 + 8 * i}": dict(RW) for i in range(8)}},
        user={"uid": 1000, "name": "u", "groups": ["render", "video", "u"], "group_ids": {"render": 110, "video": 44}},
        limits={"memlock_soft": -1, "memlock_hard": -1, "unlimited": -1, "shm_bytes": 64 << 30},
        rocm_layout={"roots": {"/opt/rocm": {"info_version": "6.2.3-119\n", "therock_cores": {}}}},
        commands={"rocminfo": gpus_cmd},
        packages={"torch": "2.5.1+rocm6.2", "transformers": "4.46.0"},
        probes={"torch": {"version": "2.5.1+rocm6.2", "hip": "6.2.41133-dd7f95766", "cuda": None,
                          "cuda_available": True, "device_count": 8, "arch_list": list(ARCHS_2_5_1_ROCM62),
                          "devices": [{"name": "AMD Instinct MI300X", "gcn_arch": "gfx942:sramecc+:xnack-"}] * 8},
                "flash_attn": {"installed": False}, "deepspeed": {"installed": False}},
    )
    for key, value in over.items():
        setattr(facts, key, value)
    return facts


def verdicts(facts: Facts, *ids: str, expected_archs: tuple[str, ...] = ()) -> dict[str, CheckResult]:
    ctx = CheckContext(facts, expected_archs=expected_archs)
    results = run_checks(select_checks(only=ids), ctx)
    return {r.id: r for r in results}
