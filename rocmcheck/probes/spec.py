"""What one GPU probe is: its id, what it proves, its time limit, how it runs (on the GPU and in CPU test mode) and
its judge. Each probe is written once, in its own module under rocmcheck/probes/catalog/; the catalog lists them.
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


@dataclass(frozen=True)
class RunOptions:
    """What the parent asked of the child beyond the probe names."""

    allow_build: bool = False  # a probe may JIT-build what it tests (deepspeed_ops, asked for by name)


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

    def __post_init__(self) -> None:
        if not self.id.startswith(ID_PREFIX) or not self.name.isidentifier():
            raise ValueError(f"a probe id is probe.<name>, not {self.id!r}")

    @property
    def name(self) -> str:
        """What a person types: `rocmcheck probe gemm_numerics`."""
        return self.id[len(ID_PREFIX):]

    @property
    def builds(self) -> bool:
        """True when asking for this probe by name lets it build what it tests."""
        return self.build_timeout_s is not None

    def limit(self, allow_build: bool) -> float:
        return self.build_timeout_s if allow_build and self.build_timeout_s is not None else self.timeout_s

    def runner(self, cpu: bool) -> Runner | None:
        return self.run_cpu if cpu else self.run

    def listing(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "proves": self.proves, "timeout_s": self.timeout_s,
                "build_timeout_s": self.build_timeout_s, "own_child": self.child is not None}
