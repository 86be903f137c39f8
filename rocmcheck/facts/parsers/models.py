"""What the parsers return. Plain dataclasses so checks and tests read them the same way."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RocmAgent:
    """One HSA agent printed by rocminfo."""

    index: int  # "Agent N"
    name: str  # "gfx942" for GPUs, CPU model for CPUs, "aie2" for NPUs
    marketing_name: str = ""
    vendor: str = ""
    device_type: str = ""  # "GPU" | "CPU" | "DSP" | ...
    uuid: str = ""
    node: int | None = None
    chip_id: int | None = None  # from "Chip ID: 29857(0x74a1)"
    compute_units: int | None = None
    wavefront_size: int | None = None
    memory_bytes: int | None = None  # the GPU's GLOBAL COARSE GRAINED pool (its VRAM as HSA sees it)
    is_apu: bool = False  # "Memory Properties: APU"
    isas: list[str] = field(default_factory=list)  # "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
    bdfid: int | None = None  # "BDFID: 6912" = PCI bus/device/function packed (0x1b00 -> bus 0x1b)
    kernel_dispatch: bool = False  # "Features: KERNEL_DISPATCH": the agent runs kernels (a GPU; a CPU says None)

    @property
    def is_gpu(self) -> bool:
        return self.device_type.upper() == "GPU"


@dataclass
class RocminfoReport:
    agents: list[RocmAgent] = field(default_factory=list)
    runtime_version: str | None = None
    kfd_module_loaded: bool | None = None  # "ROCk module ... is loaded"
    # Recognised failure text (e.g. "Unable to open /dev/kfd read-write: Permission denied"), verbatim.
    error: str | None = None
    # "kfd_permission" | "kfd_invalid_argument" | "kfd_missing" | "kfd_no_memory" | "hsa_error" | "driver_not_loaded"
    # | "other" -- see rocmcheck/facts/parsers/rocminfo.py ERROR_KINDS for the text behind each.
    error_kind: str | None = None
    error_lines: list[str] = field(default_factory=list)  # every recognised failure line, verbatim, in order
    hsa_status: str | None = None  # "HSA_STATUS_ERROR_OUT_OF_RESOURCES" from "Call returned ..."
    group_note: str | None = None  # "root is member of nogroup group" / "Failed to get user name ..."
    kfd_module_version: str | None = None  # "6.8.5" from "ROCk module version 6.8.5 is loaded"
    runtime_ext_version: str | None = None  # "Runtime Ext Version: 1.6"
    system_attributes: dict[str, str] = field(default_factory=dict)  # the "HSA System Attributes" block
    complete: bool = False  # the output ended with "*** Done ***" (a paste may be cut short)
    # Agent lines without their "Agent N" header: pasted from the middle of the output or through grep, so the
    # agents listed are not all there are.
    fragment: bool = False

    @property
    def gpus(self) -> list[RocmAgent]:
        return [a for a in self.agents if a.is_gpu]


@dataclass
class SmiGpu:
    """One GPU as rocm-smi / amd-smi / nvidia-smi report it. Any field may be unknown."""

    index: int
    product_name: str | None = None  # "AMD Instinct MI300X", "NVIDIA H100 80GB HBM3"
    gfx: str | None = None  # AMD: "gfx942"
    vram_total_bytes: int | None = None
    vram_used_bytes: int | None = None
    partition: str | None = None  # compute partition "SPX"/"CPX"/"QPX" when shown
    memory_partition: str | None = None  # "NPS1"/"NPS4"
    pci_bus: str | None = None
    uuid: str | None = None
    compute_cap: str | None = None  # NVIDIA: "9.0"
    node: int | None = None  # KFD node (rocm-smi "Node" column, amd-smi list NODE_ID)
    device_id: str | None = None  # PCI device id as the tool prints it: "0x74a1" (AMD), "0x232110DE" (NVIDIA)
    partition_id: int | None = None  # which slice of a partitioned GPU ("NPS1, QPX, 3" -> 3)
    vram_used_percent: float | None = None  # rocm-smi "VRAM%": memory some process already holds
    util_percent: float | None = None  # rocm-smi "GPU%", rocm-smi --json "GPU use (%)"
    compute_units: int | None = None  # amd-smi static "NUM_COMPUTE_UNITS" (a partition's own share)


@dataclass
class SmiReport:
    tool: str  # "rocm-smi" | "amd-smi" | "nvidia-smi"
    gpus: list[SmiGpu] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None  # nvidia-smi header "CUDA Version: 12.7"
    tool_version: str | None = None
    rocm_version: str | None = None  # amd-smi version prints "ROCm version: 6.3.3"
    # A recognised failure message, verbatim: "NVIDIA-SMI has failed because it couldn't communicate with
    # the NVIDIA driver. ...", "ERROR:root:Driver not initialized (amdgpu not found in modules)", "ERROR: Unable to
    # detect any GPU devices, check amdgpu version and module status".
    error: str | None = None
    # The amdgpu driver is the kernel's own (no amdgpu-dkms): the tools then print the kernel's release (rocm-smi
    # "Driver version: 6.14.0-28-generic") or its whole build string (amd-smi "amdgpu version: Linuxversion6.8.0-79-
    # generic(buildd@...)"); driver_version is then that kernel release, or None when the tool cut it ("Linuxver").
    # False: an amdgpu-dkms version ("6.7.0"); None: no driver version shown.
    driver_in_kernel: bool | None = None


@dataclass
class HipConfig:
    hip_version: str | None = None  # "6.3.42133-1b9c17779"
    hip_version_short: str | None = None  # "6.3"
    platform: str | None = None  # "amd" | "nvidia"
    rocm_path: str | None = None
    hip_path: str | None = None
    runtime: str | None = None  # "rocclr"
    compiler: str | None = None  # "clang"
    clang_version: str | None = None  # "AMD clang version 18.0.0git (... roc-6.3.2 ...)"
