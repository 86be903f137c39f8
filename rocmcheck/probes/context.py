"""What the judges know about the machine, and where it comes from. No torch here.

`HostFacts` is what the caller collected before the stage: the doctor passes what its fact collection found;
`rocmcheck probe` alone reads it once in the parent (probes/host.py). `DeviceContext` adds what the probe child
reported about torch's GPUs. The judges read only these: they never run a tool or read a file themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.knowledge import Product, arch_info
from rocmcheck.knowledge.floors import Floor, validation_floor
from rocmcheck.knowledge.site import SiteRules


@dataclass
class HostFacts:
    """Facts from the facts layer, each None when it was not collected (not known, which is not "absent")."""

    gpu_names: list[str] | None = None  # the product names amd-smi / rocm-smi / nvidia-smi reported
    smi_memory_bytes: list[int] | None = None  # each GPU's total memory as those tools report it
    rocm_version: str | None = None  # the installed ROCm release ("6.3.3"), for the torch wheel a fix names
    kernel_cmdline: str | None = None  # /proc/cmdline (iommu=pt), for a collective that hangs
    numa_balancing: str | None = None  # /proc/sys/kernel/numa_balancing ("0" / "1")
    site_rules: SiteRules | None = None  # the site's own rules (doctor --knowledge): its floors come first


@dataclass
class DeviceContext:
    """What the parent knows about the GPUs: the child's device report plus the host facts passed down."""

    vendor: str = ""  # "amd" | "nvidia" ("cpu" in test mode)
    name: str = ""  # torch's device name, e.g. "NVIDIA H200", "AMD Instinct MI300X"
    arch: str = ""  # "gfx942" or "sm_90"
    count: int = 0
    torch: str = ""
    hip: str | None = None
    gpu_names: list[str] = field(default_factory=list)  # what amd-smi/nvidia-smi reported
    smi_memory_bytes: list[int] | None = None
    env: dict[str, str] = field(default_factory=dict)
    rocm_version: str | None = None
    kernel_cmdline: str | None = None
    numa_balancing: str | None = None
    site_rules: SiteRules | None = None

    @classmethod
    def from_device_event(cls, device: dict[str, Any], host: HostFacts | None = None,
                          env: dict[str, str] | None = None) -> "DeviceContext":
        host = host or HostFacts()
        first = (device.get("devices") or [{}])[0]
        return cls(
            vendor="amd" if device.get("hip") else "nvidia",
            name=str(first.get("name") or ""),
            arch=str(first.get("arch") or ""),
            count=int(device.get("count") or 0),
            torch=str(device.get("torch") or ""),
            hip=device.get("hip"),
            gpu_names=list(host.gpu_names or []),
            smi_memory_bytes=list(host.smi_memory_bytes) if host.smi_memory_bytes is not None else None,
            env=dict(env or {}),
            rocm_version=host.rocm_version,
            kernel_cmdline=host.kernel_cmdline,
            numa_balancing=host.numa_balancing,
            site_rules=host.site_rules,
        )

    def product(self) -> Product | None:
        arch = arch_info(self.arch) if self.arch else None
        if arch is None:
            return None
        for name in [self.name, *self.gpu_names]:
            product = arch.match_product(name)
            if product is not None:
                return product
        return None

    def floor(self, key: str) -> Floor | None:
        """The floor of this GPU's product for one measure: the site's (--knowledge) where it sets one, else AMD's
        validation floor (knowledge/floors.py); None without either."""
        product = self.product()
        if product is None:
            return None
        site = self.site_rules.floor(product.name, key) if self.site_rules is not None else None
        return site or validation_floor(product.name, key)

    def label(self) -> str:
        return f"{self.name} ({self.arch})" if self.arch else self.name or "this GPU"
