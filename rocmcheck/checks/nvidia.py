"""NVIDIA machines: the same doctor, with nvidia-smi and torch's CUDA."""

from __future__ import annotations

from packaging.version import Version

from rocmcheck.checks import check
from rocmcheck.checks.context import CheckContext, tool_failure
from rocmcheck.checks.gpus import describe_gpu
from rocmcheck.fixes import note, shell
from rocmcheck.result import CheckResult, failed, passed, skipped, warned

CUDA_VERSIONS_FIX = shell("nvidia-smi; python -c 'import torch; print(torch.version.cuda)'",
                          "compare the driver's CUDA Version with torch's")


@check("nvidia.smi", "NVML (or nvidia-smi) lists the GPUs")
def check_nvidia_smi(ctx: CheckContext) -> CheckResult:
    res = ctx.facts.command("nvidia-smi-query")
    report = ctx.nvidia_smi
    if report is not None and report.tool == "nvml" and report.gpus:
        return passed(f"{len(report.gpus)} GPU(s) via NVML, driver {report.driver_version}",
                      [describe_gpu(g) for g in ctx.nvidia_gpus])
    if res is None:
        if ctx.vendor == "nvidia":
            return failed("nvidia-smi not found", note("install the NVIDIA driver (it ships nvidia-smi)"),
                          ctx.nvidia_signs)
        return skipped("not an NVIDIA machine")
    if not res.ok:
        return failed(tool_failure(res),
                      shell("sudo dmesg | grep -i nvrm", "the driver is not talking to the GPU; in a container use "
                            "--gpus all"),
                      (res.stdout + res.stderr).strip().splitlines()[:3])
    gpus = ctx.nvidia_gpus
    if not gpus:
        return failed("nvidia-smi lists no GPU", shell("nvidia-smi -L", "then check the driver install"))
    return passed(f"{len(gpus)} GPU(s), driver {report.driver_version if report else '?'}",
                  [describe_gpu(g) for g in gpus])


@check("nvidia.driver_cuda", "driver supports torch's CUDA version")
def check_driver_cuda(ctx: CheckContext) -> CheckResult:
    if ctx.vendor != "nvidia":
        return skipped("not an NVIDIA machine")
    t = ctx.torch or {}
    torch_cuda = t.get("cuda")
    report = ctx.nvidia_smi
    driver_cuda = report.cuda_version if report else None
    if not torch_cuda:
        return skipped("torch is not a CUDA build")
    if not driver_cuda:
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
