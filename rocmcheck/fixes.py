"""Fix texts and the facts behind them, in one place: the checks (doctor), the GPU probes and smoke-train all
build their fixes here, so a fact (which wheel index, which docker flags, what counts as IOMMU pass-through) is
written once.

A fix is ONE shell line a person can paste: the commands, then `  # why` as a shell comment. A step no command
can do is a comment alone (`# Upgrade the NVIDIA driver ...`), so pasting it is harmless. Every fix the checks
can produce is parsed with `bash -n` in the tests. Imports nothing heavy (no torch, no rich).
"""

from __future__ import annotations

import shlex

# PyTorch's wheel indexes (https://pytorch.org/get-started/locally/). The ROCm series follows the installed ROCm
# when it is known; else the newest series with stable wheels when this table was written.
TORCH_INDEX = "https://download.pytorch.org/whl"
DEFAULT_ROCM_SERIES = "6.4"
DEFAULT_CUDA_INDEX = "cu128"  # CUDA 12.8 wheels: the first with sm_100/sm_120 kernels

# The flags ROCm's Docker guide and AMD's training containers use; memlock unlimited because CPU offload and RDMA
# pin host memory (host.memlock judges it).
DOCKER_ROCM_FLAGS = ("--device=/dev/kfd --device=/dev/dri --group-add video --group-add render "
                     "--ipc=host --shm-size 16G --security-opt seccomp=unconfined --ulimit memlock=-1:-1")
DOCKER_ROCM_IMAGE = "rocm/pytorch:latest"

# Kernel command-line tokens that put the IOMMU in pass-through: RCCL warns 'Missing "iommu=pt"' without one
# (https://github.com/ROCm/rccl/issues/1129); amd_iommu=pt is the AMD-specific spelling of the same setting.
IOMMU_PT_TOKENS = ("iommu=pt", "amd_iommu=pt")


def step(command: str | None, note: str = "") -> str:
    """`command  # note`, or `# note` when no command can do it. The note never breaks the line."""
    note = " ".join(note.split())
    if not command:
        return f"# {note}" if note else ""
    return f"{command}  # {note}" if note else command


def compile_bytecode(site_dir: str, writable: bool) -> str:
    """Write the compiled bytecode of a package folder once (compileall writes it whatever
    PYTHONDONTWRITEBYTECODE says); where the folder is read-only, under a cache folder of one's own, which
    every later process must name in PYTHONPYCACHEPREFIX too."""
    target = shlex.quote(site_dir)
    if writable:
        return step(f"python -m compileall -q -j 0 {target}", "once: every later import of torch reads the bytecode")
    return step(f'export PYTHONPYCACHEPREFIX="$HOME/.cache/pycache" && python -m compileall -q -j 0 {target}',
                "keep that export in the shell profile or job script: Python then reads the bytecode from there")


def iommu_passthrough(cmdline: str) -> bool:
    return any(tok in IOMMU_PT_TOKENS for tok in cmdline.split())


def rocm_series(version: str | None) -> str:
    """"6.2.3" -> "6.2"; unknown -> DEFAULT_ROCM_SERIES."""
    parts = (version or "").split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"{parts[0]}.{parts[1]}"
    return DEFAULT_ROCM_SERIES


def torch_index_url(vendor: str, rocm_version: str | None = None) -> str:
    if vendor == "amd":
        return f"{TORCH_INDEX}/rocm{rocm_series(rocm_version)}"
    if vendor == "nvidia":
        return f"{TORCH_INDEX}/{DEFAULT_CUDA_INDEX}"
    return f"{TORCH_INDEX}/cpu"


def torch_install(vendor: str, rocm_version: str | None = None, *, reinstall: bool = False, note: str = "") -> str:
    """The pip line for a torch that matches this machine. `reinstall`: a torch is already there, and pip would
    answer "already satisfied" without --force-reinstall. Never a bare `pip install torch` (on Linux that is the
    CUDA wheel, wrong on a ROCm machine)."""
    force = " --force-reinstall" if reinstall else ""
    line = f"pip install{force} torch --index-url {torch_index_url(vendor, rocm_version)}"
    if vendor not in ("amd", "nvidia"):
        note = note or "no GPU stack found here: the CPU build; install the GPU driver/ROCm first for a GPU build"
    return step(line, note)


def torch_wheel_fix(vendor: str, arch: str, rocm_version: str | None = None) -> str:
    """A torch that lacks kernels for `arch`: reinstall one that has them."""
    what = arch or ("your gfx target" if vendor == "amd" else "your sm_ arch")
    return torch_install(vendor, rocm_version, reinstall=True,
                         note=f"any wheel whose torch.cuda.get_arch_list() contains {what}")


def docker_run(note: str = "") -> str:
    return step(f"docker run -it {DOCKER_ROCM_FLAGS} {DOCKER_ROCM_IMAGE}",
                note or "restart the container with these flags (your image in place of rocm/pytorch)")


GROUPS_FIX = step('sudo usermod -aG render,video "$USER"', "then log out and back in (or: newgrp render)")
NUMA_FIX = step("sudo sysctl kernel.numa_balancing=0",
                "AMD MI300X tuning guide; persist it in /etc/sysctl.d/")
IOMMU_COMMAND = ("sudo sed -i 's/^GRUB_CMDLINE_LINUX=\"/&iommu=pt /' /etc/default/grub && sudo update-grub "
                 "&& sudo reboot")
IOMMU_FIX = step(IOMMU_COMMAND, "adds iommu=pt to the kernel command line, https://github.com/ROCm/rccl/issues/1129")
SHM_FIX = step("sudo mount -o remount,size=16G /dev/shm")
MEMLOCK_FIX = step("echo '* - memlock unlimited' | sudo tee -a /etc/security/limits.conf",
                   "then log in again; for this shell only: ulimit -l unlimited")
DEEPSPEED_REINSTALL = "pip uninstall -y deepspeed && DS_BUILD_OPS=0 pip install --no-cache-dir --no-build-isolation deepspeed"


def unset(*names: str, note: str = "") -> str:
    """Env var names are kept exactly as given (they are case-sensitive)."""
    return step("unset " + " ".join(names), note)


def flash_attn_rebuild(archs: list[str] | tuple[str, ...] = ()) -> str:
    """Rebuild flash-attn against the installed torch. build-env sizes MAX_JOBS from this machine's cores and free
    memory and sets the arch variables, so the fix runs it instead of guessing a job count."""
    arch = "".join(f" --arch {shlex.quote(a)}" for a in archs)
    return step(f'pip uninstall -y flash-attn && eval "$(rocmcheck build-env --target flash-attn{arch})" && '
                "pip install --no-build-isolation --no-cache-dir flash-attn",
                "rebuild against the installed torch")


def smi_processes_command(vendor: str) -> str:
    return "amd-smi process" if vendor == "amd" else "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"


def collective_hang_fix(vendor: str, cmdline: str | None, numa: str | None) -> tuple[list[str], str]:
    """(evidence, one fix) for a collective that hung. On ROCm the known causes are an IOMMU not in pass-through
    and NUMA auto-balancing (AMD MI300X system tuning guide)."""
    evidence: list[str] = []
    debug = step("NCCL_DEBUG=INFO rocmcheck probe collective",
                 f"{'RCCL' if vendor == 'amd' else 'NCCL'}'s log names the transport that stalls; "
                 "NCCL_P2P_DISABLE=1 is the slow workaround")
    if vendor != "amd":
        return evidence, debug
    no_pt = cmdline is not None and not iommu_passthrough(cmdline)
    if no_pt:
        evidence.append("/proc/cmdline has no iommu=pt (RCCL collectives can hang without it)")
    if (numa or "").strip() == "1":
        evidence.append("/proc/sys/kernel/numa_balancing is 1: NUMA auto-balancing is on")
    if no_pt:
        return evidence, step(IOMMU_COMMAND, "until the reboot: export NCCL_P2P_DISABLE=1 (slower)")
    if (numa or "").strip() == "1":
        return evidence, NUMA_FIX
    return evidence, debug
