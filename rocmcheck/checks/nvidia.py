"""NVIDIA machines: the same doctor, with nvidia-smi and torch's CUDA."""

from __future__ import annotations

from packaging.version import Version

from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, known_or_none, tool_failure
from rocmcheck.checks.gpus import describe_gpu
from rocmcheck.fixes import note, shell
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

CUDA_VERSIONS_FIX = shell("nvidia-smi; python -c 'import torch; print(torch.version.cuda)'",
                          "compare the driver's CUDA Version with torch's")


@check("nvidia.smi", "NVML (or nvidia-smi) lists the GPUs")
def check_nvidia_smi(ctx: CheckContext) -> CheckResult:
    report = ctx.nvidia_smi
    if report is not None and report.tool == "nvml" and report.gpus:
        return passed(f"{len(ctx.nvidia_gpus)} GPU(s), driver {report.driver_version}",
                      ["listed by the NVML binding"] + [describe_gpu(g) for g in ctx.nvidia_gpus])
    runs = {key: known_or_none(lambda key=key: ctx.command(key)) for key in ("nvidia-smi-query", "nvidia-smi")}
    ran = {key: res for key, res in runs.items() if res is not None}
    if not ran:
        for key in runs:
            ctx.command(key)  # NotKnown when one of them is not known: then its absence is not shown
        if ctx.known_vendor() == "nvidia":
            return failed("nvidia-smi not found", note("install the NVIDIA driver (it ships nvidia-smi)"),
                          ctx.nvidia_signs)
        return skipped("not an NVIDIA machine")
    gpus = ctx.nvidia_gpus
    failures = [f"nvidia-smi{' --query-gpu' if key == 'nvidia-smi-query' else ''}: {tool_failure(res)}"
                for key, res in ran.items() if not res.ok]
    if gpus:
        # An older driver refuses a --query-gpu field (compute_cap): the table still lists the GPUs.
        return passed(f"{len(gpus)} GPU(s), driver {report.driver_version if report else '?'}",
                      [describe_gpu(g) for g in gpus] + failures)
    broken = [res for res in ran.values() if not res.ok]
    if broken:
        return failed(tool_failure(broken[0]),
                      shell("sudo dmesg | grep -i nvrm", "the driver is not talking to the GPU; in a container use "
                            "--gpus all"),
                      (broken[0].stdout + broken[0].stderr).strip().splitlines()[:3])
    return failed("nvidia-smi lists no GPU", shell("nvidia-smi -L", "then check the driver install"))


@check("nvidia.driver_cuda", "driver supports torch's CUDA version")
def check_driver_cuda(ctx: CheckContext) -> CheckResult:
    if ctx.known_vendor() != "nvidia":
        return skipped("not an NVIDIA machine")
    t = ctx.torch or {}
    torch_cuda = t.get("cuda")
    report = ctx.nvidia_smi
    driver_cuda = report.cuda_version if report else None
    if not torch_cuda:
        return skipped("torch is not a CUDA build")
    if not driver_cuda:
        for key in ("nvidia-smi", "nvidia-smi-health"):  # the outputs that print "CUDA Version"
            ctx.command(key)
        return warned("could not read the driver's CUDA version from nvidia-smi",
                      CUDA_VERSIONS_FIX)
    evidence = [f"driver supports CUDA {driver_cuda}", f"torch built with CUDA {torch_cuda}"]
    try:
        too_old = Version(driver_cuda).major < Version(torch_cuda).major
    except ValueError:  # InvalidVersion, or more digits than int() takes
        return warned("CUDA versions not understood", CUDA_VERSIONS_FIX, evidence)
    if too_old:
        return failed(f"driver (CUDA {driver_cuda}) is older than torch's CUDA {torch_cuda}",
                      note("upgrade the NVIDIA driver, or install a torch built for an older CUDA"), evidence)
    return passed(f"driver CUDA {driver_cuda} >= torch CUDA {torch_cuda}", evidence)
