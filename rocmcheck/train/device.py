"""Which device the run uses, what it is, and its datasheet bf16 peak (for MFU)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rocmcheck.knowledge import all_archs, arch_info, base_gfx, cuda_arch_from_capability


@dataclass
class DeviceInfo:
    device: torch.device
    kind: str  # "cpu" | "cuda" | "rocm": the reference-curve key
    name: str  # "NVIDIA H200", "AMD Instinct MI300X", "cpu"
    arch: str | None  # "sm_90", "gfx942"
    peak_bf16_tflops: float | None
    peak_source: str | None  # which product entry the peak came from
    bf16_supported: bool

    def to_dict(self) -> dict:
        return {"device": str(self.device), "kind": self.kind, "name": self.name, "arch": self.arch,
                "peak_bf16_tflops": self.peak_bf16_tflops, "peak_source": self.peak_source,
                "bf16_supported": self.bf16_supported}


class DeviceUnavailable(RuntimeError):
    pass


def pick_device(requested: str) -> DeviceInfo:
    if requested == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("--device cuda, but torch sees no GPU (torch.cuda.is_available() is False)")
    if requested == "cpu" or not torch.cuda.is_available():
        return DeviceInfo(torch.device("cpu"), "cpu", "cpu", None, None, None, True)
    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    name = torch.cuda.get_device_name(dev)
    if torch.version.hip:
        # ROCm: gcnArchName carries target features ("gfx942:sramecc+:xnack-").
        arch = base_gfx(getattr(props, "gcnArchName", "") or "") or None
        kind = "rocm"
    else:
        arch = cuda_arch_from_capability(props.major, props.minor)
        kind = "cuda"
    peak, source = datasheet_peak(name, arch)
    return DeviceInfo(dev, kind, name, arch, peak, source, torch.cuda.is_bf16_supported())


def datasheet_peak(device_name: str, arch: str | None) -> tuple[float | None, str | None]:
    """Dense bf16 peak of the product whose name appears in the device name, from gpus.json."""
    candidates = [arch_info(arch)] if arch and arch_info(arch) else list(all_archs().values())
    for info in candidates:
        if info is None:
            continue
        product = info.match_product(device_name)
        if product and product.bf16_tflops:
            return float(product.bf16_tflops), f"{info.name} {product.name}"
    return None, None


def fused_adamw_ok(device: torch.device, pure_bf16: bool) -> bool:
    """fused=True exists for CUDA/ROCm (and CPU since torch 2.4); try it rather than guess."""
    try:
        p = torch.nn.Parameter(torch.zeros(2, device=device, dtype=torch.bfloat16 if pure_bf16 else torch.float32))
        p.grad = torch.zeros_like(p)
        torch.optim.AdamW([p], lr=1e-3, fused=True).step()
        return True
    except (RuntimeError, TypeError, ValueError):
        return False


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
