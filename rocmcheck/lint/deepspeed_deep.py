"""Parent side of the deep validation: runs rocmcheck.lint.deepspeed_child with a timeout.

Why a child process: importing deepspeed imports torch (1.7 s and ~250 MB on a CPU box, a HIP/CUDA
init on a GPU box, and a crash if torch is broken). The lint CLI itself stays at ~0.1 s for
everything else, and a DeepSpeed that hangs or crashes becomes a message, not a hung lint.
"""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.child import child_env, run_child

DEFAULT_TIMEOUT_S = 90.0

# Inside one_lint_run(): the file on which the DeepSpeed child hung, if it did. A DeepSpeed that hangs on one
# config (a wedged import, a driver init) hangs on the next as well, so the files after it skip the child at
# once instead of each paying the timeout again.
_HUNG_ON: ContextVar[list[str] | None] = ContextVar("deepspeed_hung_on", default=None)


@dataclass
class DeepResult:
    ran: bool
    skipped_reason: str | None = None  # why DeepSpeed's classes were not consulted
    deepspeed_version: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    parsed: dict[str, Any] | None = None
    top_level_keys: set[str] = field(default_factory=set)


def deepspeed_findable() -> bool:
    return importlib.util.find_spec("deepspeed") is not None


@contextmanager
def one_lint_run():
    """One lint invocation over many files: a DeepSpeed child that hangs is started once, not once per file."""
    token = _HUNG_ON.set([])
    try:
        yield
    finally:
        _HUNG_ON.reset(token)


def run_deep_validation(config: dict, world_size: int | None, timeout: float | None = None, *,
                        label: str | None = None) -> DeepResult:
    """label: the file the config came from, named when the child hangs on it."""
    if not deepspeed_findable():
        return DeepResult(False, "deepspeed is not installed in this Python")
    hung_on = _HUNG_ON.get()
    if hung_on:
        return DeepResult(False, f"the DeepSpeed check hung on {hung_on[0]}; skipped for the rest")
    env = child_env()
    # Config parsing needs no accelerator; the CPU one keeps the child off the GPU and quiet.
    env.setdefault("DS_ACCELERATOR", "cpu")
    run = run_child("rocmcheck.lint.deepspeed_child", {"config": config, "world_size": world_size or 1},
                    DEFAULT_TIMEOUT_S if timeout is None else timeout, env=env)
    if run.command.timed_out and hung_on is not None:
        hung_on.append(label or "an earlier config")
    payload = run.last("validated")
    if payload is None:
        return DeepResult(False, f"the DeepSpeed check process gave no answer: {run.command.describe_failure()}")
    if "skipped" in payload:
        return DeepResult(False, payload["skipped"])
    return DeepResult(
        True,
        deepspeed_version=payload.get("deepspeed_version"),
        messages=payload.get("messages", []),
        parsed=payload.get("parsed"),
        top_level_keys=set(payload.get("top_level_keys", [])),
    )
