"""doctor's GPU stage: functional and performance probes, each run in a child process with a timeout.
This module (and everything the parent imports) never imports torch; see stage.py for the shape."""

from __future__ import annotations

from rocmcheck.probes.catalog import PROBE_NAMES, PROBES
from rocmcheck.result import CheckResult

__all__ = ["PROBE_NAMES", "PROBES", "run_gpu_stage"]


def run_gpu_stage(timeout_s: float = 60.0, gpu_names: list[str] | None = None,
                  smi_memory_bytes: list[int] | None = None, only: set[str] | None = None) -> list[CheckResult]:
    """One CheckResult per selected probe (ids `probe.<name>`), plus `probe.device` when the GPU could not be
    initialised at all. gpu_names / smi_memory_bytes: what amd-smi / nvidia-smi reported, or None.
    Never raises for machine problems; raises ValueError for an unknown name in `only`."""
    from rocmcheck.probes.stage import run_stage

    return run_stage(timeout_s=timeout_s, gpu_names=gpu_names, smi_memory_bytes=smi_memory_bytes, only=only)
