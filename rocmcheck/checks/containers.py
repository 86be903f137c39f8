"""The `docker run` line that restarts a container with what it lacks, for the GPU vendor of this machine.

AMD: ROCm's Docker guide's devices, groups and settings (fixes.docker_run). NVIDIA: the NVIDIA Container Toolkit
passes the GPUs with `--gpus all` (no /dev/kfd, no render group); NGC's PyTorch container documentation starts it
with `--ipc=host --ulimit memlock=-1 --ulimit stack=67108864` (shared memory for DataLoader workers and NCCL,
pinned memory)."""

from __future__ import annotations

from rocmcheck.fixes import Fix, docker_run, shell

NVIDIA_IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"
NVIDIA_TOOLKIT = ("the NVIDIA Container Toolkit must be installed on the host "
                  "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/)")


def docker_run_nvidia(why: str = "") -> Fix:
    return shell("docker run -it --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 {image}",
                 why or f"restart the container with these flags (your image in place of NVIDIA's); {NVIDIA_TOOLKIT}",
                 image=NVIDIA_IMAGE)


def container_restart(vendor: str, why: str = "") -> Fix:
    """The restart line for this vendor's GPUs; AMD's unless the machine is an NVIDIA one."""
    return docker_run_nvidia(why) if vendor == "nvidia" else docker_run(why)
