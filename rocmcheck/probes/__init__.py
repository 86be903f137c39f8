"""doctor's GPU stage: functional and performance probes, each run in a child process with a timeout.
This module (and everything the parent imports) never imports torch; see stage.py for the shape,
catalog/ for the probes, one module each, and levels.py for which probes a doctor level runs."""

from __future__ import annotations

from rocmcheck.probes.catalog import BY_NAME, PROBE_IDS, PROBE_NAMES, PROBES
from rocmcheck.probes.context import HostFacts
from rocmcheck.probes.levels import DEFAULT_LEVEL
from rocmcheck.result import CheckResult

__all__ = ["PROBE_IDS", "PROBE_NAMES", "PROBES", "HostFacts", "run_gpu_stage"]


def run_gpu_stage(timeout_s: float = 60.0, host: HostFacts | None = None, only: set[str] | None = None, *,
                  level: int = DEFAULT_LEVEL, duration_s: float | None = None, skip: set[str] | None = None,
                  listener=None, early=None) -> list[CheckResult]:
    """One CheckResult per selected probe (each probe's own id), plus `probe.device` when the GPU could not be
    initialised at all. The probes: those named in `only`, else the `level`'s (levels.py), less `skip`.
    timeout_s: level 1's budget; a run with level-2 or level-3 probes gets theirs on top (levels.stage_budget_s).
    host: what the caller's fact collection found (GPU names and memory from amd-smi / nvidia-smi, the ROCm
    version, the kernel command line, NUMA balancing); None when nothing is known. listener (stage.StageListener):
    hears each verdict the moment it is known, and each probe's start. early: the main child started ahead with
    the same arguments (stage.start_early_main_child). Never raises for machine problems; raises
    ValueError for an unknown name in `only` or `skip`."""
    from rocmcheck.probes.levels import stage_budget_s
    from rocmcheck.probes.stage import run_stage, select_names

    chosen = [BY_NAME[n] for n in select_names(only, skip, level)]
    return run_stage(timeout_s=stage_budget_s(timeout_s, level, chosen, duration_s), host=host, only=only,
                     level=level, duration_s=duration_s, skip=skip, listener=listener, early=early)
