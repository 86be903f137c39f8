"""Can this user reach the GPUs: /dev/kfd, /dev/dri/renderD*, render/video groups, container flags."""

from __future__ import annotations

from rocmcheck.checks import check
from rocmcheck.checks.containers import docker_run_nvidia
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.host import MIN_SHM
from rocmcheck.checks.where import device_access_fix, kubernetes_signs, pod_gpu_fix, slurm_job_without_gpus
from rocmcheck.fixes import GROUPS_FIX, docker_run
from rocmcheck.result import CheckResult, failed, passed, skipped, warned


def _render_nodes(ctx: CheckContext) -> dict[str, dict]:
    """Every /dev/dri/renderD* node: the whole device list must be known (a node missing from it is absent)."""
    return {p: a for p, a in ctx.group("devices").items() if p.startswith("/dev/dri/renderD")}


def _access_words(info: dict) -> str:
    bits = [w for w, ok in (("read", info.get("readable")), ("write", info.get("writable"))) if not ok]
    owner = f" (mode {info.get('mode')}, group {info.get('group') or info.get('gid')})" if info.get("mode") else ""
    return f"no {' / '.join(bits)} access{owner}"


@check("devices.kfd", "/dev/kfd present and read-write")
def check_kfd(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    info = ctx.device("/dev/kfd")
    report = known_or_none(lambda: ctx.rocminfo)
    evidence = [f"rocminfo: {report.error}"] if report is not None and report.error else []
    if info.get("exists") and info.get("readable") and info.get("writable"):
        return passed("/dev/kfd is read-write for this user")
    in_container, _ = ctx.in_container
    pod = kubernetes_signs(ctx)
    if not info.get("exists"):
        if pod:
            return failed("/dev/kfd is missing: this Kubernetes pod was given no GPU", device_access_fix(ctx),
                          evidence + pod)
        if slurm_job_without_gpus(ctx):
            return failed("/dev/kfd is missing: this Slurm job was given no GPU", device_access_fix(ctx), evidence)
        if in_container:
            return failed("/dev/kfd is missing: the container was started without it", docker_run(), evidence)
        return failed("/dev/kfd is missing: the amdgpu (KFD) driver is not loaded",
                      device_access_fix(ctx), evidence)
    fix = GROUPS_FIX
    if slurm_job_without_gpus(ctx):
        fix = device_access_fix(ctx)
    elif in_container and not pod:
        fix = docker_run("restart it with --group-add video --group-add render (or run as a user in those groups)")
    return failed(f"/dev/kfd: {_access_words(info)}", fix, evidence)


@check("devices.render", "/dev/dri/renderD* present and read-write")
def check_render_nodes(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    nodes = _render_nodes(ctx)
    if not nodes:
        return failed("no /dev/dri/renderD* nodes", device_access_fix(ctx))
    bad = {p: a for p, a in nodes.items() if not (a.get("readable") and a.get("writable"))}
    evidence = [f"{p}: {'ok' if p not in bad else _access_words(a)}" for p, a in nodes.items()]
    if bad:
        return failed(f"{len(bad)} of {len(nodes)} render nodes are not read-write", GROUPS_FIX, evidence)
    return passed(f"{len(nodes)} render node(s) read-write", evidence)


@check("devices.groups", "user in the render and video groups")
def check_groups(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "amd":
        return skipped("no AMD GPU stack found")
    if ctx.user_info("uid") == 0:
        return passed("running as root (group membership not needed)")
    groups = set(ctx.user_info("groups") or [])
    missing = [g for g in ("render", "video") if g not in groups]
    evidence = [f"groups: {', '.join(sorted(groups)) or '(none)'}"]
    if not missing:
        return passed("user is in render and video", evidence)
    group_ids = known_or_none(lambda: ctx.user_info("group_ids"))
    absent = [g for g in missing if group_ids is not None and group_ids.get(g) is None]
    if absent:
        evidence.append(f"group(s) not defined on this system: {', '.join(absent)}")
    # Access is what matters; membership only explains it. With working device nodes this is a warning.
    kfd = ctx.device("/dev/kfd")
    if kfd.get("readable") and kfd.get("writable"):
        return warned(f"user not in {', '.join(missing)} (devices are reachable anyway)", GROUPS_FIX, evidence)
    return failed(f"user not in {', '.join(missing)}", GROUPS_FIX, evidence)


def missing_container_flags(ctx: CheckContext) -> list[str]:
    """The docker run flags whose effect is absent from inside this container (each fact must be known)."""
    missing = []
    if not ctx.device("/dev/kfd").get("exists"):
        missing.append("--device=/dev/kfd")
    if not _render_nodes(ctx):
        missing.append("--device=/dev/dri")
    groups = set(ctx.user_info("groups") or [])
    if ctx.user_info("uid") != 0 and not {"video", "render"} <= groups:
        missing.append("--group-add video --group-add render")
    shm = ctx.limit("shm_bytes")
    if shm is not None and shm < MIN_SHM:
        missing.append("--ipc=host (or --shm-size 16G)")
    status = ctx.file("/proc/self/status") or ""
    for line in status.splitlines():
        if line.startswith("Seccomp:") and line.split(":", 1)[1].strip() not in ("0", ""):
            missing.append("--security-opt seccomp=unconfined")
    return missing


@check("container.flags", "container started with the flags ROCm needs")
def check_container_flags(ctx: CheckContext) -> CheckResult:
    in_container, evidence = ctx.in_container
    if not in_container:
        return skipped("not in a container")
    vendor = ctx.known_vendor()
    if vendor == "nvidia":
        if ctx.nvidia_gpus:
            return passed("NVIDIA GPUs are visible inside this container", evidence)
        return failed("no NVIDIA GPU visible inside this container",
                      docker_run_nvidia("restart it with --gpus all (the NVIDIA Container Toolkit on the host); "
                                        "your image in place of NVIDIA's"),
                      evidence)
    missing = missing_container_flags(ctx)
    if not missing:
        return passed("the ROCm devices and settings reached this container", evidence)
    pod = kubernetes_signs(ctx)
    if pod:  # a pod is not started with docker flags: its spec asks the device plugin for GPUs
        lacks = [m for m in missing if m.startswith("--device") or "shm" in m]
        if not lacks:
            return passed("the GPUs reached this Kubernetes pod", evidence + pod)
        return failed("this Kubernetes pod has no GPU resource" if any(m.startswith("--device") for m in lacks)
                      else "this Kubernetes pod's /dev/shm is small", pod_gpu_fix(ctx, vendor), evidence + pod)
    summary = f"this container was started without: {' '.join(missing)}"
    fix = docker_run()
    gpu_devices_missing = any(m.startswith("--device") for m in missing)
    if gpu_devices_missing and vendor != "amd":
        # No AMD stack visible at all: maybe a CPU-only host, maybe the devices were not passed. Say both.
        return warned(summary + " (no GPU reached the container)", fix, evidence)
    return failed(summary, fix, evidence)
