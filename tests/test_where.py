"""Where the job runs: an SR-IOV guest (planted sysfs), a Kubernetes pod, a Slurm job, and each distribution's
driver package; the device-access fixes follow where it runs."""

from __future__ import annotations

import json
import os

from conftest import FIXTURES_DIR
from machines import amd_machine, verdicts

from rocmcheck.facts.collect import os_info
from rocmcheck.facts.health import node_health
from rocmcheck.fixes import FixKind
from rocmcheck.result import Status

NO_KFD = {"/dev/kfd": {"exists": False}}
POD_CGROUP = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abcd.scope\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def vf_sysfs(root, device="0x74b5"):
    """A GPU as an SR-IOV guest's sysfs shows it: AMD vendor, display class, the VF's device id, no host bridge."""
    gpu = root / "devices/pci0000:00/0000:00:05.0"
    for name, text in {"vendor": "0x1002\n", "class": "0x038000\n", "device": f"{device}\n",
                       "current_link_speed": "2.5 GT/s PCIe\n", "current_link_width": "1\n",
                       "max_link_speed": "32.0 GT/s PCIe\n", "max_link_width": "16\n"}.items():
        write(gpu / name, text)
    (root / "bus/pci/devices").mkdir(parents=True)
    os.symlink(gpu, root / "bus/pci/devices" / gpu.name)
    return node_health({}, root=str(root), config_root=str(root / "etc-root"))


def test_vf_guest_is_named_and_host_only_checks_skip(tmp_path):
    facts = amd_machine(node_health=vf_sysfs(tmp_path), files={"/proc/cmdline": "ro quiet",
                                                                 "/sys/module/amdgpu/version": None})
    v = verdicts(facts, "gpu.vf_guest", "host.iommu", "health.pcie_link", "host.perf_determinism")
    assert v["gpu.vf_guest"].status == Status.PASS and "MI300X VF" in v["gpu.vf_guest"].summary
    assert any("1002:74b5" in e for e in v["gpu.vf_guest"].evidence)
    for cid in ("host.iommu", "health.pcie_link", "host.perf_determinism"):
        assert v[cid].status == Status.SKIP and "SR-IOV guest" in v[cid].summary, (cid, v[cid].summary)


def test_vf_guest_on_rocm_7_0_is_warned(tmp_path):
    facts = amd_machine(node_health=vf_sysfs(tmp_path),
                        rocm_layout={"roots": {"/opt/rocm": {"info_version": "7.0.2-56\n", "therock_cores": {}}}})
    r = verdicts(facts, "gpu.vf_guest")["gpu.vf_guest"]
    assert r.status == Status.WARN and "7.0.2" in r.summary and "7.1" in r.fix.line()


def test_physical_function_is_not_a_guest(tmp_path):
    facts = amd_machine(node_health=vf_sysfs(tmp_path, device="0x74a1"))  # MI300X's own (physical) function
    v = verdicts(facts, "gpu.vf_guest", "host.iommu")
    assert v["gpu.vf_guest"].status == Status.PASS and "not an SR-IOV guest" in v["gpu.vf_guest"].summary
    assert v["host.iommu"].status == Status.PASS


def test_pod_without_kfd_gets_the_device_plugin_resource_not_docker():
    facts = amd_machine(devices=dict(NO_KFD), env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
                        files={"/proc/1/cgroup": POD_CGROUP}, present={"/var/run/secrets/kubernetes.io": True},
                        limits={"memlock_soft": -1, "unlimited": -1, "shm_bytes": 64 << 20})
    v = verdicts(facts, "devices.kfd", "devices.render", "container.flags")
    for r in v.values():
        assert r.status == Status.FAIL, r.summary
        assert r.fix.kind is FixKind.EDIT and '"amd.com/gpu": 8' in r.fix.text and "docker run" not in r.fix.line()
    assert "Kubernetes pod" in v["devices.kfd"].summary


def test_slurm_job_without_gpus_gets_gres():
    facts = amd_machine(devices=dict(NO_KFD), env={"SLURM_JOB_ID": "4242"})
    r = verdicts(facts, "devices.kfd")["devices.kfd"]
    assert r.status == Status.FAIL and "Slurm job" in r.summary
    assert r.fix.text.startswith("srun --gres=gpu:") and r.fix.kind is FixKind.SHELL
    given = amd_machine(devices=dict(NO_KFD), env={"SLURM_JOB_ID": "4242", "SLURM_JOB_GPUS": "0,1"})
    assert "gres" not in verdicts(given, "devices.kfd")["devices.kfd"].fix.line()


def test_each_distribution_gets_its_own_driver_package():
    def driver_fix(release, **over):
        facts = amd_machine(present={"/dev/shm": True}, devices=dict(NO_KFD), commands={},
                            os_info=os_info(str(FIXTURES_DIR / "os-release" / release)), **over)
        return verdicts(facts, "driver.amdgpu")["driver.amdgpu"].fix.text

    releases = sorted(p.name for p in (FIXTURES_DIR / "os-release").iterdir() if not p.name.endswith(".source"))
    fixes = {name: driver_fix(name) for name in releases}
    for name, line in fixes.items():
        if name.startswith("ubuntu"):
            assert line.startswith("sudo apt install amdgpu-dkms"), (name, line)
        elif name.startswith(("rhel", "rocky", "ol", "almalinux")):
            assert line.startswith("sudo dnf install amdgpu-dkms"), (name, line)
        elif name.startswith("sles"):
            assert line.startswith("sudo zypper install amdgpu-dkms"), (name, line)
    debian = [n for n in releases if n.startswith("debian")]
    assert debian and any(n.startswith("rhel") for n in releases), releases
    assert fixes[debian[0]].startswith("sudo apt install amdgpu-dkms")  # AMD's ROCm in /opt/rocm: AMD's driver
    # Debian's own ROCm packages, as recorded in a Debian root (tests/fixtures/debian-sid-rocm): all in /usr
    distro_rocm = json.loads((FIXTURES_DIR.parent / "debian-sid-rocm" / "rocm-layout.json").read_text())
    line = driver_fix(debian[0], rocm_layout=distro_rocm)
    assert "amdgpu-dkms" not in line and "firmware-amd-graphics" in line and "modprobe amdgpu" in line


def test_a_pod_with_no_gpu_and_a_small_shm_is_fixed_in_its_manifest():
    cpu_torch = {"torch": {"version": "2.5.1+cpu", "hip": None, "cuda": None, "cuda_available": False,
                           "device_count": 0}, "flash_attn": {"installed": False}, "deepspeed": {"installed": False}}
    facts = amd_machine(devices=dict(NO_KFD), commands={}, present={"/dev/shm": True}, probes=cpu_torch,
                        rocm_layout={"roots": {}}, packages={"torch": "2.5.1+cpu"},
                        env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, files={"/proc/1/cgroup": POD_CGROUP},
                        limits={"memlock_soft": -1, "unlimited": -1, "shm_bytes": 64 << 20})
    v = verdicts(facts, "gpu.present", "host.shm")
    assert v["gpu.present"].status == Status.FAIL and "Kubernetes pod" in v["gpu.present"].summary
    assert '"amd.com/gpu"' in v["gpu.present"].fix.text
    assert v["host.shm"].status == Status.FAIL and v["host.shm"].fix.kind is FixKind.EDIT
    assert "emptyDir with medium: Memory" in v["host.shm"].fix.text


def test_vf_guest_named_by_rocminfo_without_sysfs():
    """A guest whose sysfs was not read (a container) is still named by the name rocminfo prints for the VF."""
    from conftest import read_fixture
    from machines import ran

    text = read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt").replace(
        "Marketing Name:          AMD Instinct MI300X", "Marketing Name:          AMD Instinct MI300X VF")
    facts = amd_machine(commands={"rocminfo": ran("rocminfo", stdout=text)})
    v = verdicts(facts, "gpu.vf_guest", "host.iommu")
    assert v["gpu.vf_guest"].status == Status.PASS and "MI300X VF" in v["gpu.vf_guest"].summary
    assert "the GPU names itself 'AMD Instinct MI300X VF'" in v["gpu.vf_guest"].evidence
    assert v["host.iommu"].status == Status.SKIP
