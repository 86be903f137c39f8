"""doctor's verification levels, as NVIDIA's `dcgmi diag -r 1|2|3` has them: which probes a level runs, how long
its GPU stage may take, and how a level-3 run's --duration is split among the stress probes. No torch here.

Each probe declares its level in its own module (rocmcheck/probes/catalog/, `Probe(level=...)`); a level runs its
probes and every probe below it, in the catalog's order:
  1 quick      every `rocmcheck doctor`: each layer computes, once, at a LLaMA shape (about 15 s on an H200)
  2 numerics   `--level 2`: the numbers on every path a fine-tune takes (GEMM per BLAS library and dtype, SDPA
               forward and backward per backend, RMSNorm, the fused and foreach AdamW steps, the fp8 GEMM), each
               against a float64 reference; designed for 60-90 s on one GPU, held to 2 minutes
  3 stress     `--level 3`: sustained load for `--duration` seconds in all (default 10 minutes)"""

from __future__ import annotations

import math

from rocmcheck.probes.catalog import PROBES
from rocmcheck.probes.spec import Probe

QUICK, NUMERICS, STRESS = 1, 2, 3
LEVELS = (QUICK, NUMERICS, STRESS)
DEFAULT_LEVEL = QUICK
LEVEL_NAMES = {QUICK: "quick", NUMERICS: "numerics", STRESS: "stress"}

# What level 2's probes may take in all on one GPU, on top of level 1 (the stage's budget grows by this much).
# The design point is 60-90 s; benchmarks/bench_level2.py measures it on an H200 (benchmarks/RESULTS.md).
NUMERICS_BUDGET_S = 120.0
# Level 3: the stress probes run this long in all unless --duration says otherwise (at most 15 minutes).
DEFAULT_DURATION_S = 600.0
MIN_DURATION_S = 10.0
MAX_DURATION_S = 24 * 3600.0
# Level 3, besides the stress itself: each stress probe's set-up and check (its timeout_s holds its own), and
# the child's start-up around them.
STRESS_OVERHEAD_S = 60.0


def probes_at(level: int) -> tuple[Probe, ...]:
    """The probes a level runs: its own and every lower level's, in run order."""
    if level not in LEVELS:
        raise ValueError(f"level {level!r} is not one of {', '.join(map(str, LEVELS))}")
    return tuple(p for p in PROBES if p.level <= level)


def names_at(level: int) -> tuple[str, ...]:
    return tuple(p.name for p in probes_at(level))


def durations(probes: list[Probe] | tuple[Probe, ...], duration_s: float | None) -> dict[str, float]:
    """Each probe with a duration share -> its seconds of `duration_s` (split by share); none without one."""
    shared = [p for p in probes if p.duration_share > 0]
    total = sum(p.duration_share for p in shared)
    whole = DEFAULT_DURATION_S if duration_s is None else duration_s
    return {p.name: whole * p.duration_share / total for p in shared} if total else {}


def stage_budget_s(base_s: float, level: int, probes: list[Probe] | tuple[Probe, ...],
                   duration_s: float | None = None) -> float:
    """The GPU stage's overall limit: level 1's `base_s`, plus level 2's budget when a level-2 probe runs, plus
    the stress probes' seconds and their fixed parts when one runs (probes asked for by name count too)."""
    budget = base_s
    if any(p.level >= NUMERICS for p in probes) or level >= NUMERICS:
        budget += NUMERICS_BUDGET_S
    stress = [p for p in probes if p.level >= STRESS]
    if stress:
        budget += sum(durations(stress, duration_s).values()) + sum(p.timeout_s for p in stress) + STRESS_OVERHEAD_S
    return budget


def level_problem(level: int, duration_s: float | None, gpu_probes: bool = True, replay: bool = False) -> str | None:
    """Why these doctor options do not go together (one line for BadInput), or None."""
    if level not in LEVELS:
        return f"--level {level}: choose 1 (quick), 2 (numerics) or 3 (stress)"
    if duration_s is not None:
        if level < STRESS:
            return "--duration sets how long the level-3 stress probes run: give it with --level 3"
        if not (math.isfinite(duration_s) and MIN_DURATION_S <= duration_s <= MAX_DURATION_S):
            return f"--duration {duration_s:g}: between {MIN_DURATION_S:g} and {MAX_DURATION_S:g} seconds"
    if level > QUICK and not gpu_probes:
        return f"--level {level} adds GPU probes: it cannot be combined with --no-gpu-probes"
    if level > QUICK and replay:
        return f"--level {level} runs GPU probes: a replayed bundle shows the probes it recorded"
    return None
