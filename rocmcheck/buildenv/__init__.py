"""build-env: the environment for building PyTorch, flash-attn and DeepSpeed from source for the
chosen GPU archs. Pure logic lives in archs/env/jobs/render; this module gathers the machine's
facts and ties them together for the CLI."""

from __future__ import annotations

from typing import Callable

from rocmcheck.buildenv.archs import ArchSelection, select_archs
from rocmcheck.buildenv.env import TARGETS, BuildEnv, HostResources, compute_build_env, expand_targets
from rocmcheck.buildenv.render import FORMATS, render
from rocmcheck.buildenv.toolkit import Toolkit, detect_cuda, detect_rocm
from rocmcheck.errors import BadInput
from rocmcheck.facts.host_resources import available_memory, usable_cores

__all__ = [
    "BadInput", "ArchSelection", "BuildEnv", "BadInput", "FORMATS", "TARGETS", "HostResources", "Toolkit",
    "build_env_for_host", "compute_build_env", "detect_cuda", "detect_rocm", "expand_targets", "host_resources",
    "render", "resolve_archs", "select_archs",
]

AUTO = "auto"


def resolve_archs(raw_archs: list[str], detect: Callable[[], list[str]]) -> ArchSelection:
    """Expand 'auto' with the GPUs detect() finds (called at most once), then validate everything."""
    names: list[str] = []
    for raw in raw_archs or [AUTO]:
        if raw.strip().lower() != AUTO:
            names.append(raw)
            continue
        detected = detect()
        if not detected:
            raise BadInput("--arch auto: no GPU found here (rocminfo and nvidia-smi saw none); name the arch, "
                           "e.g. --arch gfx942 or --arch sm_90")
        try:
            select_archs(list(detected))
        except BadInput as exc:
            raise BadInput(f"--arch auto found {', '.join(dict.fromkeys(detected))}: {exc}") from None
        names.extend(detected)
    return select_archs(names)


def host_resources() -> HostResources:
    avail, source = available_memory()
    return HostResources(cores=usable_cores(), available_bytes=avail, memory_source=source)


def build_env_for_host(
    raw_archs: list[str],
    target: str = "all",
    triton_backend: bool = False,
    detect: Callable[[], list[str]] | None = None,
) -> BuildEnv:
    """What `rocmcheck build-env` computes on this machine. Raises BadInput / BadInput for bad input."""
    if detect is None:
        detect = _detect_gpu_archs
    selection = resolve_archs(raw_archs, detect)
    targets = expand_targets(target)
    toolkit = detect_rocm() if selection.vendor == "amd" else detect_cuda()
    return compute_build_env(selection, targets, host_resources(), toolkit, triton_backend=triton_backend)


def _detect_gpu_archs() -> list[str]:
    # doctor's own arch detector (rocminfo, else nvidia-smi), imported late: only --arch auto needs it.
    from rocmcheck.facts.collect import detect_gpu_archs_why

    archs, failures = detect_gpu_archs_why()
    if not archs and failures:  # not "no GPU found": the tools that would have said did not answer
        raise BadInput(f"--arch auto: cannot tell which GPUs are here: {'; '.join(failures)}; name the arch, "
                        "e.g. --arch gfx942 or --arch sm_90")
    return list(archs)
