"""Verdicts from AMD's compatibility matrix (rocm_releases.json): the OS and kernel of every release, the amdgpu
driver against the ROCm user spaces' windows. Machines: tests/machines.py (a recorded 8 x MI300X rocminfo, recorded
os-release files); the versions are planted per case."""

from __future__ import annotations

from conftest import FIXTURES_DIR, read_fixture
from machines import amd_machine, ran, verdicts

from rocmcheck.facts.collect import os_info

RHEL_93 = str(FIXTURES_DIR / "os-release/rhel-9.3-plow-aarch64-gh200.txt")


def _rocm(version: str) -> dict:
    return {"roots": {"/opt/rocm": {"info_version": f"{version}\n", "therock_cores": {}}}}


def _machine(rocm: str = "6.2.3", *, kernel: str = "5.15.0-161-generic", module: str = "6.8.5",
             torch: str = "2.5.1+rocm6.2", os: dict | None = None):
    facts = amd_machine(rocm_layout=_rocm(rocm))
    facts.platform["kernel"] = kernel
    facts.files["/sys/module/amdgpu/version"] = f"{module}\n"
    facts.probes["torch"]["version"] = torch
    facts.packages["torch"] = torch
    if os is not None:
        facts.os_info = os
    return facts


def test_a_64_install_is_judged_by_its_own_release():
    """RHEL 9.3 (a recorded os-release): on ROCm 6.2's list, not on 6.4's; SLES 15 SP7: on 6.4's, not on 6.3's."""
    on_62 = verdicts(_machine("6.2.3", os=os_info(RHEL_93)), "os.release")["os.release"]
    on_64 = verdicts(_machine("6.4.1", os=os_info(RHEL_93)), "os.release")["os.release"]
    assert on_62.status.value == "pass" and "6.2.2" in on_62.summary
    assert on_64.status.value == "warn" and "ROCm 6.4.3" in on_64.summary
    assert any("compatibility-matrix" in line for line in on_64.evidence)
    sles = {"id": "sles", "version": "15.7", "name": "SUSE Linux Enterprise Server 15 SP7"}
    assert verdicts(_machine("6.4.1", os=sles), "os.release")["os.release"].status.value == "pass"
    assert verdicts(_machine("6.3.1", os=sles), "os.release")["os.release"].status.value == "warn"


def test_kernel_against_the_release_list():
    """ROCm 7.0 lists 5.15 and 6.8 for Ubuntu 22.04: the 6.5 HWE kernel is not one of them."""
    old_hwe = verdicts(_machine("7.0.2", kernel="6.5.0-45-generic"), "os.kernel")["os.kernel"]
    assert old_hwe.status.value == "warn" and "5.15, 6.8" in old_hwe.summary and old_hwe.fix is not None
    hwe = verdicts(_machine("7.0.2", kernel="6.8.0-52-generic"), "os.kernel")["os.kernel"]
    assert hwe.status.value == "pass"
    # ROCm 6.2's page lists 5.15 and the 6.8, 6.5, 6.2, 5.19 HWE kernels for Ubuntu 22.04 point releases
    assert verdicts(_machine("6.2.3", kernel="6.5.0-45-generic"), "os.kernel")["os.kernel"].status.value == "pass"
    assert verdicts(_machine("6.2.3", kernel="6.11.0-29-generic"), "os.kernel")["os.kernel"].status.value == "warn"
    # ROCm 6.1's page in the table carries no kernel list: nothing is claimed
    unlisted = verdicts(_machine("6.1.2", kernel="6.5.0-45-generic"), "os.kernel")["os.kernel"]
    assert unlisted.status.value == "pass" and "lists no kernels" in unlisted.summary


def test_driver_inside_and_outside_the_window():
    inside = verdicts(_machine("6.2.3"), "driver.window")["driver.window"]
    assert inside.status.value == "pass" and "AMD driver 6.2" in inside.summary
    # the ROCm 6.0 driver (module 6.3.6) under a ROCm 7.2 user space: 7.2 supports 30.30, 30.20, 30.10, 6.4
    old = verdicts(_machine("7.2.4", module="6.3.6", torch="2.9.1+rocm7.2"), "driver.window")["driver.window"]
    assert old.status.value == "warn" and "30.30, 30.20, 30.10, 6.4" in old.summary and old.fix is not None
    # torch's bundled ROCm is judged too: a rocm7.2 wheel on a host with the ROCm 6.2 driver
    wheel = verdicts(_machine("6.2.3", torch="2.9.1+rocm7.2"), "driver.window")["driver.window"]
    assert wheel.status.value == "warn" and "torch's ROCm 7.2" in wheel.summary


def test_driver_not_in_the_table_is_not_judged():
    unknown = verdicts(_machine("7.2.4", module="6.16.13"), "driver.window")["driver.window"]
    assert unknown.status.value == "pass" and "not in the table" in unknown.summary
    # a ROCm 7.1 driver with a 6.2 user space: the 6.2 row lists drivers only up to ROCm 6.3's
    newer = verdicts(_machine("6.2.3", module="6.16.6"), "driver.window")["driver.window"]
    assert newer.status.value == "pass" and any("not judged" in line for line in newer.evidence)


def _mi355x(rocm: str, torch: str):
    """The recorded MI300X rocminfo with its arch and name planted as an MI355X's (gfx950)."""
    text = read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt")
    planted = text.replace("gfx942", "gfx950").replace("MI300X", "MI355X")
    facts = _machine(rocm, torch=torch)
    facts.commands["rocminfo"] = ran("rocminfo", stdout=planted)
    return facts


def test_the_gpu_arch_against_the_release_targets():
    old = verdicts(_mi355x("6.4.1", "2.6.0+rocm6.4"), "rocm.release_support")["rocm.release_support"]
    assert old.status.value == "warn" and "gfx950" in old.summary and "ROCm 7.0.0 or newer" in old.summary
    new = verdicts(_mi355x("7.0.2", "2.8.0+rocm7.0"), "rocm.release_support")["rocm.release_support"]
    assert new.status.value == "pass"
    # the recorded MI300X on ROCm 6.2: supported; torch 2.5.1 is not on AMD's PyTorch list for 6.2 (evidence only)
    mi300x = verdicts(_machine("6.2.3"), "rocm.release_support")["rocm.release_support"]
    assert mi300x.status.value == "pass"
    assert any("torch 2.5.1+rocm6.2: not among" in line for line in mi300x.evidence)
