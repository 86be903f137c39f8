"""Checks on AMD machines, judged on real recorded rocminfo / rocm-smi / hipconfig / collect_env outputs."""

from __future__ import annotations

import re

from conftest import read_fixture
from machines import amd_machine, ran, verdicts

from rocmcheck.result import Status


def test_healthy_mi300x_box_passes_the_gpu_checks():
    v = verdicts(amd_machine(), "gpu", "torch", "devices", "rocm.install", "os.release", "env", "driver")
    assert v["gpu.present"].status == Status.PASS
    assert "8 AMD GPU" in v["gpu.present"].summary
    assert v["gpu.arch"].status == Status.PASS and v["gpu.arch"].data["products"] == ["MI300X"]
    assert "192 GiB" in v["gpu.present"].evidence[0]
    assert v["torch.arch_list"].status == Status.PASS
    assert v["torch.sees_gpus"].status == Status.PASS
    assert v["devices.kfd"].status == Status.PASS
    assert v["rocm.install"].status == Status.PASS and "6.2.3" in v["rocm.install"].summary
    assert v["os.release"].status == Status.PASS and "22.04" in v["os.release"].summary
    assert v["driver.amdgpu"].status == Status.PASS
    assert v["gpu.partition"].status == Status.PASS


def test_expected_arch_mismatch_fails():
    v = verdicts(amd_machine(), "gpu.expected_arch", expected_archs=("gfx90a",))
    assert v["gpu.expected_arch"].status == Status.FAIL
    assert "found gfx942" in v["gpu.expected_arch"].summary
    v = verdicts(amd_machine(), "gpu.expected_arch", expected_archs=("gfx942",))
    assert v["gpu.expected_arch"].status == Status.PASS


def test_torch_without_the_gpu_arch_names_the_real_error():
    # Strix Halo gfx1151 with a torch 2.5.1+rocm6.2 wheel, which has no gfx1151 kernels.
    v = verdicts(amd_machine("rocminfo/strix-halo-gfx1151-apu-rocm7.11-nightly.txt"), "torch.arch_list")
    r = v["torch.arch_list"]
    assert r.status == Status.FAIL
    assert "gfx1151" in r.summary and "hipErrorNoBinaryForGpu" in r.summary and "invalid device function" in r.summary
    assert "PYTORCH_ROCM_ARCH=gfx1151" in r.fix.line()


def test_mi250x_container_one_gcd():
    v = verdicts(amd_machine("rocminfo/mi250x-1gcd-cray-slurm-rocm5.7-container.txt"), "gpu.present", "gpu.arch")
    assert "1 AMD GPU" in v["gpu.present"].summary
    assert v["gpu.arch"].data["archs"] == ["gfx90a"]


def test_hsa_override_on_strix_halo_is_flagged_with_its_effect():
    facts = amd_machine("rocminfo/hsa-override-12.0.1-r9700-plus-strix-halo-npu-fedora-rocm7.1.0.txt",
                        env={"HSA_OVERRIDE_GFX_VERSION": "12.0.1"})
    v = verdicts(facts, "env.hsa_override", "gpu.present")
    r = v["env.hsa_override"]
    assert r.status == Status.WARN
    assert "gfx1201" in r.evidence[0]
    # The 8060S iGPU (really gfx1151) reports gfx1201 under the override; the NPU is not counted as a GPU.
    assert any("8060S" in e and "not its own arch" in e for e in r.evidence)
    assert "2 AMD GPU" in v["gpu.present"].summary


def test_hsa_override_on_instinct_fails():
    v = verdicts(amd_machine(env={"HSA_OVERRIDE_GFX_VERSION": "9.4.2"}), "env.hsa_override")
    assert v["env.hsa_override"].status == Status.FAIL
    assert v["env.hsa_override"].fix.line().lower().startswith("unset hsa_override_gfx_version")


def test_rocminfo_permission_denied_is_explained():
    facts = amd_machine()
    facts.commands["rocminfo"] = ran("rocminfo", "rocminfo/error-kfd-permission-denied-rocm-terminal-container.txt",
                                     returncode=1)
    facts.devices["/dev/kfd"] = {"exists": True, "readable": False, "writable": False, "mode": "crw-rw----",
                                 "group": "render"}
    facts.user = {"uid": 1000, "name": None, "groups": ["nogroup"], "group_ids": {"render": None, "video": 44}}
    v = verdicts(facts, "gpu.rocminfo", "devices.kfd", "devices.groups")
    assert v["gpu.rocminfo"].status == Status.FAIL
    assert "Permission denied" in v["gpu.rocminfo"].summary
    assert "render" in v["gpu.rocminfo"].fix.line()
    assert v["devices.kfd"].status == Status.FAIL and "no read / write access" in v["devices.kfd"].summary
    assert v["devices.groups"].status == Status.FAIL


def test_rocminfo_invalid_argument_in_docker():
    facts = amd_machine(present={"/sys/module/amdgpu": True, "/.dockerenv": True})
    facts.commands["rocminfo"] = ran("rocminfo", "rocminfo/error-kfd-invalid-argument-mi300x-docker-rocm6.2.1.txt",
                                     returncode=1)
    v = verdicts(facts, "gpu.rocminfo")
    assert v["gpu.rocminfo"].status == Status.FAIL
    assert "Invalid argument" in v["gpu.rocminfo"].summary
    assert "--device=/dev/kfd" in v["gpu.rocminfo"].fix.line()


def test_hung_rocminfo_becomes_a_verdict():
    facts = amd_machine()
    facts.commands["rocminfo"] = ran("rocminfo", stdout="", returncode=None, timed_out=True)
    v = verdicts(facts, "gpu.rocminfo")
    assert v["gpu.rocminfo"].status == Status.FAIL and "hung" in v["gpu.rocminfo"].summary


def test_container_without_devices_names_the_flags():
    facts = amd_machine(present={"/.dockerenv": True, "/sys/module/amdgpu": True}, devices={},
                        limits={"memlock_soft": -1, "unlimited": -1, "shm_bytes": 64 << 20})
    facts.user = {"uid": 1000, "name": "u", "groups": ["u"], "group_ids": {"render": None, "video": 44}}
    v = verdicts(facts, "container.flags", "devices.kfd", "host.shm")
    r = v["container.flags"]
    assert r.status == Status.FAIL
    for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--group-add video", "--ipc=host"):
        assert flag in r.summary
    assert v["devices.kfd"].status == Status.FAIL and "container" in v["devices.kfd"].summary
    assert v["host.shm"].status == Status.FAIL and "64 MiB" in v["host.shm"].summary


def test_qpx_partitions_warn(fixture_text):
    facts = amd_machine()
    facts.commands["rocm-smi"] = ran("rocm-smi", "rocm-smi/mi300x-qpx-4partitions-rocm6.3.3-concise.txt")
    v = verdicts(facts, "gpu.partition")
    assert v["gpu.partition"].status == Status.WARN
    assert "QPX" in v["gpu.partition"].evidence[0]


def test_hipconfig_newer_than_torch_hip_warns():
    facts = amd_machine()
    facts.commands["hipconfig"] = ran("hipconfig", "hipconfig/hipconfig-full-rocm6.3.2-linuxmint-gfx90c.txt")
    v = verdicts(facts, "rocm.hip")
    assert v["rocm.hip"].status == Status.WARN
    assert "6.3" in v["rocm.hip"].summary and "6.2" in v["rocm.hip"].summary
    assert "whl/rocm6.3" in v["rocm.hip"].fix.line()


def test_two_triton_distributions_from_a_real_collect_env_fail(fixture_text):
    # The vLLM MI300X collect_env lists both pytorch-triton-rocm==3.0.0 and triton==3.0.0.
    text = fixture_text("collect_env/mi300x-8gpu-vllm-collect-env-rocm6.1-torch2.4.1.txt")
    versions = dict(re.findall(r"^\[pip3\] (\S+?)==(\S+)", text, re.MULTILINE))
    assert versions["pytorch-triton-rocm"] == versions["triton"] == "3.0.0"
    facts = amd_machine(packages={"torch": versions["torch"], "pytorch-triton-rocm": versions["pytorch-triton-rocm"],
                                  "triton": versions["triton"]},
                        torch_requires=['pytorch-triton-rocm==3.0.0; platform_system == "Linux"'])
    v = verdicts(facts, "triton.pin")
    assert v["triton.pin"].status == Status.FAIL
    assert "2 Triton distributions" in v["triton.pin"].summary
    assert "pip uninstall -y triton" in v["triton.pin"].fix.line()


def test_cpu_torch_on_amd_machine_fails():
    facts = amd_machine()
    facts.probes["torch"] = {"version": "2.13.0+cpu", "hip": None, "cuda": None, "cuda_available": False,
                             "device_count": 0, "arch_list": [], "arch_flags": []}
    v = verdicts(facts, "torch.build", "torch.sees_gpus")
    assert v["torch.build"].status == Status.FAIL
    assert "whl/rocm6.2" in v["torch.build"].fix.line()
    assert v["torch.sees_gpus"].status == Status.FAIL


def test_pytorch_rocm_arch_with_removed_target():
    v = verdicts(amd_machine(env={"PYTORCH_ROCM_ARCH": "gfx940;gfx941"}), "env.pytorch_rocm_arch")
    assert v["env.pytorch_rocm_arch"].status == Status.FAIL and "gfx942" in v["env.pytorch_rocm_arch"].fix.line()
    v = verdicts(amd_machine(env={"PYTORCH_ROCM_ARCH": "gfx90a"}), "env.pytorch_rocm_arch")
    assert v["env.pytorch_rocm_arch"].status == Status.FAIL and "misses gfx942" in v["env.pytorch_rocm_arch"].summary


def test_host_settings_for_multi_gpu():
    facts = amd_machine()
    facts.files.update({"/proc/cmdline": "BOOT_IMAGE=/vmlinuz ro quiet", "/proc/sys/kernel/numa_balancing": "1\n"})
    v = verdicts(facts, "host")
    assert v["host.iommu"].status == Status.WARN and "iommu=pt" in v["host.iommu"].fix.line()
    assert v["host.numa_balancing"].status == Status.WARN and "numa_balancing=0" in v["host.numa_balancing"].fix.line()
    assert v["host.shm"].status == Status.PASS


def test_os_release_rhel_93_is_judged_against_the_rocm_list():
    from conftest import FIXTURES_DIR

    from rocmcheck.facts.collect import os_info

    facts = amd_machine(os_info=os_info(str(FIXTURES_DIR / "os-release/rhel-9.3-plow-aarch64-gh200.txt")))
    v = verdicts(facts, "os.release")  # ROCm 6.2.3 lists RHEL 9.3
    assert v["os.release"].status == Status.PASS
    facts.rocm_layout = {"roots": {"/opt/rocm": {"info_version": "7.2.4\n", "therock_cores": {}}}}
    v = verdicts(facts, "os.release")  # ROCm 7.2 dropped it
    assert v["os.release"].status == Status.WARN and "7.2" in v["os.release"].summary


def test_therock_layout_is_found():
    facts = amd_machine(rocm_layout={"roots": {"/opt/rocm": {"info_version": None,
                                                              "therock_cores": {"/opt/rocm/core-10.0": "10.0.0\n"}}}})
    v = verdicts(facts, "rocm.install")
    assert v["rocm.install"].status == Status.PASS and "10.0.0" in v["rocm.install"].summary


def test_a_crashing_check_becomes_a_crash_verdict_and_others_run():
    from rocmcheck.checks import CheckSpec, run_checks
    from rocmcheck.checks.context import CheckContext

    def broken(ctx):
        raise KeyError("boom")

    specs = [CheckSpec("x.broken", "x", "broken", broken)] + [
        s for s in __import__("rocmcheck.checks", fromlist=["select_checks"]).select_checks(only=["gpu.present"])]
    results = run_checks(specs, CheckContext(amd_machine()))
    assert results[0].status == Status.CRASH and "KeyError" in results[0].summary
    assert results[1].id == "gpu.present" and results[1].status == Status.PASS


def test_a_crashing_rocminfo_is_reported_as_a_crash_not_by_its_partial_output(tmp_path):
    # A real process that prints the start of a real rocminfo listing, then dies of SIGSEGV.
    from conftest import read_fixture
    from fakes import make_tool

    from rocmcheck.runner import run_command

    partial = "\n".join(read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt").splitlines()[:60]) + "\n"
    tool = make_tool(tmp_path / "bin", "rocminfo", stdout=partial, crash_signal="SEGV")
    res = run_command([str(tool)], timeout=30)
    assert res.returncode == -11 and res.stdout.startswith(partial[:40])
    facts = amd_machine()
    facts.commands["rocminfo"] = res
    v = verdicts(facts, "gpu.rocminfo")["gpu.rocminfo"]
    assert v.status == Status.FAIL
    assert v.summary.startswith("rocminfo crashed (signal 11 SIGSEGV)"), v.summary
    assert "dmesg" in v.fix.line()


def test_rocminfo_incompatible_kernel_and_userspace_says_upgrade_the_driver():
    # ROCm/ROCm#1583: ROCr disabled every GPU ("Incompatible kernel and userspace ... Upgrade amdgpu.").
    from conftest import project_fixture

    from rocmcheck.triage.readers.paste import split_paste

    paste = project_fixture("pastes/rocminfo/hsa-error-incompatible-kernel-userspace_RadeonProVII_centos8_rocm4.3_"
                            "ROCm-1583.txt")
    (block,) = [b for b in split_paste(paste) if b.kind == "rocminfo"]
    v = verdicts(amd_machine(commands={"rocminfo": ran("rocminfo", stdout=block.text)}), "gpu.rocminfo", "gpu.present",
                 "driver.amdgpu")
    r = v["gpu.rocminfo"]
    assert r.status == Status.FAIL and "Incompatible kernel and userspace" in r.summary
    assert "amdgpu-install --usecase=dkms" in r.fix.line() and "older than this ROCm" in r.fix.line()
    assert v["gpu.present"].status == Status.FAIL and "Upgrade amdgpu" in v["gpu.present"].summary
    assert v["driver.amdgpu"].status == Status.PASS  # the driver is loaded: it is too old, not missing


def _rocminfo_grep(pattern: str) -> str:
    """`rocminfo | grep -E pattern` on the real 8x MI300X rocminfo: the lines a person pastes from a grep."""
    return "\n".join(line for line in read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt").splitlines()
                     if re.search(pattern, line))


def test_partition_mode_is_not_known_from_a_fragment_that_does_not_show_it():
    # Agent names only: no partition column, no compute units, no marketing name. Nothing says SPX.
    facts = amd_machine(commands={"rocminfo": ran("rocminfo", stdout=_rocminfo_grep(r"^\s*Name:"))})
    r = verdicts(facts, "gpu.partition")["gpu.partition"]
    assert r.status == Status.SKIP and "partition mode" in r.summary
    # With the compute units: 304 is the most any gfx942 product has, so each agent is a whole GPU.
    facts = amd_machine(commands={"rocminfo": ran("rocminfo", stdout=_rocminfo_grep(r"^\s*(Name|Compute Unit):"))})
    assert verdicts(facts, "gpu.partition")["gpu.partition"].status == Status.PASS


def test_rocminfo_and_rocm_smi_are_paired_by_pci_address_not_by_position():
    # One 4x MI300X VM's rocminfo and rocm-smi -a, each cut to the last two GPUs (buses 0x65 and 0x85): rocminfo
    # numbers them 0 and 1, rocm-smi GPU[2] and GPU[3]. Each gets its own rocm-smi lines by its BDFID.
    from conftest import project_fixture

    rocminfo = project_fixture("pastes/rocminfo/rocminfo_full_MI300X-x4_EPYC9474F_thamada-gls.txt").splitlines(True)
    agents = "".join(rocminfo[:15] + rocminfo[319:])  # the system attributes, then Agents 5 and 6
    smi = "".join(line for line in project_fixture("pastes/rocm_smi/showallinfo-a_MI300X-x4_SRIOV-VM_driver-6.7.0_SPX_"
                                                   "NPS1_thamada-gls.txt").splitlines(True)
                  if line.startswith(("GPU[2]", "GPU[3]")))
    facts = amd_machine(commands={"rocminfo": ran("rocminfo", stdout=agents), "rocm-smi": ran("rocm-smi", stdout=smi)})
    from rocmcheck.checks.context import CheckContext

    gpus = CheckContext(facts).amd_gpus
    assert [(g.index, g.extra["partition"], g.extra["memory_partition"]) for g in gpus] == \
        [(0, "SPX", "NPS1"), (1, "SPX", "NPS1")]
