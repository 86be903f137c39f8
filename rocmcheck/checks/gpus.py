"""The GPUs themselves: rocminfo health, agents and archs, the expected arch, partition modes."""

from __future__ import annotations

import signal

from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, GpuView, installed_but_cannot_start, known_or_none, tool_failure
from rocmcheck.checks.where import device_access_fix, kubernetes_signs, slurm_job_without_gpus
from rocmcheck.facts.known import NotKnown
from rocmcheck.facts.parsers._text import clean_lines
from rocmcheck.facts.parsers.host_tools import parse_amd_smi_firmware
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
    # ROCr disables every GPU whose kernel driver is older than the userspace (ROCm/ROCm#1583, #1536).
    "incompatible_kernel_userspace": shell(
        "sudo amdgpu-install --usecase=dkms", "the amdgpu kernel driver is older than this ROCm's userspace: install "
        "the amdgpu-dkms of this ROCm release, then reboot; or install the ROCm release that matches the driver "
        "`dkms status` shows; in a container, the host's driver is the one that counts"),
}


def describe_gpu(g: GpuView) -> str:
    mem = f", {g.memory_bytes / GIB:.0f} GiB" if g.memory_bytes else ""
    cus = g.extra.get("compute_units")
    cu = f", {cus} CUs" if cus else ""
    product = f" = {g.product.name}" if g.product else ""
    return f"GPU {g.index}: {g.arch or '(arch not known)'} {g.name or ''}{product}{cu}{mem}".replace("  ", " ")


@check("gpu.rocminfo", "rocminfo runs and lists the GPUs")
def check_rocminfo(ctx: CheckContext) -> CheckResult:
    res = ctx.command("rocminfo")
    if res is None:
        if ctx.known_vendor() == "amd":
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
        if report.error_kind in ("kfd_missing", "kfd_invalid_argument") and (
                kubernetes_signs(ctx) or slurm_job_without_gpus(ctx)):
            fix = device_access_fix(ctx)  # a pod's GPU resource or a job's gres, not a docker restart
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
    vendor = ctx.known_vendor()
    ctx.vendor_gpus()  # NotKnown when this vendor's GPU list is not known: then their absence is not shown
    if vendor == "none" and (kubernetes_signs(ctx) or slurm_job_without_gpus(ctx)):
        return failed("no GPU found: no /dev/kfd, no rocminfo, no nvidia-smi reached this "
                      + ("Kubernetes pod" if kubernetes_signs(ctx) else "Slurm job"), device_access_fix(ctx))
    if vendor == "none":
        return failed("no GPU found: no /dev/kfd, no rocminfo, no nvidia-smi — a CPU-only machine; the other checks "
                      "judge only what needs no GPU",
                      docker_run("inside a container: pass the devices (NVIDIA: --gpus all); else run on a machine "
                                 "with an AMD Instinct (or NVIDIA) GPU"))
    report = known_or_none(lambda: ctx.rocminfo) if vendor == "amd" else None
    if report is not None and report.error:  # rocminfo names why: say it here too
        return failed(f"no AMD GPU visible: rocminfo says {report.error}",
                      note("gpu.rocminfo above gives the fix for this error"), ctx.amd_signs)
    return failed(f"no {vendor.upper()} GPU visible although the stack is there",
                  note("the devices.* and gpu.rocminfo verdicts above say why the GPUs are not visible"),
                  ctx.amd_signs if vendor == "amd" else ctx.nvidia_signs)


# bf16 on NVIDIA needs Ampere (compute capability 8.0) or newer; before it torch emulates bf16 (far slower) or refuses
# it, flash-attn 2 does not build for it, and transformers refuses bf16=True when torch says it is not supported:
# "Your setup doesn't support bf16/gpu. ... You need Ampere+ GPU with cuda>=11.0" (transformers/training_args.py).
NO_BF16_FIX = note("fine-tune in fp16 with loss scaling (HF Trainer: --fp16; torch: autocast(dtype=torch.float16) with "
                   "GradScaler) or use a GPU of compute capability 8.0 or newer (A100, A10, L4, L40S, H100)")


@check("gpu.arch", "GPU architectures known and supported")
def check_gpu_arch(ctx: CheckContext) -> CheckResult:
    gpus = known_or_none(lambda: ctx.amd_gpus) or known_or_none(lambda: ctx.nvidia_gpus)
    if not gpus:
        ctx.every_gpu()  # NotKnown when either vendor's GPUs are not known
        return skipped("no GPU to judge")
    nameless = [g for g in gpus if not g.arch]
    if nameless:
        g = nameless[0]
        raise NotKnown(f"the arch of GPU {g.index} ({g.name or 'no name either'}): {g.source} gave no compute "
                       "capability and rocmcheck's table does not know the product")
    evidence = [describe_gpu(g) for g in gpus]
    unknown = sorted({g.arch for g in gpus if g.arch_entry is None})
    removed = sorted({g.arch for g in gpus if g.arch_entry and g.arch_entry.status in ("removed", "deprecated")})
    no_bf16 = sorted({g.arch for g in gpus if g.arch_entry and not g.arch_entry.bf16 and g.arch not in removed})
    archs = sorted({g.arch for g in gpus})
    vendor = gpus[0].vendor
    if removed:
        notes = "; ".join(f"{a}: {arch_info(a).note}" for a in removed if arch_info(a) and arch_info(a).note)
        stack = "current ROCm" if vendor == "amd" else "current CUDA and PyTorch"
        advice = "gfx942 MI300X" if vendor == "amd" else "compute capability 8.0 or newer"
        return failed(f"{', '.join(removed)} is no longer supported by {stack}",
                      note(f"use a GPU {stack} supports ({advice} for fine-tuning); {notes}"), evidence)
    if no_bf16:
        names = ", ".join(sorted({f"{g.arch} ({g.product.name if g.product else g.name})" for g in gpus
                                  if g.arch in no_bf16}))
        return failed(f"{names} cannot run bf16: bf16 needs compute capability 8.0 (Ampere) or newer; a bf16 "
                      "fine-tune is emulated or refused here ('Your setup doesn't support bf16/gpu')",
                      NO_BF16_FIX, evidence, archs=archs, bf16=False)
    if unknown:
        if vendor == "nvidia":
            fix = note("check the compute capability against https://developer.nvidia.com/cuda-gpus and that torch's "
                       "arch list covers it (torch.arch_list)")
        else:
            fix = unset("HSA_OVERRIDE_GFX_VERSION", why="if it was set, then re-run; else check the arch against "
                        "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html")
        return warned(f"arch {', '.join(unknown)} is not in rocmcheck's table", fix, evidence)
    mixed = " (mixed architectures: kernels must be built for each)" if len(archs) > 1 else ""
    return passed(f"{', '.join(archs)}{mixed}", evidence,
                  archs=archs, products=sorted({g.product.name for g in gpus if g.product}))


@check("gpu.expected_arch", "GPUs match --arch")
def check_expected_arch(ctx: CheckContext) -> CheckResult:
    if not ctx.expected_archs:
        return skipped("no --arch given (pass --arch gfx942 to assert what you expect)")
    gpus = ctx.gpus
    expected = set(ctx.expected_archs)
    if not gpus and not ctx.every_gpu():
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


# The GPUs that partition: MI300 series (gfx942) and MI350 series (gfx950), compute SPX/DPX/QPX/CPX and memory NPS1/
# NPS2/NPS4 (AMD Instinct partitioning docs). A partition is its own GPU agent with a fraction of the compute units.
PARTITIONING_ARCHS = ("gfx942", "gfx950")


def _whole_compute_units(g: GpuView) -> int | None:
    """The compute units of the whole GPU: its product's, or the arch's when every product of the arch has the same
    count; None when the product is not known and the arch's products differ (an MI300A has 228, an MI300X 304: one
    product's count says nothing about another's)."""
    if g.product and g.product.compute_units:
        return g.product.compute_units
    counts = {p.compute_units for p in (g.arch_entry.products if g.arch_entry else ()) if p.compute_units}
    return counts.pop() if len(counts) == 1 else None


def _most_compute_units(g: GpuView) -> int | None:
    """The most compute units any product of the GPU's arch has: an agent with that many is a whole GPU whichever
    product it is (a partition has fewer than its whole GPU)."""
    counts = [p.compute_units for p in (g.arch_entry.products if g.arch_entry else ()) if p.compute_units]
    return max(counts) if counts else None


def _shows_whole(g: GpuView) -> bool:
    """The output shows this GPU agent is a whole GPU: its compute units are its whole GPU's count."""
    cus = g.extra.get("compute_units")
    whole = _whole_compute_units(g) or _most_compute_units(g)
    return bool(cus and whole and cus >= whole)


@check("gpu.partition", "MI300 / MI350 compute and memory partition mode")
def check_partition(ctx: CheckContext) -> CheckResult:
    parts = [g for g in ctx.amd_gpus if g.arch in PARTITIONING_ARCHS]
    if not parts:
        return skipped("no MI300- or MI350-class GPU")
    modes = {g.extra.get("partition") for g in parts if g.extra.get("partition")}
    memory = {g.extra.get("memory_partition") for g in parts if g.extra.get("memory_partition")}
    cus = {g.extra.get("compute_units") for g in parts if g.extra.get("compute_units")}
    split = [g for g in parts if g.extra.get("compute_units") and _whole_compute_units(g)
             and g.extra["compute_units"] < _whole_compute_units(g)]
    partitioned = (modes and modes != {"SPX"}) or (memory and memory != {"NPS1"}) or bool(split)
    whole = sorted({w for g in parts if (w := _whole_compute_units(g))})
    evidence = [f"compute partition: {', '.join(sorted(modes)) or 'not reported'}; "
                f"memory partition: {', '.join(sorted(memory)) or 'not reported'}",
                f"compute units per GPU agent: {', '.join(str(c) for c in sorted(cus)) or 'not reported'}"
                + (f" (a whole GPU has {', '.join(map(str, whole))})" if whole else "")]
    family = " / ".join(sorted({g.product.name if g.product else g.arch or "" for g in parts}))
    if partitioned:
        return warned(f"partitioned: {len(parts)} GPU agents, each a fraction of an {family} (memory and CUs split)",
                      shell("sudo amd-smi set --compute-partition SPX && sudo amd-smi set --memory-partition NPS1",
                            "whole GPUs for fine-tuning; then reload the driver"), evidence)
    # Whole only where the output shows it, for every agent: the compute partition printed as SPX, or the agent's
    # compute units equal to its whole GPU's. Output that shows neither says nothing about partitions.
    unshown = [g for g in parts if g.extra.get("partition") != "SPX" and not _shows_whole(g)]
    if unshown:
        g = unshown[0]
        why = "not shown" if not g.extra.get("compute_units") else "fewer than some product of its arch has"
        raise NotKnown(f"the partition mode of GPU {g.index} (no partition column; its compute units {why})")
    return passed("whole GPUs (SPX)", evidence)


# The PLDM bundle is the firmware set AMD releases (and platform vendors flash) for an Instinct baseboard; every GPU of
# a node runs the same one after a complete update, so two bundles on one node are an update that stopped half way
# (AMD's node-scraper and cvs compare each GPU's firmware with the expected versions).
PLDM_BUNDLE = "PLDM_BUNDLE"
_FIRMWARE_FIX = ("update the GPU firmware (the PLDM bundle) with the platform vendor's BMC or firmware tool, then "
                 "power-cycle the node; until then drain it")


@check("gpu.firmware", "GPU firmware (PLDM bundle) versions, against the site's expected ones")
def check_firmware(ctx: CheckContext) -> CheckResult:
    """amd-smi firmware's versions per GPU: a node mixing PLDM bundles warns; with site rules (--knowledge), every
    expected firmware is compared on every GPU. Without expectations the versions are shown, not judged."""
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    res = ctx.command("amd-smi-firmware")
    if res is None:
        return skipped("amd-smi is not installed: firmware versions not read")
    if not res.ok:
        return skipped(f"amd-smi firmware: {res.describe_failure()}")
    per_gpu = parse_amd_smi_firmware(res.stdout)
    if not per_gpu:
        return skipped("amd-smi firmware listed no firmware versions")
    by_id: dict[str, dict[str, list[int]]] = {}
    for gpu, firmware in sorted(per_gpu.items()):
        for fw_id, version in firmware.items():
            by_id.setdefault(fw_id, {}).setdefault(version, []).append(gpu)
    evidence = [f"{fw_id}: " + "; ".join(f"{v} on GPU {', '.join(map(str, g))}" for v, g in seen.items())
                for fw_id, seen in by_id.items()]
    expected = ctx.site_rules.firmware if ctx.site_rules is not None else {}
    wrong, unread = [], []
    for fw_id, rule in expected.items():
        seen = by_id.get(fw_id)
        if not seen:
            unread.append(fw_id)
            continue
        accepted = {v.lower() for v in rule.values}
        off = [f"GPU {', '.join(map(str, g))}: {v}" for v, g in seen.items() if v.lower() not in accepted]
        if off:
            wrong.append(f"{fw_id} {'; '.join(off)}, the site expects {' or '.join(rule.values)} ({rule.cite()})")
    if unread:
        evidence.append(f"not judged (amd-smi shows no version): {', '.join(unread)}")
    if wrong:
        return warned("firmware other than the site's: " + "; ".join(wrong), note(_FIRMWARE_FIX), evidence)
    bundles = by_id.get(PLDM_BUNDLE, {})
    if len(bundles) > 1:
        return warned(f"the GPUs run {len(bundles)} different PLDM bundles ({', '.join(bundles)}): a firmware update "
                      "that did not reach every GPU", note(_FIRMWARE_FIX), evidence)
    shown = (f"PLDM bundle {next(iter(bundles))}" if bundles
             else f"{len(by_id)} firmware versions (no PLDM bundle shown)")
    count = f"{len(per_gpu)} GPU{'s' if len(per_gpu) != 1 else ''}"
    judged = [fw_id for fw_id in expected if fw_id not in unread]
    if judged:
        return passed(f"{shown} on {count}; {', '.join(judged)} as the site expects "
                      f"({', '.join(sorted({expected[f].file for f in judged}))})", evidence)
    return passed(f"{shown} on {count} (no expected versions given: not judged; a site sets them with --knowledge)",
                  evidence)
