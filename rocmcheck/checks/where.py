"""Where the job runs, and the fixes that depend on it: an SR-IOV guest (a cloud VM given a virtual function of an
Instinct GPU), a Kubernetes pod, a Slurm job, a container, or a host of one distribution or another.

A device-access fix is built here once (`device_access_fix`): a pod gets its GPU resource from the AMD device
plugin (`resources.limits: amd.com/gpu`), never a `docker run` line; a Slurm job without GPUs gets `--gres`; a
container gets its restart line; a host gets the driver package of its own distribution (`driver_install_fix`).
In an SR-IOV guest, what belongs to the hypervisor (firmware, the host's IOMMU, RAS counters, power settings,
the PCIe link) is not judged: `host_only_skip` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from rocmcheck.checks import check
from rocmcheck.checks.containers import container_restart
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.fixes import Fix, edit, note, shell
from rocmcheck.knowledge import load
from rocmcheck.result import CheckResult, passed, skipped, warned

HOST_ONLY = "an SR-IOV guest (virtual function): the hypervisor owns this setting, the guest cannot see or set it"
# AMD's GPU device plugin for Kubernetes advertises each GPU as the extended resource amd.com/gpu
# (https://github.com/ROCm/k8s-device-plugin); a pod gets /dev/kfd and its render nodes only by requesting it.
K8S_GPU_RESOURCE = "amd.com/gpu"
K8S_SECRETS = "/var/run/secrets/kubernetes.io"
# Slurm: a job sees GPUs only when it asks for them (--gres=gpu:N or --gpus=N); with ConstrainDevices=yes
# (cgroup.conf) the others are hidden. Slurm sets these variables for a job or step that was given GPUs.
SLURM_GPU_VARS = ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_GPUS")
DEFAULT_GPUS_PER_NODE = 8  # an Instinct OAM node's GPU count: what a fix asks for when the node's count is unknown


@dataclass(frozen=True)
class VfGuest:
    names: tuple[str, ...]  # "AMD Instinct MI300X VF"
    evidence: tuple[str, ...]
    bad_rocm: str | None = None  # the releases reported not to enumerate it ("<7.1")
    bad_rocm_why: str = ""
    sources: tuple[str, ...] = ()


def _vf_rows() -> list[dict]:
    return load("vf_guests.json")["rows"]


def vf_guest(ctx: CheckContext) -> VfGuest | None:
    """The SR-IOV guest this machine is, from the GPUs' PCI device ids (sysfs) and the names rocminfo / amd-smi
    print ("... VF"); None when nothing known says so."""
    rows = _vf_rows()
    by_id = {r["pci_id"].split(":")[1].lower(): r for r in rows}
    evidence: list[str] = []
    hits: list[dict] = []
    for dev in known_or_none(lambda: ctx.health("pci_gpus")) or []:
        device = (dev.get("device") or "").lower().removeprefix("0x")
        if dev.get("vendor") == "amd" and device in by_id:
            hits.append(by_id[device])
            evidence.append(f"PCI {dev.get('bdf')}: device 1002:{device} ({by_id[device]['name']})")
    names = [g.name for g in (known_or_none(lambda: ctx.amd_gpus) or []) if g.name]
    smi = known_or_none(lambda: ctx.amd_smi)
    names += [g.product_name for g in (smi.gpus if smi else []) if g.product_name]
    for name in dict.fromkeys(names):
        if name.split()[-1:] == ["VF"]:
            evidence.append(f"the GPU names itself {name!r}")
            hits += [r for r in rows if r["name"].lower() == name.lower()]
    if not evidence:
        return None
    row = hits[0] if hits else {}
    return VfGuest(tuple(dict.fromkeys(r["name"] for r in hits)) or ("an AMD GPU virtual function",),
                   tuple(dict.fromkeys(evidence)), row.get("bad_rocm"), row.get("bad_rocm_why", ""),
                   tuple(row.get("sources", ())))


def host_only_skip(ctx: CheckContext) -> CheckResult | None:
    """A skip for a check of something only the hypervisor sees, when this is an SR-IOV guest; else None."""
    guest = vf_guest(ctx)
    if guest is None:
        return None
    return skipped(f"{HOST_ONLY} ({guest.names[0]})", list(guest.evidence))


def kubernetes_signs(ctx: CheckContext) -> list[str]:
    """Why this looks like a Kubernetes pod (empty when nothing known says so)."""
    signs = []
    if known_or_none(lambda: ctx.env_var("KUBERNETES_SERVICE_HOST")):
        signs.append("KUBERNETES_SERVICE_HOST is set")
    if known_or_none(lambda: ctx.present(K8S_SECRETS)):
        signs.append(f"{K8S_SECRETS} exists")
    if "kubepods" in (known_or_none(lambda: ctx.file("/proc/1/cgroup")) or ""):
        signs.append("/proc/1/cgroup mentions kubepods")
    return signs


def slurm_job_without_gpus(ctx: CheckContext) -> str | None:
    """The Slurm job id when this runs in a Slurm job that was given no GPU; else None."""
    job = known_or_none(lambda: ctx.env_var("SLURM_JOB_ID"))
    if not job:
        return None
    given = known_or_none(lambda: ctx.env_vars(SLURM_GPU_VARS)) or {}
    if any(v.strip() not in ("", "0") for v in given.values()):
        return None
    return job


def node_gpu_count(ctx: CheckContext, vendor: str = "amd") -> int:
    """The node's GPUs as PCI lists them (a job or pod may see none of them); else DEFAULT_GPUS_PER_NODE."""
    pci = [d for d in known_or_none(lambda: ctx.health("pci_gpus")) or [] if d.get("vendor") == vendor]
    return len(pci) or DEFAULT_GPUS_PER_NODE


def pod_gpu_fix(ctx: CheckContext, vendor: str = "amd") -> Fix:
    resource = K8S_GPU_RESOURCE if vendor != "nvidia" else "nvidia.com/gpu"
    plugin = "AMD GPU device plugin or GPU operator (https://github.com/ROCm/k8s-device-plugin)" \
        if vendor != "nvidia" else "NVIDIA device plugin or GPU operator"
    return edit("the pod's manifest (spec.containers[].resources)",
                f'limits: {{"{resource}": {node_gpu_count(ctx, vendor)}}}, and a memory-backed emptyDir '
                "(medium: Memory) mounted on /dev/shm",
                f"a pod gets GPU devices only through the {plugin}, not through container runtime flags")


def slurm_gres_fix(ctx: CheckContext, vendor: str = "amd") -> Fix:
    return shell("srun --gres=gpu:{n} rocmcheck doctor",
                 "this Slurm job was given no GPU: ask for them (#SBATCH --gres=gpu:N, or --gpus=N)",
                 n=node_gpu_count(ctx, vendor))


def device_access_fix(ctx: CheckContext, vendor: str = "amd", why: str = "") -> Fix:
    """The fix for GPUs that did not reach this process, for where it runs: a pod's GPU resource, Slurm's gres, a
    container's restart line, else the driver of this host's distribution."""
    if kubernetes_signs(ctx):
        return pod_gpu_fix(ctx, vendor)
    if slurm_job_without_gpus(ctx):
        return slurm_gres_fix(ctx, vendor)
    if (known_or_none(lambda: ctx.in_container) or (False, []))[0]:
        return container_restart(vendor, why)
    return driver_install_fix(ctx)


def driver_install_fix(ctx: CheckContext, where: str = "") -> Fix:
    """Install and load the amdgpu driver, with this distribution's own package names.

    AMD's packaged ROCm (the /opt/rocm layout) comes with AMD's `amdgpu-dkms` from repo.radeon.com, installed by
    apt (Ubuntu, Debian), dnf (RHEL, Oracle Linux, Rocky) or zypper (SLES) as AMD's install guides say
    (https://rocm.docs.amd.com/projects/install-on-linux/en/latest/install/native-install/index.html). A
    distribution's own ROCm packages (Debian's, Ubuntu's universe, Fedora's) use the kernel's own amdgpu driver,
    which needs only its firmware (Debian: firmware-amd-graphics, from non-free-firmware)."""
    os_id = (known_or_none(lambda: ctx.os_field("id")) or "").lower()
    like = (known_or_none(lambda: ctx.os_field("like")) or "").lower().split()
    rocm = known_or_none(lambda: ctx.rocm)
    distro_rocm = rocm is not None and rocm.layout == "distro"
    why = (where + "; " if where else "") + "then reboot"
    if distro_rocm and (os_id == "debian" or (os_id != "ubuntu" and "debian" in like)):
        return shell("sudo apt install firmware-amd-graphics && sudo modprobe amdgpu",
                     (where + "; " if where else "") + "Debian's ROCm packages use the Debian kernel's amdgpu "
                     "driver (no amdgpu-dkms); its firmware is in non-free-firmware")
    if distro_rocm and os_id in ("ubuntu", "fedora"):
        return shell("sudo modprobe amdgpu", (where + "; " if where else "") +
                     f"{os_id.capitalize()}'s ROCm packages use the kernel's own amdgpu driver")
    if os_id in ("ubuntu", "debian") or "debian" in like:
        return shell("sudo apt install amdgpu-dkms && sudo reboot", why)
    if os_id in ("rhel", "ol", "rocky", "almalinux", "centos") or "rhel" in like or "fedora" in like:
        return shell("sudo dnf install amdgpu-dkms && sudo reboot", why)
    if os_id in ("sles", "opensuse-leap") or "suse" in like:
        return shell("sudo zypper install amdgpu-dkms && sudo reboot", why)
    return note("install and load the amdgpu driver: AMD's amdgpu-dkms package for your distribution "
                "(https://rocm.docs.amd.com/projects/install-on-linux/), or the kernel's own amdgpu with its "
                "firmware" + (f" ({where})" if where else ""))


def _in_range(version: str | None, spec: str | None) -> bool:
    if not version or not spec:
        return False
    try:
        return Version(version.split("-")[0]) in SpecifierSet(spec)
    except ValueError:  # InvalidVersion / InvalidSpecifier, or more digits than int() takes
        return False


@check("gpu.vf_guest", "SR-IOV guest (GPU virtual function) and the ROCm release it needs")
def check_vf_guest(ctx: CheckContext) -> CheckResult:
    guest = vf_guest(ctx)
    if guest is None:
        if ctx.known_vendor() != "amd":
            return skipped("no AMD GPU stack found")
        return passed("not an SR-IOV guest: the GPUs are physical functions")
    from rocmcheck.checks.rocm import detected_rocm_version

    rocm = known_or_none(lambda: detected_rocm_version(ctx))
    evidence = list(guest.evidence) + [f"ROCm userspace: {rocm or 'not found'}"]
    if _in_range(rocm, guest.bad_rocm):
        return warned(f"an SR-IOV guest ({guest.names[0]}) with ROCm {rocm}: {guest.bad_rocm_why}",
                      note(f"use a ROCm userspace outside {guest.bad_rocm} (an image or install of ROCm 7.1 or "
                           f"later); sources: {', '.join(guest.sources)}"), evidence)
    return passed(f"an SR-IOV guest ({guest.names[0]}): host-only checks (firmware, IOMMU, RAS, PCIe link, "
                  "performance level) are the hypervisor's and are skipped", evidence)
