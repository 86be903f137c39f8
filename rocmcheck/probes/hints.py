"""What to tell a person when a probe errors or hangs: pure functions of the error text and the facts passed
down (the ROCm version comes in through DeviceContext; nothing here runs a tool or reads a file). No torch.
The fix texts shared with the doctor's checks live in rocmcheck/fixes.py."""

from __future__ import annotations

from rocmcheck import fixes
from rocmcheck.fixes import Fix, shell

# Errors whose cause is known, matched on the probe's error text (lower-cased).
_NO_BINARY = ("invalid device function", "no kernel image is available", "hiperrornobinaryforgpu",
              "no binary for gpu", "nobinaryforgpu")
_OOM = ("out of memory", "outofmemoryerror")


def torch_wheel_fix(vendor: str, arch: str, rocm_version: str | None = None) -> Fix:
    """Reinstall a torch with kernels for `arch`; on ROCm the wheel series follows the installed ROCm when known."""
    return fixes.torch_wheel_fix(vendor, arch, rocm_version if vendor == "amd" else None)


def error_fix(error: str, vendor: str, arch: str, probe: str, rocm_version: str | None = None) -> tuple[str, Fix]:
    """(what it means, one fix) for an exception text a probe reported."""
    text = error.lower()
    if any(k in text for k in _NO_BINARY):
        return ("the installed torch has no GPU code for this GPU's architecture",
                torch_wheel_fix(vendor, arch, rocm_version))
    if any(k in text for k in _OOM):
        return ("the GPU ran out of memory: another process probably holds it",
                fixes.smi_processes(vendor, "stop what you don't need, then rerun the probe"))
    return ("the probe raised an error",
            shell("rocmcheck probe {probe}", "run it alone to see the full traceback", probe=probe))


def hang_fix(probe: str, vendor: str) -> Fix:
    why = f"look for a GPU reset or a process holding the GPU, then rerun: rocmcheck probe {probe}"
    if vendor == "amd":
        return shell("sudo dmesg | tail -50; amd-smi monitor", why)
    return shell("sudo dmesg | tail -50; nvidia-smi", why)
