"""Host settings multi-GPU fine-tuning depends on: IOMMU pass-through, NUMA balancing, /dev/shm, memlock."""

from __future__ import annotations

from rocmcheck import fixes
from rocmcheck.checks import check
from rocmcheck.checks.containers import container_restart
from rocmcheck.checks.context import CheckContext
from rocmcheck.checks.shell_words import words
from rocmcheck.checks.where import host_only_skip, kubernetes_signs
from rocmcheck.facts.known import NotKnown
from rocmcheck.result import CheckResult, failed, passed, skipped, warned
from rocmcheck.units import GIB, MIB

MIN_SHM = 1 * GIB  # DeepSpeed's ds_report asks for >= 1 GB; DataLoader workers and NCCL/RCCL SHM transport need it
RCCL_IOMMU_TEXT = 'NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!'


@check("host.iommu", "iommu=pt on the kernel command line (multi-GPU AMD)")
def check_iommu(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    if (guest := host_only_skip(ctx)) is not None:
        return guest
    if len(ctx.amd_gpus) < 2:
        return skipped("fewer than 2 GPUs: no peer-to-peer collectives")
    cmdline = ctx.file("/proc/cmdline")
    if cmdline is None:
        return skipped("/proc/cmdline not readable")
    if fixes.iommu_passthrough(cmdline):
        return passed("iommu=pt is set")
    return warned("iommu=pt missing: RCCL warns and collectives can hang",
                  fixes.IOMMU_FIX, [f"RCCL prints: {RCCL_IOMMU_TEXT}"])


@check("host.numa_balancing", "NUMA auto-balancing off")
def check_numa_balancing(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("not an AMD GPU machine")
    value = ctx.file("/proc/sys/kernel/numa_balancing")
    if value is None:
        return skipped("/proc/sys/kernel/numa_balancing not present (single-node kernel)")
    if value.strip() == "0":
        return passed("NUMA auto-balancing is off")
    return warned(f"NUMA auto-balancing is on ({value.strip()}): it migrates pages under the GPUs",
                  fixes.NUMA_FIX)


@check("host.shm", "/dev/shm large enough")
def check_shm(ctx: CheckContext) -> CheckResult:
    size = ctx.limit("shm_bytes")
    if size is None:
        if ctx.present("/dev/shm"):
            return skipped("/dev/shm exists but its size could not be read (statvfs failed)")
        return warned("/dev/shm is missing", fixes.shell("sudo mount -t tmpfs -o size=16G tmpfs /dev/shm",
                                                         "containers: --ipc=host or --shm-size 16G"))
    if size >= MIN_SHM:
        return passed(f"/dev/shm is {size / GIB:.1f} GiB")
    in_container, _ = ctx.in_container
    where = container_restart(ctx.vendor, "restart the container with --ipc=host or --shm-size 16G") \
        if in_container else fixes.SHM_FIX
    if kubernetes_signs(ctx):  # a pod's /dev/shm is sized in its manifest
        where = fixes.edit("the pod's manifest (spec.volumes and the container's volumeMounts)",
                           "mount an emptyDir with medium: Memory (sizeLimit: 16Gi) on /dev/shm",
                           "a pod's /dev/shm defaults to 64 MiB; no docker flag reaches it")
    if size < MIN_SHM:
        return failed(f"/dev/shm is {size / MIB:.0f} MiB: DataLoader workers and NCCL/RCCL shared memory break",
                      where)
    return passed(f"/dev/shm is {size / GIB:.1f} GiB")


@check("host.memlock", "locked-memory limit for pinned host memory")
def check_memlock(ctx: CheckContext) -> CheckResult:
    soft = ctx.limit("memlock_soft")
    if soft is None:
        return skipped("limit not read")
    unlimited = ctx.limit("unlimited")
    if soft == (-1 if unlimited is None else unlimited):  # RLIM_INFINITY is -1 on Linux
        return passed("locked memory: unlimited")
    # CPU offload pins optimizer state in host memory; RDMA (InfiniBand/RoCE) registration is bounded by this limit.
    in_container, _ = ctx.in_container
    fix = container_restart(ctx.vendor, "restart the container with --ulimit memlock=-1") if in_container \
        else fixes.MEMLOCK_FIX
    return warned(f"locked memory limited to {soft / MIB:.0f} MiB: pinned buffers for CPU offload "
                  "and RDMA registration can fail", fix)


# AMD's pre-training system validation: CPU governor "performance" (cpupower frequency-set -g performance)
# and GPU performance determinism (rocm-smi --setperfdeterminism 1900) on MI300X.
PERFORMANCE_GOVERNOR = "performance"
LOW_PERF_LEVELS = ("low", "profile_min_sclk", "profile_min_mclk")


@check("host.cpu_governor", "CPU frequency governor set to performance (GPU machines)")
def check_cpu_governor(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() == "none":
        return skipped("not a GPU machine")
    governors = ctx.health("cpufreq_governors")
    if not governors:
        return skipped("no cpufreq governor exposed (VM, container without /sys/devices/system/cpu/*/cpufreq, "
                       "or a bundle from an older rocmcheck)")
    evidence = [f"{name}: {count} CPU(s)" for name, count in sorted(governors.items())]
    others = sorted(g for g in governors if g != PERFORMANCE_GOVERNOR)
    if others:
        return warned(f"CPU governor {', '.join(others)}: data loading and kernel launches wait for the CPU to "
                      "clock up",
                      fixes.shell("sudo cpupower frequency-set -g performance",
                                  "AMD pre-training system validation; persist it with a systemd unit or tuned "
                                  "profile"),
                      evidence)
    return passed("every CPU uses the performance governor", evidence)


@check("host.perf_determinism", "MI300X performance level (determinism) as AMD's validation sets it")
def check_perf_determinism(ctx: CheckContext) -> CheckResult:
    if (guest := host_only_skip(ctx)) is not None:
        return guest
    levels: dict[str, str] = {}
    ids: dict[str, str] = {}  # how amd-smi -g names each GPU: its PCI address or its index
    unknown: list[str] = []
    for dev in ctx.from_source(lambda: ctx.health("pci_gpus"), unknown) or []:
        if dev.get("vendor") == "amd" and dev.get("perf_level"):
            levels[dev.get("bdf", "?")] = dev["perf_level"].strip()
            if dev.get("bdf"):
                ids[dev["bdf"]] = dev["bdf"]
    for g in (ctx.from_source(lambda: ctx.probe("amdsmi"), unknown) or {}).get("gpus") or []:
        level = (g.get("health") or {}).get("perf_level")
        if level:
            levels.setdefault(f"GPU {g.get('index')}", str(level).replace("AMDSMI_DEV_PERF_LEVEL_", "").lower())
            if g.get("index") is not None:
                ids.setdefault(f"GPU {g.get('index')}", str(g["index"]))
    if not levels:
        if unknown:
            raise NotKnown(unknown[0])
        return skipped("no AMD GPU performance level readable")
    evidence = [f"{k}: {v}" for k, v in sorted(levels.items())]
    low = sorted(k for k, v in levels.items() if v in LOW_PERF_LEVELS)
    if low:
        # A GPU read both from sysfs and amdsmi is named twice; amd-smi takes either name.
        gpus = list(dict.fromkeys(ids[k] for k in low)) if all(k in ids for k in low) else ["all"]
        selected, values = words("gpu", gpus)
        return warned(f"{len(low)} GPU(s) pinned to a low performance level: clocks stay down under load",
                      fixes.shell("sudo amd-smi set -g " + selected + " --perf-level AUTO",
                                  "or, as AMD's pre-training validation does: sudo rocm-smi --setperfdeterminism 1900",
                                  **values),
                      evidence)
    if all(v in ("perf_determinism", "determinism") for v in levels.values()):
        return passed("performance determinism set on every GPU", evidence)
    return passed("GPU clocks managed by the driver (AMD's pre-training validation additionally sets "
                  "`sudo rocm-smi --setperfdeterminism 1900` for run-to-run stable clocks)", evidence)
