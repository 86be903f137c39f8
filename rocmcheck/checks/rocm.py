"""ROCm install (legacy /opt/rocm, TheRock, and a distribution's /usr), HIP, and their versions."""

from __future__ import annotations

from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none, tool_failure
from rocmcheck.facts.parsers.smi import smi_driver_error
from rocmcheck.facts.parsers.versions import parse_torch_rocm_suffix
from rocmcheck.facts.rocm_location import rocm_installs as all_rocm_installs
from rocmcheck.fixes import note, shell, torch_install
from rocmcheck.knowledge import compat
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.versions import series

INSTALL_FIX = shell("sudo apt install ./amdgpu-install_*.deb && sudo amdgpu-install --usecase=rocm",
                    "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/ ; or set ROCM_PATH to where it "
                    "lives")
# hipconfig is not on PATH: ROCm's installers put it in ROCM_PATH/bin (default /opt/rocm/bin) without touching PATH.
HIPCONFIG_PATH_FIX = shell('export PATH="${{ROCM_PATH:-/opt/rocm}}/bin:$PATH"',
                           "or install the HIP SDK (sudo amdgpu-install --usecase=rocm); building flash-attn or "
                           "DeepSpeed ops needs it")


def rocm_installs(ctx: CheckContext) -> list[tuple[str, str]]:
    """(where, version) for every ROCm found: the rocm_location rule's installs, then the rocm-sdk wheels."""
    hip = ctx.hipconfig
    found = [(loc.version_source or loc.root, loc.version)
             for loc in all_rocm_installs(ctx.rocm_layout(), hip.hip_version if hip else None) if loc.version]
    for pkg in ("rocm-sdk-core", "rocm-sdk", "rocm"):
        v = ctx.package(pkg)
        if v:
            found.append((f"pip package {pkg}", v))
            break
    return found


def detected_rocm_version(ctx: CheckContext) -> str | None:
    """The release of the ROCm a build here would use; else of any install; else hipconfig's HIP."""
    if ctx.rocm is not None and ctx.rocm.version:
        return ctx.rocm.version
    installs = rocm_installs(ctx)
    if installs:
        return installs[0][1]
    hip = ctx.hipconfig
    if hip and hip.hip_version_short:
        return hip.hip_version_short
    return None


def amd_driver_evidence(ctx: CheckContext) -> list[str]:
    """What the ROCm tools said about a missing amdgpu driver, one line per tool, colour codes stripped.

    rocminfo: "ROCk module is NOT loaded, possibly no GPU devices"; rocm-smi: "Driver not initialized
    (amdgpu not found in modules)"; amd-smi: "Drivers not loaded (amdgpu, ... not found in modules)";
    the amdsmi binding: its init error. Empty when no tool blamed the driver.
    """
    lines: list[str] = []  # evidence only: a tool whose output is not known adds nothing
    report = known_or_none(lambda: ctx.rocminfo)
    if report is not None and report.error_kind == "driver_not_loaded" and report.error:
        lines.append(f"rocminfo: {report.error}")
    for key, tool in (("rocm-smi", "rocm-smi"), ("rocm-smi-json", "rocm-smi"), ("amd-smi-version", "amd-smi"),
                      ("amd-smi-static", "amd-smi")):
        res = known_or_none(lambda key=key: ctx.command(key))
        error = smi_driver_error(res.stdout + "\n" + res.stderr) if res is not None else None
        if error and not any(l.startswith(f"{tool}: ") for l in lines):
            lines.append(f"{tool}: {error}")
    binding = known_or_none(lambda: ctx.probe("amdsmi")) or {}
    if binding.get("driver_not_loaded") and binding.get("error"):
        lines.append(f"amdsmi (Python): {binding['error']}")
    return lines


@check("rocm.install", "ROCm installed and its version")
def check_rocm_install(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    installs = rocm_installs(ctx)
    location = ctx.rocm
    evidence = [f"{where}: {v}" for where, v in installs]
    if location is not None:
        evidence.insert(0, f"ROCm root: {location.describe()}")
    if ctx.hipconfig and ctx.hipconfig.hip_version:
        evidence.append(f"hipconfig: HIP {ctx.hipconfig.hip_version}")
    # The userspace can be complete while the kernel driver is missing: that is driver.amdgpu's verdict.
    driver = amd_driver_evidence(ctx)
    evidence += [f"driver not loaded ({line}): see driver.amdgpu" for line in driver]
    if location is None and not installs:
        if ctx.torch_is_rocm:
            return warned("no system ROCm found; only torch's bundled ROCm runtime is present",
                          shell("sudo amdgpu-install --usecase=rocm", "fine for running wheels; to build "
                                "flash-attn or DeepSpeed ops install the ROCm SDK (or pip install "
                                "'rocm[libraries,devel]') and set ROCM_PATH"),
                          evidence)
        return failed("ROCm not found (no ROCM_PATH, no /opt/rocm/.info/version, no TheRock core, no HIP in /usr, "
                      "no rocm-sdk)", INSTALL_FIX, evidence + ctx.amd_signs)
    versions = sorted({v for _, v in installs})
    if len({series(v) for v in versions}) > 1:
        return warned(f"several ROCm versions installed: {', '.join(versions)}",
                      note("point ROCM_PATH at the one torch was built for; remove or ignore the others"), evidence)
    if location is None:  # only a rocm-sdk wheel
        return passed(f"ROCm {installs[0][1]} ({installs[0][0]})", evidence)
    where = f"{location.root}, {location.layout} layout"
    if location.version:
        return passed(f"ROCm {location.version} ({where})", evidence)
    return warned(f"ROCm found in {location.root} ({location.layout} layout) but its version is unknown",
                  shell("hipconfig --version; cat {version_file}",
                        "either should name the release; reinstall ROCm (amdgpu-install --usecase=rocm) if neither "
                        "does",
                        version_file=f"{location.root}/.info/version"),
                  evidence)


@check("rocm.hip", "HIP (hipconfig) matches torch's HIP")
def check_hip(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    hip = ctx.hipconfig
    res = ctx.command("hipconfig")
    if res is None:
        return warned("hipconfig not found", HIPCONFIG_PATH_FIX)
    if hip is None or not hip.hip_version:
        return warned(f"hipconfig gave no version: {tool_failure(res)}",
                      shell("hipconfig --full", "then check the ROCm install"))
    system_hip = hip.hip_version_short or series(hip.hip_version)
    torch_hip = series((ctx.torch or {}).get("hip"))
    evidence = [f"hipconfig: HIP {hip.hip_version}", f"torch.version.hip: {(ctx.torch or {}).get('hip')}"]
    if not torch_hip:
        return passed(f"HIP {hip.hip_version} (torch is not a ROCm build; compared nothing)", evidence)
    if system_hip != torch_hip:
        return warned(f"system HIP {system_hip} differs from torch's HIP {torch_hip}",
                      torch_install("amd", system_hip, reinstall=True, why=(
                          f"extensions (flash-attn, DeepSpeed ops) compile against the system HIP and must match "
                          f"torch; or install ROCm {torch_hip}")), evidence)
    return passed(f"HIP {system_hip} on the system and in torch", evidence)


def torch_rocm_version(ctx: CheckContext) -> str | None:
    t = ctx.torch or {}
    return parse_torch_rocm_suffix(t.get("version") or "") or series(t.get("hip"))


@check("rocm.release_support", "the GPUs and torch on the installed ROCm release's supported lists")
def check_release_support(ctx: CheckContext) -> CheckResult:
    """Each GPU arch against the targets AMD's matrix lists for the system ROCm and for torch's bundled ROCm (a
    gfx950 under ROCm 6.4 is not supported); the torch version against the PyTorch versions AMD lists (evidence)."""
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    archs = sorted({g.arch for g in ctx.amd_gpus if g.arch})
    if not archs:
        return skipped("no AMD GPU arch to judge")
    torch_version = (ctx.torch or {}).get("version")
    evidence, missing = [], []
    for what, rocm in (("the system ROCm", detected_rocm_version(ctx)), ("torch's ROCm", torch_rocm_version(ctx))):
        row = compat.release_row(rocm) if rocm else None
        if row is None:
            continue
        evidence.append(f"{what} {rocm} -> ROCm {row.release}: targets {', '.join(row.gpu_targets)}; PyTorch "
                        f"{', '.join(row.pytorch) or 'none listed'} ({row.source})" + (f"; {row.note}" if row.note
                                                                                        else ""))
        if what == "torch's ROCm" and torch_version and row.pytorch:
            listed = any(series(torch_version) == series(p) for p in row.pytorch)
            evidence.append(f"torch {torch_version}: {'among' if listed else 'not among'} the PyTorch versions AMD "
                            f"lists for ROCm {row.release}")
        missing += [(what, rocm, row, a) for a in archs if a not in row.gpu_targets]
    if not evidence:
        return skipped("no ROCm release in AMD's matrix to judge by (rocm_releases.json starts at 6.0.0)")
    if missing:
        what, rocm, row, arch = missing[0]
        first = compat.first_release_with_target(arch)
        since = f"ROCm {first} or newer lists it" if first else "no ROCm release in the table lists it"
        return warned(f"{arch} is not among the GPU targets AMD supports with {what} {rocm} (ROCm {row.release}'s "
                      f"list); {since}",
                      note(f"install a ROCm (and a torch wheel built for it) that lists {arch}: {since}"
                           if first else f"{arch} is outside AMD's supported targets: expect unsupported kernels"),
                      evidence)
    return passed(f"{', '.join(archs)} supported by the ROCm release(s) in use", evidence)


@check("rocm.site_versions", "the ROCm and torch versions inside the site's ranges")
def check_site_versions(ctx: CheckContext) -> CheckResult:
    """The installed ROCm user space and torch against the ranges a site sets (--knowledge: `rocm`, `torch`, each a
    packaging specifier such as "~=6.4.1")."""
    from packaging.specifiers import SpecifierSet

    from rocmcheck import versions

    rules = ctx.site_rules
    wanted = [(what, rule) for what, rule in (("ROCm", rules and rules.rocm), ("torch", rules and rules.torch)) if rule]
    if not wanted:
        return skipped("no version ranges: no site rules given (--knowledge)")
    found = {"ROCm": detected_rocm_version(ctx) if ctx.known_vendor() == "amd" else None,
             "torch": (ctx.torch or {}).get("version") if any(w == "torch" for w, _ in wanted) else None}
    evidence, outside = [], []
    for what, rule in wanted:
        version = found[what]
        if versions.parse(version) is None:
            evidence.append(f"{what}: not found, not judged (the site wants {rule.values[0]}, {rule.cite()})")
            continue
        inside = SpecifierSet(rule.values[0]).contains(str(versions.parse(version)), prereleases=True)
        evidence.append(f"{what} {version}: {'inside' if inside else 'outside'} {rule.values[0]} ({rule.cite()})")
        if not inside:
            outside.append((what, version, rule))
    if outside:
        return warned("; ".join(f"{w} {v} is outside the site's range {r.values[0]}" for w, v, r in outside),
                      note("install the versions the site qualified (" + "; ".join(
                          f"{w} {r.values[0]}, {r.file}" for w, _, r in outside) + "), or use its container image"),
                      evidence)
    judged = [line.split(":")[0] for line in evidence if "inside" in line]
    if not judged:
        return skipped("no version to judge against the site's ranges", evidence)
    return passed(f"{' and '.join(judged)} inside the site's ranges", evidence)
