"""The largest sum of live tensor bytes while a step runs on the CPU, from torch's memory profiler: what
torch.cuda.max_memory_allocated() reports on a GPU, without a GPU. The planner's step peaks (the loss, a whole
training step) are tested against it."""

from __future__ import annotations

import pytest


def live_peak(torch, step) -> int:
    """Peak live bytes while step() runs: torch.profiler's memory timeline (every allocation and free, with the
    tensors that existed before the profile, such as weights and optimizer states, counted from the start)."""
    memory_profiler = pytest.importorskip("torch.profiler._memory_profiler")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                                record_shapes=True, with_stack=True) as prof:
        step()
    live = peak = 0
    action = memory_profiler.Action
    for _, what, _, size in prof._memory_profile().timeline:
        if what in (action.CREATE, action.PREEXISTING):
            live += size
        elif what == action.DESTROY:
            live -= size
        peak = max(peak, live)
    return peak
