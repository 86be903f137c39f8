"""Checks: pure functions over Facts, each with a stable id, returning CheckResults.

Adding a check is adding one decorated function in the module of its area; `ALL_CHECK_MODULES` lists the
modules in report order. A check reads facts only through CheckContext's accessors: one that needs a fact that was
not collected raises NotKnown, and becomes a skip naming that fact ("not known: /dev/shm size"). A check that
raises anything else becomes a "crash" verdict and the others still run.
"""

from __future__ import annotations

import importlib
import traceback
from dataclasses import dataclass
from typing import Callable, Iterable, Union

from rocmcheck.facts.known import NOT_KNOWN_PHRASE, NotKnown
from rocmcheck.fixes import BUG_FIX
from rocmcheck.result import CheckResult, Status

CheckOutput = Union[CheckResult, list[CheckResult], None]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    area: str
    title: str
    func: Callable[..., CheckOutput]


_REGISTRY: dict[str, CheckSpec] = {}

ALL_CHECK_MODULES = (
    "rocmcheck.checks.system",
    "rocmcheck.checks.rocm",
    "rocmcheck.checks.access",
    "rocmcheck.checks.gpus",
    "rocmcheck.checks.where",
    "rocmcheck.checks.envvars",
    "rocmcheck.checks.torch_stack",
    "rocmcheck.checks.libraries",
    "rocmcheck.checks.extensions",
    "rocmcheck.checks.host",
    "rocmcheck.checks.host_config",
    "rocmcheck.checks.nvidia",
    "rocmcheck.checks.health",
    "rocmcheck.checks.runtime_env",
    "rocmcheck.checks.known_issues",
)

AREA_TITLES = {
    "os": "Operating system",
    "driver": "Driver",
    "rocm": "ROCm install",
    "devices": "Device access",
    "container": "Container",
    "gpu": "GPUs",
    "env": "Environment variables",
    "torch": "PyTorch",
    "triton": "Triton",
    "flash_attn": "flash-attention",
    "deepspeed": "DeepSpeed",
    "transformers": "transformers",
    "extensions": "GPU code in installed libraries",
    "bitsandbytes": "bitsandbytes",
    "versions": "Known issues in installed versions",
    "host": "Host settings",
    "nvidia": "NVIDIA",
    "health": "Node health",
    "probe": "GPU probes",
    "train": "Smoke-train",
    "doctor": "Doctor",
}


def check(check_id: str, title: str) -> Callable[[Callable[..., CheckOutput]], Callable[..., CheckOutput]]:
    def register(func: Callable[..., CheckOutput]) -> Callable[..., CheckOutput]:
        if check_id in _REGISTRY:
            raise ValueError(f"duplicate check id {check_id}")
        _REGISTRY[check_id] = CheckSpec(check_id, check_id.split(".", 1)[0], title, func)
        return func

    return register


def all_checks() -> list[CheckSpec]:
    for module in ALL_CHECK_MODULES:
        importlib.import_module(module)
    return list(_REGISTRY.values())


def select_checks(only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[CheckSpec]:
    """--only/--skip take check ids or whole areas ("torch" selects every torch.* check)."""
    specs = all_checks()
    only, skip = set(only), set(skip)

    def matches(spec: CheckSpec, names: set[str]) -> bool:
        return spec.id in names or spec.area in names

    order = list(AREA_TITLES)
    chosen = [s for s in specs if (not only or matches(s, only)) and not matches(s, skip)]
    # Report order follows the stack from the OS up, whatever order the modules registered in.
    return sorted(chosen, key=lambda s: order.index(s.area) if s.area in order else len(order))


def known_names() -> set[str]:
    specs = all_checks()
    return {s.id for s in specs} | {s.area for s in specs}


def not_known_result(spec: CheckSpec, what: str, phrase: str) -> CheckResult:
    """The skip of a check whose facts are not known: "<phrase>: <what>", data {"not_known": [what]}."""
    return CheckResult(spec.id, Status.SKIP, f"{phrase}: {what}", [], None, area=spec.area,
                       data={"not_known": [what]})


def run_checks(specs: list[CheckSpec], ctx: object) -> list[CheckResult]:
    """Each check's verdicts, stamped with its id. NotKnown becomes a skip in the words of ctx.unknown_phrase
    ("not known" by default; triage says "not in the paste")."""
    phrase = getattr(ctx, "unknown_phrase", NOT_KNOWN_PHRASE)
    results: list[CheckResult] = []
    for spec in specs:
        try:
            out = spec.func(ctx)
        except NotKnown as exc:
            results.append(not_known_result(spec, exc.what, phrase))
            continue
        except Exception as exc:  # a bug in rocmcheck, never a verdict on the machine
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            results.append(CheckResult(
                spec.id, Status.CRASH, f"this check crashed: {type(exc).__name__}: {exc}",
                [f"at {tb.filename.rsplit('/', 1)[-1]}:{tb.lineno}"],
                BUG_FIX,
                area=spec.area))
            continue
        if out is None:
            continue
        for r in out if isinstance(out, list) else [out]:
            if r.id and r.id != spec.id:  # a check speaks for its own id only
                r = CheckResult(spec.id, Status.CRASH, f"this check returned a verdict under another id ({r.id})",
                                [r.summary], BUG_FIX, area=spec.area)
            r.id, r.area = spec.id, spec.area
            results.append(r)
    return results
