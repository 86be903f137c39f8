"""The GPU probe child: `python -m rocmcheck.probes.child --request-file FILE` (rocmcheck/child.py). Imports torch
once, reports the devices, then runs the planned probes in sequence, one event per probe (protocol.py), each with
the runner its definition names (rocmcheck/probes/catalog). A probe given a duration (level 3) gets it in its
RunOptions; a probe that reports progress does so through RunOptions.note, sent as a "note" event.

Each probe runs under faulthandler's watchdog: past its own time limit the child dumps the stuck Python
stack to stderr and exits, so the parent can name the probe that hung and go on with the rest. The watchdog
is a C thread, so it fires even when a kernel launch or a compiler call holds the GIL.
Anything a library prints (DeepSpeed logs on stdout, ninja, HIP runtime) goes to stderr (the channel)."""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Any, Callable

from rocmcheck.child import Channel, leave, open_channel, read_request, wait_for_word, watchdog
from rocmcheck.facts.torch_devices import describe_devices
from rocmcheck.probes.catalog import BY_NAME
from rocmcheck.probes.spec import ProbeSkip, RunOptions

CPU_DEVICE = {"index": 0, "name": "CPU (test mode)", "arch": "", "total_bytes": 0}


def device_report(torch: Any, cpu: bool) -> dict[str, Any]:
    """The "device" event's fields: torch's build and its GPUs (rocmcheck.facts.torch_devices), or why there are
    none."""
    info: dict[str, Any] = {"torch": torch.__version__, "hip": torch.version.hip, "cuda": torch.version.cuda,
                            "count": 0, "devices": []}
    if cpu:
        info.update(available=True, cpu=True, count=1, devices=[dict(CPU_DEVICE)])
        return info
    devices = describe_devices(torch)
    if not devices:
        if torch.version.hip is None and torch.version.cuda is None:
            reason = f"no GPU: torch {torch.__version__} is a CPU-only build"
        else:
            runtime = f"HIP {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}"
            reason = f"no GPU visible: torch {torch.__version__} ({runtime}) reports torch.cuda.is_available() False"
        info.update(available=False, reason=reason)
        return info
    info.update(available=True, count=len(devices), devices=devices)
    return info


def start_torch(channel: Channel, cpu: bool) -> Any:
    """Import torch and send the "device" event. None, after a "done" event, when torch cannot be imported or
    there is no device to run on: the child then has nothing more to say."""
    try:
        import torch
    except Exception as exc:
        channel.emit("device", available=False, reason=f"torch cannot be imported: {type(exc).__name__}: {exc}")
        channel.emit("done")
        return None
    info = device_report(torch, cpu)
    channel.emit("device", **info)
    if not info["available"]:
        channel.emit("done")
        return None
    return torch


def run_probe(name: str, fn: Callable[[], dict[str, Any]] | None, timeout_s: float, channel: Channel, torch) -> None:
    channel.emit("start", probe=name)
    event: dict[str, Any] = {"probe": name, "data": {}}
    t0 = time.perf_counter()
    with watchdog(timeout_s):
        try:
            if fn is None:
                raise ProbeSkip("not available in this mode")
            event.update(outcome="ok", data=fn())
        except ProbeSkip as skip:
            event.update(outcome="skip", reason=str(skip))
        except Exception as exc:  # a machine problem (HIP error, OOM, missing kernel) becomes a verdict
            lines = str(exc).strip().splitlines()
            event.update(outcome="error", error=f"{type(exc).__name__}: {lines[0][:400] if lines else ''}",
                         traceback=traceback.format_exc().strip().splitlines()[-8:])
    event["seconds"] = round(time.perf_counter() - t0, 3)
    channel.emit("result", **event)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _bound(name: str, device: Any, options: RunOptions, cpu: bool) -> Callable[[], dict[str, Any]] | None:
    probe = BY_NAME.get(name)
    runner = probe.runner(cpu) if probe is not None else None
    return None if runner is None else (lambda: runner(device, options))


def probe_options(base: RunOptions, name: str, durations: dict[str, Any], channel: Channel) -> RunOptions:
    """The options one probe runs with: its duration when it has one, and its note line to the parent."""
    duration = durations.get(name)
    return dataclasses.replace(
        base, duration_s=float(duration) if isinstance(duration, (int, float)) else None,
        note=lambda text: channel.emit("note", probe=name, text=" ".join(str(text).split())[:300]))


def main(argv: list[str] | None = None) -> int:
    """Request: {"probes": [[name, timeout_s], ...], "durations": {name: s}, "allow_build": bool, "cpu": bool,
    "init_timeout_s": s}, and for a child started ahead "held_s": after the device event it waits up to that long
    for the parent's word on stdin (rocmcheck/child.py, wait_for_word), and leaves without one."""
    plan = read_request(argv, prog="python -m rocmcheck.probes.child")
    channel = open_channel()
    cpu = bool(plan.get("cpu"))
    with watchdog(float(plan.get("init_timeout_s", 60))):
        torch = start_torch(channel, cpu)
    if torch is None:
        return 0
    held_s = plan.get("held_s")
    if isinstance(held_s, (int, float)) and wait_for_word(float(held_s)) is None:
        channel.emit("done")
        return 0
    device = torch.device("cpu") if cpu else torch.device("cuda", 0)
    options = RunOptions(allow_build=bool(plan.get("allow_build")))
    durations = plan.get("durations") if isinstance(plan.get("durations"), dict) else {}
    for name, timeout_s in plan.get("probes", []):
        own = probe_options(options, name, durations, channel)
        run_probe(name, _bound(name, device, own, cpu), float(timeout_s), channel, torch)
    channel.emit("done")
    return 0


if __name__ == "__main__":
    leave(main())
