"""Host configuration facts and their verdicts: amdgpu blacklisted, Secure Boot with an unsigned amdgpu-dkms, ROCm
repositories that disagree, other processes on the GPUs, a PyPI amdsmi of another ROCm, ROCm 7.0-7.2's IPC rule.
Planted files (a fake /etc) and recorded tool outputs (tests/fixtures/host-tools); real fake tools for collection."""

from __future__ import annotations

import os

from conftest import project_fixture
from fakes import env_with_path, make_tool
from machines import amd_machine, ran, verdicts

from rocmcheck.facts.collect import collect_facts
from rocmcheck.facts.health import node_health
from rocmcheck.facts.parsers.host_tools import parse_amd_smi_process, parse_dkms_status, parse_sb_state
from rocmcheck.result import Status

AMD_REPO_623 = "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] "\
    "https://repo.radeon.com/rocm/apt/6.2.3 jammy main\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def planted(tmp_path, files):
    for rel, text in files.items():
        write(tmp_path / "root" / rel, text)
    return node_health({}, root=str(tmp_path / "sys"), config_root=str(tmp_path / "root"))


def test_blacklisted_amdgpu_fails_and_names_the_line(tmp_path):
    health = planted(tmp_path, {
        "etc/modprobe.d/blacklist-amdgpu.conf": "# keep the GPU for passthrough\nblacklist amdgpu\n",
        "etc/modprobe.d/other.conf": "options snd_hda_intel power_save=1\n"})
    assert list(health["modprobe_amdgpu"]) == ["/etc/modprobe.d/blacklist-amdgpu.conf"]  # other files not kept
    facts = amd_machine(node_health=health, present={"/dev/shm": True})
    r = verdicts(facts, "driver.blacklist")["driver.blacklist"]
    assert r.status == Status.FAIL and r.fix.file == "/etc/modprobe.d/blacklist-amdgpu.conf"
    assert r.evidence == ["/etc/modprobe.d/blacklist-amdgpu.conf: blacklist amdgpu"]
    commented = planted(tmp_path / "b", {"usr/lib/modprobe.d/amdgpu.conf": "# blacklist amdgpu\noptions amdgpu x=1\n"})
    assert verdicts(amd_machine(node_health=commented), "driver.blacklist")["driver.blacklist"].status == Status.PASS
    on_cmdline = amd_machine(node_health=commented, files={"/proc/cmdline": "ro modprobe.blacklist=nouveau,amdgpu"})
    assert verdicts(on_cmdline, "driver.blacklist")["driver.blacklist"].status == Status.WARN  # loaded now


def test_secure_boot_with_an_unloaded_dkms_amdgpu_fails():
    sb = project_fixture("host-tools/mokutil-sb-enabled.txt")
    dkms = project_fixture("host-tools/dkms-status-amdgpu.txt")
    assert parse_sb_state(sb) is True and parse_sb_state(project_fixture("host-tools/mokutil-no-efi.txt")) is None
    assert parse_dkms_status(dkms)[0].version == "6.2.4-1664922.22.04"
    cmds = {"mokutil-sb-state": ran("mokutil-sb-state", stdout=sb), "dkms-status": ran("dkms-status", stdout=dkms)}
    refused = amd_machine(commands=dict(cmds), present={"/dev/shm": True})
    r = verdicts(refused, "driver.secure_boot")["driver.secure_boot"]
    assert r.status == Status.FAIL and r.fix.text == "sudo mokutil --import /var/lib/dkms/mok.pub"
    loaded = amd_machine(commands=dict(cmds))
    assert verdicts(loaded, "driver.secure_boot")["driver.secure_boot"].status == Status.PASS


def test_repositories_naming_two_rocm_releases_or_another_than_installed(tmp_path):
    two = planted(tmp_path, {"etc/apt/sources.list.d/rocm.list": AMD_REPO_623,
                             "etc/apt/sources.list.d/rocm-old.list": AMD_REPO_623.replace("6.2.3", "6.1.2")})
    r = verdicts(amd_machine(node_health=two), "rocm.repos")["rocm.repos"]
    assert r.status == Status.WARN and "6.1.2, 6.2.3" in r.summary and r.fix.file.endswith("rocm-old.list")
    deb822 = ("Types: deb\nURIs: https://repo.radeon.com/rocm/apt/6.2.3\nSuites: jammy\n\n"
              "Types: deb\nURIs: https://repo.radeon.com/rocm/apt/6.0\nSuites: jammy\nEnabled: no\n")
    one = planted(tmp_path / "b", {"etc/apt/sources.list.d/rocm.sources": deb822})
    assert verdicts(amd_machine(node_health=one), "rocm.repos")["rocm.repos"].status == Status.PASS  # 6.2.3 installed
    yum = planted(tmp_path / "c", {"etc/yum.repos.d/rocm.repo": "[rocm]\nname=ROCm\n"
                                   "baseurl=https://repo.radeon.com/rocm/rhel9/6.3/main\nenabled=1\n"})
    r = verdicts(amd_machine(node_health=yum), "rocm.repos")["rocm.repos"]
    assert r.status == Status.WARN and "6.3" in r.summary and "6.2.3" in r.summary


def test_other_processes_on_the_gpus_are_named():
    text = project_fixture("host-tools/amd-smi-process-rocm6.4.txt")
    (proc,) = parse_amd_smi_process(text)
    assert (proc.gpu, proc.pid, proc.name, proc.vram_text) == (0, 2266127, None, "1.9 GB")
    busy = amd_machine(commands={"amd-smi-process": ran("amd-smi-process", stdout=text)})
    r = verdicts(busy, "gpu.busy")["gpu.busy"]
    assert r.status == Status.WARN and "pid 2266127" in r.evidence[0] and r.fix.text == "amd-smi process"
    idle = amd_machine(commands={"amd-smi-process": ran("amd-smi-process", stdout="No running processes detected\n")})
    assert verdicts(idle, "gpu.busy")["gpu.busy"].status == Status.PASS
    # Debian's amd-smi without a driver: every subcommand ends with this error and exit 255 (recorded for `list`)
    no_driver = ran("amd-smi-process", stdout=project_fixture("debian-sid-rocm/amd-smi-list.stdout.txt"),
                    returncode=255, stderr=project_fixture("debian-sid-rocm/amd-smi-list.stderr.txt"))
    r = verdicts(amd_machine(commands={"amd-smi-process": no_driver}), "gpu.busy")["gpu.busy"]
    assert r.status == Status.SKIP and "255" in r.summary


def test_pypi_amdsmi_of_another_rocm_is_named_when_torch_sees_no_gpu():
    facts = amd_machine(packages={"torch": "2.5.1+rocm6.2", "amdsmi": "7.0.2"})
    facts.probes["torch"] = {**facts.probes["torch"], "device_count": 0, "devices": []}
    v = verdicts(facts, "torch.amdsmi_package", "torch.sees_gpus")
    assert v["torch.amdsmi_package"].status == Status.FAIL and "7.0.2" in v["torch.amdsmi_package"].summary
    assert v["torch.sees_gpus"].status == Status.FAIL and "amdsmi package 7.0.2" in v["torch.sees_gpus"].summary
    assert v["torch.sees_gpus"].fix.text == "pip uninstall -y amdsmi"
    rocm_own = amd_machine(packages={"torch": "2.5.1+rocm6.2", "amdsmi": "24.6.3+9578815"})  # /opt/rocm/share/amd_smi
    assert verdicts(rocm_own, "torch.amdsmi_package")["torch.amdsmi_package"].status == Status.PASS


def test_ipc_rule_on_rocm_7_2_with_vllm():
    layout = {"roots": {"/opt/rocm": {"info_version": "7.2.1-81\n", "therock_cores": {}}}}
    with_vllm = amd_machine(rocm_layout=layout, packages={"torch": "2.9.1+rocm7.2", "vllm": "0.11.0"})
    r = verdicts(with_vllm, "env.ipc_legacy")["env.ipc_legacy"]
    assert r.status == Status.WARN and r.fix.text == "export HSA_ENABLE_IPC_MODE_LEGACY=1"
    set_already = amd_machine(rocm_layout=layout, packages={"vllm": "0.11.0"}, env={"HSA_ENABLE_IPC_MODE_LEGACY": "1"})
    assert verdicts(set_already, "env.ipc_legacy")["env.ipc_legacy"].status == Status.PASS
    assert verdicts(amd_machine(), "env.ipc_legacy")["env.ipc_legacy"].status == Status.PASS  # ROCm 6.2.3


def test_collection_runs_the_host_tools(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "mokutil", stdout=project_fixture("host-tools/mokutil-sb-enabled.txt"))
    make_tool(bin_dir, "dkms", stdout=project_fixture("host-tools/dkms-status-amdgpu.txt"))
    make_tool(bin_dir, "amd-smi", stdout=project_fixture("host-tools/amd-smi-process-rocm6.4.txt"))
    monkeypatch.setenv("PATH", env_with_path(bin_dir)["PATH"])
    facts = collect_facts(deadline_s=20, command_timeout_s=5, python_probes=False)
    assert parse_sb_state(facts.commands["mokutil-sb-state"].stdout) is True
    assert parse_dkms_status(facts.commands["dkms-status"].stdout)[0].name == "amdgpu"
    assert parse_amd_smi_process(facts.commands["amd-smi-process"].stdout)[0].pid == 2266127


def pci_tree(root, *, acs_ctrl: int | None, bad_pages: int = 0, threshold: str = "-1"):
    """Root port 0000:00:01.1 above an MI300X (0000:03:00.0), as sysfs lays them out; the port's configuration
    space as root reads it (4 KiB) with an ACS extended capability at 0x100, or as a user reads it (256 bytes)."""
    import struct

    port = root / "devices/pci0000:00/0000:00:01.1"
    gpu = port / "0000:03:00.0"
    config = bytearray(4096 if acs_ctrl is not None else 256)
    if acs_ctrl is not None:
        struct.pack_into("<I", config, 0x100, 0x000D | (1 << 16))  # ACS, version 1, no next capability
        struct.pack_into("<H", config, 0x106, acs_ctrl)
    write(port / "vendor", "0x1022\n")
    write(port / "class", "0x060400\n")
    (port / "config").write_bytes(bytes(config))
    for name, text in {"vendor": "0x1002\n", "class": "0x038000\n", "device": "0x74a1\n",
                       "ras/gpu_vram_bad_pages": "".join(f"0x{0x1000 + i:08x} : 0x00001000 : R\n"
                                                         for i in range(bad_pages))}.items():
        write(gpu / name, text)
    write(root / "module/amdgpu/parameters/bad_page_threshold", f"{threshold}\n")
    links = root / "bus/pci/devices"
    links.mkdir(parents=True)
    for d in (port, gpu):
        os.symlink(d, links / d.name)
    return node_health({}, root=str(root), config_root=str(root / "etc-root"))


def test_acs_redirect_on_the_gpus_bridge_is_named(tmp_path):
    health = pci_tree(tmp_path / "on", acs_ctrl=0x001D)  # SV | RR | CR | UF, as firmware commonly leaves it
    assert health["pcie_acs"]["gpus"] == {"0000:03:00.0": ["0000:00:01.1"]}
    r = verdicts(amd_machine(node_health=health), "health.pcie_acs")["health.pcie_acs"]
    assert r.status == Status.WARN and "0000:00:01.1" in r.summary
    assert r.fix.text == "sudo setpci -s 0000:00:01.1 ECAP_ACS+6.w=0000"
    off = pci_tree(tmp_path / "off", acs_ctrl=0x0011)  # source validation and upstream forwarding only
    assert verdicts(amd_machine(node_health=off), "health.pcie_acs")["health.pcie_acs"].status == Status.PASS
    user = pci_tree(tmp_path / "user", acs_ctrl=None)  # 256 bytes: not root
    r = verdicts(amd_machine(node_health=user), "health.pcie_acs")["health.pcie_acs"]
    assert r.status == Status.SKIP and "root only" in r.summary


def test_bad_pages_near_the_threshold_and_retirement_off(tmp_path):
    near = pci_tree(tmp_path / "near", acs_ctrl=0, bad_pages=10, threshold="10")
    r = verdicts(amd_machine(node_health=near), "health.bad_page_threshold")["health.bad_page_threshold"]
    assert r.status == Status.FAIL and "10 retired pages of the threshold 10" in r.summary
    off = pci_tree(tmp_path / "off", acs_ctrl=0, threshold="0")
    r = verdicts(amd_machine(node_health=off), "health.bad_page_threshold")["health.bad_page_threshold"]
    assert r.status == Status.WARN and "retirement is off" in r.summary
    default = pci_tree(tmp_path / "default", acs_ctrl=0, bad_pages=2)
    r = verdicts(amd_machine(node_health=default), "health.bad_page_threshold")["health.bad_page_threshold"]
    assert r.status == Status.PASS and "most retired pages on a GPU: 2" in r.summary


def test_xgmi_links_down_are_named_without_traffic():
    text = project_fixture("host-tools/amd-smi-xgmi-link-status-25.3.0.txt")
    r = verdicts(amd_machine(commands={"amd-smi-xgmi-links": ran("amd-smi-xgmi-links", stdout=text)}),
                 "health.xgmi_links")["health.xgmi_links"]
    assert r.status == Status.WARN and "4 xGMI link(s) down on 2 GPU(s)" in r.summary
    assert r.evidence[0] == "GPU0 0000:08:00.0: U U U U D U D X"
    up = amd_machine(commands={"amd-smi-xgmi-links": ran("amd-smi-xgmi-links", stdout=text.replace(" D ", " U "))})
    assert verdicts(up, "health.xgmi_links")["health.xgmi_links"].status == Status.PASS


def test_cper_records_fatal_against_corrected():
    fatal = ran("amd-smi-cper", stdout=project_fixture("host-tools/amd-smi-ras-cper-table-docs.txt"))
    r = verdicts(amd_machine(commands={"amd-smi-cper": fatal}), "health.cper")["health.cper"]
    assert r.status == Status.WARN and "8 fatal or uncorrected" in r.summary
    assert r.evidence[0] == "GPU 0: fatal at 2000/06/27 10:45:13 (AFID 30)"
    corrected = ran("amd-smi-cper", stdout=project_fixture("host-tools/amd-smi-ras-cper-25.5.txt"))
    r = verdicts(amd_machine(commands={"amd-smi-cper": corrected}), "health.cper")["health.cper"]
    assert r.status == Status.PASS and r.evidence == ["GPU 0: non_fatal_corrected at 2025/04/08 18:23:44"]
