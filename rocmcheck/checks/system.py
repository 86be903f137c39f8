"""Operating system, kernel and the GPU kernel driver."""

from __future__ import annotations

from dataclasses import replace

from packaging.version import Version

from rocmcheck import versions
from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.rocm import amd_driver_evidence, detected_rocm_version, torch_rocm_version
from rocmcheck.checks.where import driver_install_fix
from rocmcheck.fixes import note, shell
from rocmcheck.knowledge import compat
from rocmcheck.knowledge.compat import ReleaseRow
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

REFERENCE_OS = ("ubuntu", "22.04")
# ROCm 7.2 (mid-2026) did not support Linux 7.x kernels, whatever the distribution.
NEWEST_KERNEL_MAJOR = 6
NEWEST_KERNEL_SOURCE = "https://github.com/ROCm/legacy-rocm-build/discussions/6225"


def supported_os_for(rocm: str | None) -> ReleaseRow:
    """The table row the installed ROCm is judged by; the newest release's when the version is unknown or older
    than the table (rocm_releases.json starts at 6.0.0)."""
    row = compat.release_row(rocm)
    if row is not None:
        return row
    newest = compat.newest_release()
    return replace(compat.release_row(newest), note=f"ROCm {rocm or 'unknown'}: not in the table, judged by the "
                                                     f"newest release ({newest})")


def _row_evidence(row: ReleaseRow, rocm: str | None, what: str) -> list[str]:
    lines = [f"ROCm {rocm or 'unknown'} -> {what} of ROCm {row.release} ({row.source}, read {row.read})"]
    return lines + ([row.note] if row.note else [])


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
    row = supported_os_for(rocm)
    supported = row.os.get(dist, [])
    evidence = _row_evidence(row, rocm, "the supported OS list") + [
        f"{dist}: {', '.join(supported) or 'not listed'}"]
    if any(versions.within(version, listed) for listed in supported):
        if dist == REFERENCE_OS[0] and versions.within(version, REFERENCE_OS[1]):
            return passed(f"{name}: the reference OS for ROCm", evidence)
        return passed(f"{name}: supported by ROCm {row.release}", evidence)
    if dist == "ubuntu" and versions.within(version, "20.04"):
        return failed(f"{name}: ROCm dropped Ubuntu 20.04 after 6.1",
                      note("upgrade to Ubuntu 22.04 (or 24.04), or use a rocm/pytorch Ubuntu 22.04 container"),
                      evidence)
    listed = ", ".join(f"{d} {'/'.join(v)}" for d, v in row.os.items())
    return warned(f"{name} is not on ROCm {row.release}'s supported OS list",
                  note(f"use an OS ROCm {row.release} lists ({listed}) on the host, or run inside a rocm/pytorch "
                       f"Ubuntu container"),
                  evidence)


@check("os.kernel", "Kernel version")
def check_kernel(ctx: CheckContext) -> CheckResult:
    kernel = ctx.platform_info("kernel") or ""
    if ctx.known_vendor() != "amd":
        return passed(f"kernel {kernel}")
    release = versions.parse(kernel)
    if release is None:
        return warned(f"kernel version {kernel!r} not understood", shell("uname -r", "the running kernel's release"))
    if release.major > NEWEST_KERNEL_MAJOR:
        return warned(f"kernel {kernel} is newer than ROCm 7.2 supports",
                      note("boot a distribution GA/HWE kernel (Ubuntu 22.04: 5.15 or 6.8; 24.04: 6.8)"),
                      [NEWEST_KERNEL_SOURCE])
    rocm = detected_rocm_version(ctx)
    table = compat.kernel_list(rocm)
    dist = (ctx.os_field("id") or "").lower()
    os_version = ctx.os_field("version") or ""
    if table is None:
        return passed(f"kernel {kernel} (AMD's matrix for ROCm {versions.series(rocm) or 'unknown'} lists no kernels "
                      f"to compare with)")
    listed = compat.kernels_for(table, dist, os_version)
    evidence = [f"ROCm {rocm} -> kernel list of ROCm {'/'.join(table.series)} ({table.source})"]
    if listed is None:
        return passed(f"kernel {kernel} ({dist} {os_version} has no kernel list for ROCm {versions.series(rocm)})",
                      evidence)
    evidence.append(f"{dist} {os_version}: kernels {', '.join(listed)}")
    running = versions.series(kernel)
    if running in listed:
        return passed(f"kernel {kernel}: a {running} kernel, listed for {dist} {os_version}", evidence)
    return warned(f"kernel {kernel} is not a kernel ROCm {versions.series(rocm)} lists for {dist} {os_version} "
                  f"({', '.join(listed)})",
                  note(f"boot the distribution's {' or '.join(listed)} kernel (GA or HWE) on the host; the amdgpu "
                       f"driver is built and tested against those"),
                  evidence)


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
    in_container = (known_or_none(lambda: ctx.in_container) or (False, []))[0]
    # A container's os-release is its image's, not the host's: the host's package is named in words.
    fix = note("on the host: install and load amdgpu (AMD's amdgpu-dkms for the host's distribution, "
               "https://rocm.docs.amd.com/projects/install-on-linux/); containers use the host's driver") \
        if in_container else driver_install_fix(ctx)
    return failed("the amdgpu kernel driver is not loaded", fix, amd_driver_evidence(ctx) + ctx.amd_signs)


def _same_release(found: str, expected: str) -> bool:
    """"6.12.12" is "6.12.12" and "6.12.12.0"; text that holds no version only equals itself."""
    a, b = versions.parse(found), versions.parse(expected)
    return a == b if a is not None and b is not None else found.strip() == expected.strip()


@check("driver.window", "amdgpu driver inside the ROCm user space's supported window (and the site's driver)")
def check_driver_window(ctx: CheckContext) -> CheckResult:
    """The loaded amdgpu driver against the window AMD's matrix gives the installed ROCm user space and the one torch
    bundles ("ROCm 6.4: drivers 6.4, 6.3, 6.2, 6.1"): outside it, kernels can fail to load or queues hang."""
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    module = (ctx.file("/sys/module/amdgpu/version") or "").strip()
    site = ctx.site_rules.amdgpu_modules if ctx.site_rules is not None else None
    if site is not None and not any(_same_release(module, v) for v in site.values):
        return warned(f"amdgpu {module or '(in-tree driver, no module version)'} is not the driver the site expects "
                      f"({', '.join(site.values)}, {site.cite()})",
                      note(f"on the host, install the amdgpu driver the site qualified ({', '.join(site.values)}), "
                           f"or drain this node; the site's rule: {site.file}"),
                      [f"/sys/module/amdgpu/version: {module or 'absent'}", f"expected: {', '.join(site.values)} "
                       f"({site.cite()})"])
    site_line = [f"amdgpu {module}: the site's expected driver ({site.cite()})"] if site is not None else []
    if not module:
        return skipped("no amdgpu module version (/sys/module/amdgpu/version): an in-tree driver, or none loaded")
    driver = compat.driver_of_module(module)
    if driver is None:
        return passed(f"amdgpu {module}: not in the table of AMD driver releases (rocm_releases.json), window not "
                      f"judged" + ("; the site's expected driver" if site is not None else ""), site_line)
    userspaces = [("the system ROCm", detected_rocm_version(ctx)), ("torch's ROCm", torch_rocm_version(ctx))]
    evidence = site_line + [f"amdgpu {module} = AMD driver {driver.driver_release} (shipped with ROCm "
                            f"{driver.rocm_release}; {driver.source})"]
    outside = []
    for what, rocm in userspaces:
        row = compat.release_row(rocm) if rocm else None
        if row is None or not row.drivers:
            continue
        if row.drivers_known_up_to and Version(driver.rocm_release) > Version(row.drivers_known_up_to):
            evidence.append(f"{what} {rocm}: AMD's matrix lists the drivers for ROCm {row.release} only up to ROCm "
                            f"{row.drivers_known_up_to}'s, not judged against this newer driver")
            continue
        evidence.append(f"{what} {rocm} -> ROCm {row.release} supports drivers {', '.join(row.drivers)} "
                        f"({row.source})")
        if driver.driver_release not in row.drivers:
            outside.append((what, rocm, row))
    if not outside:
        judged = [w for w, r in userspaces if any(line.startswith(f"{w} {r} ->") for line in evidence)]
        if not judged:
            return passed(f"amdgpu {module} (AMD driver {driver.driver_release}); no ROCm release to judge it by",
                          evidence)
        return passed(f"amdgpu {module} (AMD driver {driver.driver_release}) is inside the window of "
                      f"{' and '.join(judged)}", evidence)
    what, rocm, row = outside[0]
    return warned(f"amdgpu {module} (AMD driver {driver.driver_release}) is outside {what} {rocm}'s supported "
                  f"drivers ({', '.join(row.drivers)})",
                  note(f"on the host, install the amdgpu driver of a release ROCm {row.release} supports "
                       f"({', '.join(row.drivers)}: amdgpu-install from repo.radeon.com/amdgpu/<release>), or use a "
                       f"ROCm user space (and torch wheel) inside AMD driver {driver.driver_release}'s window"),
                  evidence)
