"""What one GPU probe is: its id, what it proves, its doctor level, its time limit and duration budget, how it runs
(on the GPU and in CPU test mode) and its judge. Each probe is written once, in its own module under
rocmcheck/probes/catalog/; the catalog lists them; rocmcheck/probes/levels.py picks the ones a level runs.
No torch here: a runner imports its torch code when it is called, inside the probe child."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from rocmcheck.result import CheckResult

if TYPE_CHECKING:
    from rocmcheck.probes.context import DeviceContext

ID_PREFIX = "probe."


class ProbeSkip(Exception):
    """Raised by a probe that cannot run here; the message is the reason shown to the person."""


def _quiet(text: str) -> None:
    pass


@dataclass(frozen=True)
class RunOptions:
    """What the parent asked of the child beyond the probe names."""

    allow_build: bool = False  # a probe may JIT-build what it tests (deepspeed_ops, asked for by name)
    # A probe with a duration share (level 3): the seconds it should run, its part of `doctor --duration`.
    duration_s: float | None = None
    # A line of progress for the person waiting ("minute 3 of 10: 612 TFLOP/s"): the child sends it as a "note"
    # event, the doctor shows it on its progress line. For probes that run long; a quick one says nothing.
    note: Callable[[str], None] = _quiet


# runner(device, options) -> the measurements (the "data" of the result event), in the child, with torch imported.
Runner = Callable[[Any, RunOptions], dict[str, Any]]
# judge(data, context) -> the verdict, in the parent: a pure function of the numbers and the facts passed down.
Judge = Callable[[dict[str, Any], "DeviceContext"], CheckResult]


@dataclass(frozen=True)
class Probe:
    id: str  # the verdict id, written out where the judge is: "probe.gemm_numerics"
    proves: str  # one line for `rocmcheck probe --list`
    timeout_s: float  # its own limit inside the child; a probe past it is reported as hung
    judge: Judge
    run: Runner | None = None  # on the GPU, in the main probe child
    run_cpu: Runner | None = None  # CPU test mode (small sizes); None: the probe skips there
    child: str | None = None  # a probe that runs in a child of its own (the collective: one process per GPU)
    build_timeout_s: float | None = None  # the limit when asked for by name and allowed to build (minutes)
    # The doctor level that runs it (rocmcheck/probes/levels.py): 1 quick (every `rocmcheck doctor`), 2 numerics
    # across a fine-tune's paths (`--level 2`), 3 stress (`--level 3`). A level runs its probes and those below.
    level: int = 1
    # What it is designed to take on one GPU, torch import excluded: the level's total is held to the level's
    # budget (tests/test_probes_levels.py); benchmarks/bench_level2.py prints it beside the measured seconds.
    budget_s: float | None = None
    # Level 3: its weight in `doctor --duration` (the seconds are split by weight); it then runs for its part,
    # given in RunOptions.duration_s, and its limit is timeout_s plus that part. 0: a probe of fixed length.
    duration_share: float = 0.0

    def __post_init__(self) -> None:
        if not self.id.startswith(ID_PREFIX) or not self.name.isidentifier():
            raise ValueError(f"a probe id is probe.<name>, not {self.id!r}")
        if self.level not in (1, 2, 3):
            raise ValueError(f"{self.id}: level {self.level!r} is not 1, 2 or 3")
        if self.duration_share < 0 or (self.duration_share and self.level != 3):
            raise ValueError(f"{self.id}: only a level-3 probe takes a share of --duration")

    @property
    def name(self) -> str:
        """What a person types: `rocmcheck probe gemm_numerics`."""
        return self.id[len(ID_PREFIX):]

    @property
    def builds(self) -> bool:
        """True when asking for this probe by name lets it build what it tests."""
        return self.build_timeout_s is not None

    def limit(self, allow_build: bool, duration_s: float | None = None) -> float:
        """Its own limit in the child: the build limit when it may build, plus its run time when it is given one."""
        base = self.build_timeout_s if allow_build and self.build_timeout_s is not None else self.timeout_s
        return base + (duration_s or 0.0)

    def runner(self, cpu: bool) -> Runner | None:
        return self.run_cpu if cpu else self.run

    def listing(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "proves": self.proves, "level": self.level,
                "timeout_s": self.timeout_s, "budget_s": self.budget_s, "duration_share": self.duration_share,
                "build_timeout_s": self.build_timeout_s, "own_child": self.child is not None}
