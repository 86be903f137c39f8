"""What to tell a person when a probe errors or hangs. No torch here; reads a few /proc files."""

from __future__ import annotations

from pathlib import Path

# Errors whose cause is known, matched on the probe's error text (lower-cased).
_NO_BINARY = ("invalid device function", "no kernel image is available", "hiperrornobinaryforgpu",
              "no binary for gpu", "nobinaryforgpu")
_OOM = ("out of memory", "outofmemoryerror")


def torch_wheel_fix(vendor: str, arch: str) -> str:
    if vendor == "amd":
        return (f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.4  "
                f"# any ROCm wheel whose torch.cuda.get_arch_list() contains {arch or 'your gfx target'}")
    return (f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128  "
            f"# any CUDA wheel whose torch.cuda.get_arch_list() contains {arch or 'your sm_ arch'}")


def smi_processes_command(vendor: str) -> str:
    return "amd-smi process" if vendor == "amd" else "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"


def error_fix(error: str, vendor: str, arch: str, probe: str) -> tuple[str, str]:
    """(what it means, one fix) for an exception text a probe reported."""
    text = error.lower()
    if any(k in text for k in _NO_BINARY):
        return ("the installed torch has no GPU code for this GPU's architecture", torch_wheel_fix(vendor, arch))
    if any(k in text for k in _OOM):
        return ("the GPU ran out of memory: another process probably holds it", smi_processes_command(vendor))
    return ("the probe raised an error", f"rocmcheck probe {probe}  # run it alone to see the full traceback")


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def collective_hang_hints(vendor: str, cmdline_path: str = "/proc/cmdline",
                          numa_path: str = "/proc/sys/kernel/numa_balancing") -> tuple[list[str], str]:
    """(evidence, one fix) for a collective that hung. On ROCm the known causes are an IOMMU that is not in
    pass-through (RCCL warns 'Missing "iommu=pt"', https://github.com/ROCm/rccl/issues/1129) and NUMA
    auto-balancing (AMD MI300X system tuning guide)."""
    evidence: list[str] = []
    if vendor == "amd":
        cmdline = read_text(cmdline_path)
        numa = (read_text(numa_path) or "").strip()
        if cmdline is not None and "iommu=pt" not in cmdline.split():
            evidence.append(f"{cmdline_path} has no iommu=pt (RCCL collectives can hang without it)")
        if numa == "1":
            evidence.append(f"{numa_path} is 1: NUMA auto-balancing is on")
        if cmdline is not None and "iommu=pt" not in cmdline.split():
            fix = ('add iommu=pt to GRUB_CMDLINE_LINUX in /etc/default/grub, then sudo update-grub && sudo reboot  '
                   '# workaround meanwhile: export NCCL_P2P_DISABLE=1 (slower)')
        elif numa == "1":
            fix = "sudo sysctl kernel.numa_balancing=0"
        else:
            fix = "NCCL_DEBUG=INFO rocmcheck probe collective  # RCCL's log names the transport that stalls; NCCL_P2P_DISABLE=1 is the slow workaround"
        return evidence, fix
    return evidence, "NCCL_DEBUG=INFO rocmcheck probe collective  # NCCL's log names the transport that stalls; NCCL_P2P_DISABLE=1 is the slow workaround"


def hang_fix(probe: str, vendor: str) -> str:
    tool = "amd-smi monitor" if vendor == "amd" else "nvidia-smi"
    return (f"sudo dmesg | tail -50; {tool}  # look for a GPU reset or a process holding the GPU, "
            f"then rerun: rocmcheck probe {probe}")
