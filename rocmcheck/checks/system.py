"""Operating system, kernel and the GPU kernel driver."""

from __future__ import annotations

from packaging.version import Version

from rocmcheck import versions
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext
from rocmcheck.checks.rocm import amd_driver_evidence, detected_rocm_version
from rocmcheck.fixes import note, shell
from rocmcheck.knowledge import load
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

REFERENCE_OS = ("ubuntu", "22.04")


def supported_os_for(rocm: str | None) -> tuple[str, dict[str, list[str]]]:
    """The support list of the ROCm release (its major.minor), or the newest one we know when unknown/newer."""
    releases = load("os_support.json")["releases"]
    if rocm:
        wanted = versions.parse(versions.series(rocm))
        for series in releases if wanted is not None else ():  # newest first
            if Version(series) <= wanted:
                return series, releases[series]
    newest = next(iter(releases))
    return newest, releases[newest]


@check("os.release", "Linux distribution supported by ROCm")
def check_os_release(ctx: CheckContext) -> CheckResult:
    system = ctx.platform_info("system")
    if system != "Linux":
        return failed(f"{system} is not Linux",
                      note("ROCm fine-tuning runs on Linux: use Ubuntu 22.04 or 24.04"))
    dist = (ctx.os_field("id") or "").lower()
    version = ctx.os_field("version") or ""
    name = ctx.os_field("name") or f"{dist} {version}"
    if ctx.known_vendor() != "amd":
        return passed(f"{name} (ROCm support list not applied: no AMD GPU stack found)")
    rocm = detected_rocm_version(ctx)
    series, table = supported_os_for(rocm)
    supported = table.get(dist, [])
    evidence = [f"ROCm {rocm or 'unknown'} -> support list of ROCm {series}: {dist} {', '.join(supported) or 'none'}"]
    if dist == REFERENCE_OS[0] and versions.within(version, REFERENCE_OS[1]):
        return passed(f"{name}: the reference OS for ROCm", evidence)
    if any(versions.within(version, listed) for listed in supported):
        return passed(f"{name}: supported by ROCm {series}", evidence)
    if dist == "ubuntu" and versions.within(version, "20.04"):
        return failed(f"{name}: ROCm dropped Ubuntu 20.04 after 6.1",
                      note("upgrade to Ubuntu 22.04 (or 24.04), or use a rocm/pytorch Ubuntu 22.04 container"),
                      evidence)
    return warned(f"{name} is not on ROCm {series}'s supported OS list",
                  note("use Ubuntu 22.04/24.04 on the host, or run inside a rocm/pytorch Ubuntu 22.04 container"),
                  evidence)


@check("os.kernel", "Kernel version")
def check_kernel(ctx: CheckContext) -> CheckResult:
    kernel = ctx.platform_info("kernel") or ""
    if ctx.known_vendor() != "amd":
        return passed(f"kernel {kernel}")
    release = versions.parse(kernel)
    if release is None:
        return warned(f"kernel version {kernel!r} not understood", shell("uname -r", "the running kernel's release"))
    # ROCm 7.2 (mid-2026) did not support Linux 7.x kernels (legacy-rocm-build discussion 6225).
    if release.major >= 7:
        return warned(f"kernel {kernel} is newer than ROCm 7.2 supports",
                      note("boot a distribution GA/HWE kernel (Ubuntu 22.04: 5.15 or 6.8; 24.04: 6.8)"),
                      ["https://github.com/ROCm/legacy-rocm-build/discussions/6225"])
    return passed(f"kernel {kernel}")


@check("driver.amdgpu", "amdgpu kernel driver loaded")
def check_amdgpu_driver(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    if ctx.present("/sys/module/amdgpu"):
        version = (ctx.file("/sys/module/amdgpu/version") or "").strip()
        evidence = [f"/sys/module/amdgpu present (amdgpu-dkms {version})" if version
                    else "/sys/module/amdgpu present (in-tree driver)"]
        return passed(f"amdgpu loaded{' (' + version + ')' if version else ''}", evidence)
    report = ctx.rocminfo  # a container may not show /sys/module: rocminfo's "ROCk module is loaded" says it
    if report is not None and report.kfd_module_loaded:
        return passed("amdgpu loaded (rocminfo: ROCk module is loaded)")
    fix = shell("sudo apt install amdgpu-dkms && sudo reboot", "on the host: containers use the host's driver")
    return failed("the amdgpu kernel driver is not loaded", fix, amd_driver_evidence(ctx) + ctx.amd_signs)
