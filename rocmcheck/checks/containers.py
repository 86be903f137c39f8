"""The `docker run` line that restarts a container with what it lacks, for the GPU vendor of this machine.

AMD: ROCm's Docker guide's devices, groups and settings (fixes.docker_run). NVIDIA: the NVIDIA Container Toolkit
passes the GPUs with `--gpus all` (no /dev/kfd, no render group); NGC's PyTorch container documentation starts it
with `--ipc=host --ulimit memlock=-1 --ulimit stack=67108864` (shared memory for DataLoader workers and NCCL,
pinned memory)."""

from __future__ import annotations

from rocmcheck.fixes import Fix, docker_run, note, shell

NVIDIA_IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"
NVIDIA_TOOLKIT = ("the NVIDIA Container Toolkit must be installed on the host "
                  "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/)")


def docker_run_nvidia(why: str = "") -> Fix:
    return shell("docker run -it --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 {image}",
                 why or f"restart the container with these flags (your image in place of NVIDIA's); {NVIDIA_TOOLKIT}",
                 image=NVIDIA_IMAGE)


def container_restart(vendor: str | None, why: str = "") -> Fix:
    """The restart line for this vendor's GPUs ("amd" or "nvidia"). Where the vendor is not known, the line would be
    a guess (AMD's devices and groups mean nothing to an NVIDIA host, and --gpus nothing to an AMD one): the setting
    alone, with the GPU flags the container already has."""
    if vendor == "nvidia":
        return docker_run_nvidia(why)
    if vendor == "amd":
        return docker_run(why)
    return note(f"{why or 'restart the container with the missing settings'}, keeping the GPU flags it was started "
                "with")
