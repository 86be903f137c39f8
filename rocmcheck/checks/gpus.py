"""The GPUs themselves: rocminfo health, agents and archs, the expected arch, partition modes."""

from __future__ import annotations

import signal

from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, GpuView, installed_but_cannot_start, tool_failure
from rocmcheck.facts.parsers._text import clean_lines
from rocmcheck.fixes import BUG_FIX, GROUPS_FIX, docker_run, note, shell, unset, with_why
from rocmcheck.knowledge import arch_info
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.units import GIB

# rocminfo failures people hit (the texts rocminfo prints, read by parsers/rocminfo.py), and what fixes each.
ROCMINFO_ERROR_FIXES = {
    "kfd_permission": with_why(GROUPS_FIX, "then log in again; in a container: --group-add video --group-add render"),
    "kfd_invalid_argument": docker_run("the container's /dev/kfd is not usable (device cgroup or a mismatched driver); "
                                       "on the host check: sudo dmesg | grep -i amdgpu"),
    "kfd_missing": docker_run("in a container; on the host: sudo modprobe amdgpu"),
    "kfd_no_memory": shell("sudo dmesg | grep -i kfd", "the driver could not allocate for this process: close other "
                           "GPU processes or reboot, https://github.com/ROCm/rocminfo/issues/41"),
    "hsa_error": shell("unset HSA_OVERRIDE_GFX_VERSION; ulimit -a", "the HSA runtime failed to start: check threads "
                       "and memlock limits and that the ROCm user space matches the host driver"),
    "driver_not_loaded": shell("sudo modprobe amdgpu", "on the host; install amdgpu-dkms if it is missing"),
}


def describe_gpu(g: GpuView) -> str:
    mem = f", {g.memory_bytes / GIB:.0f} GiB" if g.memory_bytes else ""
    cus = g.extra.get("compute_units")
    cu = f", {cus} CUs" if cus else ""
    product = f" = {g.product.name}" if g.product else ""
    return f"GPU {g.index}: {g.arch or '?'} {g.name or ''}{product}{cu}{mem}".replace("  ", " ")


@check("gpu.rocminfo", "rocminfo runs and lists the GPUs")
def check_rocminfo(ctx: CheckContext) -> CheckResult:
    res = ctx.facts.command("rocminfo")
    if res is None:
        if ctx.vendor == "amd":
            return failed("rocminfo not found",
                          shell("sudo apt install rocminfo", "part of ROCm, or add /opt/rocm/bin to PATH; DeepSpeed's "
                                "op builder also reads rocminfo for the arch and wavefront size"), ctx.amd_signs)
        return skipped("rocminfo not installed (no AMD GPU stack)")
    report = ctx.rocminfo
    if res.timed_out:
        return failed(f"rocminfo hung: {tool_failure(res)}",
                      shell("sudo dmesg | grep -i amdgpu", "a hung rocminfo usually means a wedged GPU or driver: "
                            "then reset the GPU (sudo amd-smi reset -G -g N) or reboot"))
    if res.returncode is not None and res.returncode < 0:  # killed by a signal: what it printed is cut off
        sig = -res.returncode
        try:
            name = f" {signal.Signals(sig).name}"
        except ValueError:
            name = ""
        return failed(f"rocminfo crashed (signal {sig}{name})",
                      shell("rocminfo; sudo dmesg | grep -i -e amdgpu -e kfd -e segfault",
                            "a crashing rocminfo is a broken ROCm install (mixed versions of libhsa-runtime64) or a "
                            "driver fault: the kernel log says which"),
                      [l for l in clean_lines(res.stderr + res.stdout) if l.strip()][:5])
    if report is not None and report.error:
        fix = ROCMINFO_ERROR_FIXES.get(report.error_kind or "",
                                       shell("sudo dmesg | grep -i -e amdgpu -e kfd", "check the driver"))
        return failed(f"rocminfo failed: {report.error}", fix,
                      [l for l in clean_lines(res.stdout + res.stderr) if l.strip()][:5])
    if not res.ok:
        if installed_but_cannot_start(res):  # a broken install, not a missing one
            return failed(tool_failure(res),
                          shell("head -n 1 {tool}", "a script's first line (#!) names its interpreter, which must "
                                "exist; else reinstall the ROCm package that ships it", tool=res.argv[0]))
        return failed(tool_failure(res),
                      shell("rocminfo; sudo dmesg | grep -i amdgpu", "rocminfo's own error, then the driver's"),
                      [l for l in clean_lines(res.stderr or res.stdout) if l.strip()][-3:])
    if report is None or not report.agents:
        return failed("rocminfo printed nothing rocmcheck understands",
                      with_why(BUG_FIX, "and report it with that file: rocmcheck should understand rocminfo"),
                      [l for l in clean_lines(res.stdout) if l.strip()][:3])
    return passed(f"rocminfo lists {len(report.agents)} agents ({len(report.gpus)} GPU)",
                  [f"HSA runtime {report.runtime_version}"] if report.runtime_version else [])


@check("gpu.present", "a GPU is present")
def check_gpu_present(ctx: CheckContext) -> CheckResult:
    gpus = ctx.gpus
    if gpus:
        return passed(f"{len(gpus)} {ctx.vendor.upper()} GPU(s) found", [describe_gpu(g) for g in gpus])
    if ctx.vendor == "none":
        return failed("no GPU found: no /dev/kfd, no rocminfo, no nvidia-smi — a CPU-only machine; the checks below "
                      "judge only what needs no GPU",
                      docker_run("inside a container: pass the devices (NVIDIA: --gpus all); else run on a machine "
                                 "with an AMD Instinct (or NVIDIA) GPU"))
    return failed(f"no {ctx.vendor.upper()} GPU visible although the stack is there",
                  note("the devices.* and gpu.rocminfo verdicts above say why the GPUs are not visible"),
                  ctx.amd_signs if ctx.vendor == "amd" else ctx.nvidia_signs)


@check("gpu.arch", "GPU architectures known and supported")
def check_gpu_arch(ctx: CheckContext) -> CheckResult:
    gpus = ctx.amd_gpus or ctx.nvidia_gpus
    if not gpus:
        return skipped("no GPU to judge")
    evidence = [describe_gpu(g) for g in gpus]
    unknown = sorted({g.arch or "?" for g in gpus if g.arch_entry is None})
    removed = sorted({g.arch for g in gpus if g.arch_entry and g.arch_entry.status in ("removed", "deprecated")})
    archs = sorted({g.arch or "?" for g in gpus})
    if removed:
        notes = "; ".join(f"{a}: {arch_info(a).note}" for a in removed if arch_info(a) and arch_info(a).note)
        return failed(f"{', '.join(removed)} is no longer supported by current ROCm",
                      note(f"use a GPU current ROCm supports (gfx942 MI300X for fine-tuning); {notes}"), evidence)
    if unknown:
        return warned(f"arch {', '.join(unknown)} is not in rocmcheck's table",
                      unset("HSA_OVERRIDE_GFX_VERSION", why="if it was set, then re-run; else check the arch against "
                            "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"), evidence)
    mixed = " (mixed architectures: kernels must be built for each)" if len(archs) > 1 else ""
    return passed(f"{', '.join(archs)}{mixed}", evidence,
                  archs=archs, products=sorted({g.product.name for g in gpus if g.product}))


@check("gpu.expected_arch", "GPUs match --arch")
def check_expected_arch(ctx: CheckContext) -> CheckResult:
    if not ctx.expected_archs:
        return skipped("no --arch given (pass --arch gfx942 to assert what you expect)")
    gpus = ctx.gpus
    expected = set(ctx.expected_archs)
    if not gpus:
        return failed(f"expected {', '.join(sorted(expected))} but no GPU was found",
                      note("see gpu.present above"))
    wrong = [g for g in gpus if g.arch not in expected]
    evidence = [describe_gpu(g) for g in gpus]
    if wrong:
        found = ", ".join(sorted({g.arch or "?" for g in wrong}))
        return failed(f"expected {', '.join(sorted(expected))}, found {found}",
                      shell("rocminfo | grep gfx", "a different machine (or partition) than you think, or "
                           "HSA_OVERRIDE_GFX_VERSION changes the reported arch: unset it"), evidence)
    return passed(f"all {len(gpus)} GPU(s) are {', '.join(sorted(expected))}", evidence)


@check("gpu.partition", "MI300 compute partition mode")
def check_partition(ctx: CheckContext) -> CheckResult:
    mi300 = [g for g in ctx.amd_gpus if g.arch == "gfx942"]
    if not mi300:
        return skipped("no MI300-class GPU")
    modes = {g.extra.get("partition") for g in mi300 if g.extra.get("partition")}
    # A whole MI300X has 304 CUs; CPX shows 38 per partition, QPX 76, DPX 152 (ROCm MI300 docs).
    cus = {g.extra.get("compute_units") for g in mi300 if g.extra.get("compute_units")}
    partitioned = (modes and modes != {"SPX"}) or any(c and c < 228 for c in cus)
    evidence = [f"partition mode(s): {', '.join(sorted(m for m in modes if m)) or 'not reported'}",
                f"compute units per GPU agent: {', '.join(str(c) for c in sorted(c for c in cus if c)) or '?'}"]
    if partitioned:
        return warned(f"partitioned: {len(mi300)} GPU agents, each a fraction of an MI300 (memory and CUs split)",
                      shell("sudo amd-smi set --compute-partition SPX && sudo amd-smi set --memory-partition NPS1",
                            "whole GPUs for fine-tuning; then reload the driver"), evidence)
    return passed("whole GPUs (SPX)", evidence)
