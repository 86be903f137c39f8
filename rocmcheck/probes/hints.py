"""What to tell a person when a probe errors or hangs. No torch here; reads a few /proc files. The fix texts
themselves live in rocmcheck/fixes.py, shared with the doctor's checks."""

from __future__ import annotations

from pathlib import Path

from rocmcheck import fixes
from rocmcheck.fixes import smi_processes_command  # noqa: F401 - re-exported for the probe verdicts

# Errors whose cause is known, matched on the probe's error text (lower-cased).
_NO_BINARY = ("invalid device function", "no kernel image is available", "hiperrornobinaryforgpu",
              "no binary for gpu", "nobinaryforgpu")
_OOM = ("out of memory", "outofmemoryerror")


def installed_rocm_version() -> str | None:
    """The system ROCm release, found by the one location rule (rocmcheck/facts/rocm_location.py), or None."""
    from rocmcheck.facts.rocm_location import find_rocm

    location = find_rocm()
    return location.version if location is not None else None


def torch_wheel_fix(vendor: str, arch: str) -> str:
    return fixes.torch_wheel_fix(vendor, arch, installed_rocm_version() if vendor == "amd" else None)


def error_fix(error: str, vendor: str, arch: str, probe: str) -> tuple[str, str]:
    """(what it means, one fix) for an exception text a probe reported."""
    text = error.lower()
    if any(k in text for k in _NO_BINARY):
        return ("the installed torch has no GPU code for this GPU's architecture", torch_wheel_fix(vendor, arch))
    if any(k in text for k in _OOM):
        return ("the GPU ran out of memory: another process probably holds it", smi_processes_command(vendor))
    return ("the probe raised an error", fixes.step(f"rocmcheck probe {probe}", "run it alone to see the full traceback"))


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def collective_hang_hints(vendor: str, cmdline_path: str = "/proc/cmdline",
                          numa_path: str = "/proc/sys/kernel/numa_balancing") -> tuple[list[str], str]:
    """(evidence, one fix) for a collective that hung, from this machine's kernel command line and NUMA setting."""
    if vendor != "amd":
        return fixes.collective_hang_fix(vendor, None, None)
    return fixes.collective_hang_fix(vendor, read_text(cmdline_path), read_text(numa_path))


def hang_fix(probe: str, vendor: str) -> str:
    tool = "amd-smi monitor" if vendor == "amd" else "nvidia-smi"
    return fixes.step(f"sudo dmesg | tail -50; {tool}",
                      f"look for a GPU reset or a process holding the GPU, then rerun: rocmcheck probe {probe}")
