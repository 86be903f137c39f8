"""Host settings multi-GPU fine-tuning depends on: IOMMU pass-through, NUMA balancing, /dev/shm, memlock."""

from __future__ import annotations

from rocmcheck.checks import check
from rocmcheck import fixes
from rocmcheck.checks.context import CheckContext
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

GIB = 1 << 30
MIN_SHM = 1 * GIB  # DeepSpeed's ds_report asks for >= 1 GB; DataLoader workers and NCCL/RCCL SHM transport need it
RCCL_IOMMU_TEXT = 'NCCL WARN Missing "iommu=pt" from kernel command line which can lead to system instablity or hang!'


@check("host.iommu", "iommu=pt on the kernel command line (multi-GPU AMD)")
def check_iommu(ctx: CheckContext) -> CheckResult:
    if ctx.vendor != "amd":
        return skipped("not an AMD GPU machine")
    if len(ctx.amd_gpus) < 2:
        return skipped("fewer than 2 GPUs: no peer-to-peer collectives")
    cmdline = ctx.facts.files.get("/proc/cmdline")
    if cmdline is None:
        return skipped("/proc/cmdline not readable")
    if fixes.iommu_passthrough(cmdline):
        return passed("iommu=pt is set")
    return warned("iommu=pt missing: RCCL warns and collectives can hang",
                  fixes.IOMMU_FIX, [f"RCCL prints: {RCCL_IOMMU_TEXT}"])


@check("host.numa_balancing", "NUMA auto-balancing off")
def check_numa_balancing(ctx: CheckContext) -> CheckResult:
    if ctx.vendor != "amd":
        return skipped("not an AMD GPU machine")
    value = ctx.facts.files.get("/proc/sys/kernel/numa_balancing")
    if value is None:
        return skipped("/proc/sys/kernel/numa_balancing not present (single-node kernel)")
    if value.strip() == "0":
        return passed("NUMA auto-balancing is off")
    return warned(f"NUMA auto-balancing is on ({value.strip()}): it migrates pages under the GPUs",
                  fixes.NUMA_FIX)


@check("host.shm", "/dev/shm large enough")
def check_shm(ctx: CheckContext) -> CheckResult:
    size = ctx.facts.limits.get("shm_bytes")
    if size is None:
        return warned("/dev/shm is missing", fixes.step("sudo mount -t tmpfs -o size=16G tmpfs /dev/shm",
                                                        "containers: --ipc=host or --shm-size 16G"))
    in_container, _ = ctx.in_container
    where = fixes.docker_run("restart the container with --ipc=host or --shm-size 16G") if in_container else \
        fixes.SHM_FIX
    if size < MIN_SHM:
        return failed(f"/dev/shm is {size / (1 << 20):.0f} MiB: DataLoader workers and NCCL/RCCL shared memory break",
                      where)
    return passed(f"/dev/shm is {size / GIB:.1f} GiB")


@check("host.memlock", "locked-memory limit for pinned host memory")
def check_memlock(ctx: CheckContext) -> CheckResult:
    lim = ctx.facts.limits
    soft, unlimited = lim.get("memlock_soft"), lim.get("unlimited", -1)
    if soft is None:
        return skipped("limit not read")
    if soft == unlimited:
        return passed("locked memory: unlimited")
    # CPU offload pins optimizer state in host memory; RDMA (InfiniBand/RoCE) registration is bounded by this limit.
    in_container, _ = ctx.in_container
    fix = fixes.docker_run("restart the container with --ulimit memlock=-1:-1") if in_container else fixes.MEMLOCK_FIX
    return warned(f"locked memory limited to {soft / (1 << 20):.0f} MiB: pinned buffers for CPU offload "
                  "and RDMA registration can fail", fix)
