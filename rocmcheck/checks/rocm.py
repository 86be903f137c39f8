"""ROCm install (legacy /opt/rocm and TheRock layouts), HIP, and their versions."""

from __future__ import annotations

from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext
from rocmcheck.fixes import step, torch_install
from rocmcheck.facts.parsers.versions import parse_rocm_version_file, parse_torch_rocm_suffix
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

INSTALL_FIX = step("sudo apt install ./amdgpu-install_*.deb && sudo amdgpu-install --usecase=rocm",
                   "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/ ; or set ROCM_PATH to where it lives")


def rocm_installs(ctx: CheckContext) -> list[tuple[str, str]]:
    """(where, version) for every ROCm found: legacy .info/version, TheRock core dirs, rocm-sdk wheels, hipconfig."""
    found: list[tuple[str, str]] = []
    for root, entry in (ctx.facts.rocm_layout.get("roots") or {}).items():
        if not entry:
            continue
        v = parse_rocm_version_file(entry.get("info_version") or "")
        if v:
            found.append((f"{root}/.info/version", v))
        for core, text in (entry.get("therock_cores") or {}).items():
            v = parse_rocm_version_file(text or "")
            if v:
                found.append((f"{core}/.info/version (TheRock)", v))
    for pkg in ("rocm-sdk-core", "rocm-sdk", "rocm"):
        v = ctx.facts.packages.get(pkg)
        if v:
            found.append((f"pip package {pkg}", v))
            break
    return found


def detected_rocm_version(ctx: CheckContext) -> str | None:
    installs = rocm_installs(ctx)
    if installs:
        return installs[0][1]
    hip = ctx.hipconfig
    if hip and hip.hip_version_short:
        return hip.hip_version_short
    return None


def _mm(version: str | None) -> str | None:
    if not version:
        return None
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


@check("rocm.install", "ROCm installed and its version")
def check_rocm_install(ctx: CheckContext) -> CheckResult:
    if ctx.vendor != "amd":
        return skipped("no AMD GPU stack found")
    installs = rocm_installs(ctx)
    evidence = [f"{where}: {v}" for where, v in installs]
    if ctx.hipconfig and ctx.hipconfig.hip_version:
        evidence.append(f"hipconfig: HIP {ctx.hipconfig.hip_version}")
    if not installs:
        if ctx.torch_is_rocm:
            return warned("no system ROCm found; only torch's bundled ROCm runtime is present",
                          step("sudo amdgpu-install --usecase=rocm", "fine for running wheels; to build flash-attn "
                               "or DeepSpeed ops install the ROCm SDK (or pip install 'rocm[libraries,devel]') and set "
                               "ROCM_PATH"),
                          evidence)
        return failed("ROCm not found (no /opt/rocm/.info/version, no TheRock core, no rocm-sdk)",
                      INSTALL_FIX, evidence + ctx.amd_signs)
    versions = sorted({v for _, v in installs})
    if len({_mm(v) for v in versions}) > 1:
        return warned(f"several ROCm versions installed: {', '.join(versions)}",
                      step(None, "point ROCM_PATH at the one torch was built for; remove or ignore the others"), evidence)
    return passed(f"ROCm {installs[0][1]} ({installs[0][0]})", evidence)


@check("rocm.hip", "HIP (hipconfig) matches torch's HIP")
def check_hip(ctx: CheckContext) -> CheckResult:
    if ctx.vendor != "amd":
        return skipped("no AMD GPU stack found")
    hip = ctx.hipconfig
    res = ctx.facts.command("hipconfig")
    if res is None:
        return warned("hipconfig not found",
                      step('export PATH="${ROCM_PATH:-/opt/rocm}/bin:$PATH"', "or install the HIP SDK (sudo "
                           "amdgpu-install --usecase=rocm); building flash-attn or DeepSpeed ops needs it"))
    if hip is None or not hip.hip_version:
        return warned(f"hipconfig gave no version: {res.describe_failure()}",
                      step("hipconfig --full", "then check the ROCm install"))
    system_hip = hip.hip_version_short or _mm(hip.hip_version)
    torch_hip = _mm((ctx.torch or {}).get("hip"))
    evidence = [f"hipconfig: HIP {hip.hip_version}", f"torch.version.hip: {(ctx.torch or {}).get('hip')}"]
    if not torch_hip:
        return passed(f"HIP {hip.hip_version} (torch is not a ROCm build; compared nothing)", evidence)
    if system_hip != torch_hip:
        return warned(f"system HIP {system_hip} differs from torch's HIP {torch_hip}",
                      torch_install("amd", system_hip, reinstall=True, note=(
                          f"extensions (flash-attn, DeepSpeed ops) compile against the system HIP and must match "
                          f"torch; or install ROCm {torch_hip}")), evidence)
    return passed(f"HIP {system_hip} on the system and in torch", evidence)


def torch_rocm_version(ctx: CheckContext) -> str | None:
    t = ctx.torch or {}
    return parse_torch_rocm_suffix(t.get("version") or "") or _mm(t.get("hip"))
