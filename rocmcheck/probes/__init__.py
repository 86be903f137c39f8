"""doctor's GPU stage: functional and performance probes, each run in a child process with a timeout.
This module (and everything the parent imports) never imports torch; see stage.py for the shape and
catalog/ for the probes, one module each."""

from __future__ import annotations

from rocmcheck.probes.catalog import PROBE_IDS, PROBE_NAMES, PROBES
from rocmcheck.probes.context import HostFacts
from rocmcheck.result import CheckResult

__all__ = ["PROBE_IDS", "PROBE_NAMES", "PROBES", "HostFacts", "run_gpu_stage"]


def run_gpu_stage(timeout_s: float = 60.0, host: HostFacts | None = None,
                  only: set[str] | None = None) -> list[CheckResult]:
    """One CheckResult per selected probe (each probe's own id), plus `probe.device` when the GPU could not be
    initialised at all. host: what the caller's fact collection found (GPU names and memory from amd-smi /
    nvidia-smi, the ROCm version, the kernel command line, NUMA balancing); None when nothing is known.
    Never raises for machine problems; raises ValueError for an unknown name in `only`."""
    from rocmcheck.probes.stage import run_stage

    return run_stage(timeout_s=timeout_s, host=host, only=only)
