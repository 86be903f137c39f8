"""uname, os-release, lsb_release, nvcc and dkms on real pastes (and the public os-release fixtures in place)."""

from __future__ import annotations

from conftest import project_fixture, read_fixture

from rocmcheck.triage.readers.paste import split
from rocmcheck.triage.readers.system_info import (
    parse_dkms_status,
    parse_lsb_release,
    parse_nvcc,
    parse_os_release,
    parse_uname,
)


def _blocks(relpath: str, kind: str) -> list[str]:
    return [b.text for b in split(project_fixture("pastes/" + relpath)).of_kind(kind)]


def test_uname_a_forms():
    u = parse_uname(read_fixture("os-release/uname-a-5.15.0-161-generic-ubuntu22.04.txt"))
    assert (u.hostname, u.release) == ("kubernetes-1-29-0", "5.15.0-161-generic")
    assert (u.machine, u.os) == ("x86_64", "GNU/Linux")
    assert u.version == "#171-Ubuntu SMP Sat Oct 11 08:17:01 UTC 2025"
    [text] = _blocks("corpus/30-ROCm-legacy-rocm-build-3701.paste.txt", "uname")
    u = parse_uname(text)
    assert u.release == "6.8.0-45-generic" and u.version.startswith("#45~22.04.1-Ubuntu SMP PREEMPT_DYNAMIC")
    u = parse_uname(project_fixture("pastes/uname/uname-a_el8_4.18.0-305.19.1_from-hipconfig-Linux-Kernel-section_"
                                    "ROCm-1583.txt"))
    assert u.release == "4.18.0-305.19.1.el8_4.x86_64" and not u.is_wsl
    pi = _blocks("lsb_release/lsb_release-a_Debian-style-TABs_No-LSB-modules_plus-os-release-uname_Raspbian11_unfenced_"
                 "README_excerpt.txt", "uname")
    assert parse_uname(pi[0]).machine == "armv7l" and parse_uname(pi[1]).release == "6.1.21-v7+"  # /proc/version


def test_uname_r_and_v_after_their_commands():
    blocks = split(project_fixture("pastes/uname/uname-r-v-a_Debian12_6.1.0-31-amd64_docs-page.txt")).of_kind("uname")
    assert [b.command for b in blocks] == ["uname -r", "uname -v", "uname -a"]
    assert parse_uname(blocks[0].text).release == "6.1.0-31-amd64"
    assert parse_uname(blocks[1].text).version == "#1 SMP PREEMPT_DYNAMIC Debian 6.1.128-1 (2025-02-07)"
    [fedora] = _blocks("amd_smi/version_inkernel-amdgpu-Linuxversion6.19.8-fc43_StrixHalo_rocm7.2.0_ROCm-"
                       "5444.txt", "uname")
    assert parse_uname(fedora).release == "6.19.8-200.fc43.x86_64" and parse_uname(fedora).machine == "x86_64"


def test_os_release_files():
    rhel = parse_os_release(read_fixture("os-release/rhel-9.3-plow-aarch64-gh200.txt"))
    assert (rhel.id, rhel.version_id, rhel.id_like) == ("rhel", "9.3", ["fedora"])
    assert rhel.fields["REDHAT_SUPPORT_PRODUCT_VERSION"] == "9.3"  # after the blank line in the file
    ubuntu = parse_os_release(read_fixture("os-release/ubuntu-22.04.5-jammy.txt"))
    assert (ubuntu.id, ubuntu.version_id, ubuntu.pretty_name) == ("ubuntu", "22.04", "Ubuntu 22.04.5 LTS")
    [cut] = _blocks("os_release/cat-os-release_Ubuntu-20.04.3_author-truncated-dots_plus-uname-HWE_blog-openwebui.txt",
                    "os_release")
    r = parse_os_release(cut)
    assert (r.id, r.version_id, r.version_codename) == ("ubuntu", "20.04", None)  # the author cut it at "..."
    [mid] = _blocks("os_release/cat-os-release_Ubuntu-24.04.2_MI300X-host_cut-mid-line_k8s-device-plugin-157_"
                    "excerpt.txt",
                    "os_release")
    assert parse_os_release(mid).version_codename == "noble"
    [pi] = _blocks("lsb_release/lsb_release-a_Debian-style-TABs_No-LSB-modules_plus-os-release-uname_Raspbian11_"
                   "unfenced_"
                   "README_excerpt.txt", "os_release")
    assert parse_os_release(pi).id == "raspbian" and parse_os_release(pi).id_like == ["debian"]


def test_lsb_release():
    [centos] = _blocks("lsb_release/lsb_release-a_CentOS8.4_fenced_ROCm-1583.txt", "lsb_release")
    r = parse_lsb_release(centos)
    assert (r.id, r.release, r.codename) == ("centos", "8.4.2105", None)  # "Codename: n/a"
    assert r.description == "CentOS Linux release 8.4.2105"
    [pi] = _blocks("lsb_release/lsb_release-a_Debian-style-TABs_No-LSB-modules_plus-os-release-uname_Raspbian11_"
                   "unfenced_"
                   "README_excerpt.txt", "lsb_release")
    assert (parse_lsb_release(pi).distributor_id, parse_lsb_release(pi).codename) == ("Raspbian", "bullseye")
    mint = parse_lsb_release(read_fixture("hipconfig/hipconfig-full-rocm6.3.2-linuxmint-gfx90c.txt"))
    assert (mint.id, mint.release) == ("linuxmint", "22.1")


def test_nvcc():
    [full] = _blocks("nvcc/nvcc-version_cuda11.0_V11.0.221_pytorch-51840.txt", "nvcc")
    n = parse_nvcc(full)
    assert (n.cuda_version, n.full_version, n.built_on) == ("11.0", "11.0.221", "Wed_Jul_22_19:09:09_PDT_2020")
    assert n.build == "cuda_11.0_bu.TC445_37.28845127_0"
    [one_line] = _blocks("nvcc/nvcc-V-single-line-quoted_plus-nvidia-smi-header-line_cuda10.2_pytorch-"
                         "85332.txt", "nvcc")
    assert parse_nvcc(one_line).cuda_version == "10.2" and parse_nvcc(one_line).built_on is None


def test_dkms_status():
    [text] = _blocks("corpus/30-ROCm-legacy-rocm-build-3701.paste.txt", "dkms")
    d = parse_dkms_status(text)
    assert d.modules == [] and d.errors[0] == "Error! Could not locate dkms.conf file."
    assert "/var/lib/dkms/amdgpu/6.7.0-1787201.22.04/source/dkms.conf" in d.errors[1]
    [text] = _blocks("rocminfo/hsa-error-incompatible-kernel-userspace_RadeonProVII_centos8_rocm4.3_ROCm-"
                     "1583.txt", "dkms")
    [module] = parse_dkms_status(text).modules
    assert (module.name, module.version, module.state, module.kernel) == ("amdgpu", "4.3-52.el7", "added", None)
