"""Clocks, power, temperature and slowdown reasons of the GPU a stress probe loads, sampled while it runs. No torch.

The one reader is the vendor binding (rocmcheck/facts/bindings.py: NVML or amdsmi), opened once per probe: its
reading() gives power, temperature and clocks, its health() the clock-event (throttle) reasons. Which binding GPU
is torch's device is matched by PCI address, else by index when both list the same number of GPUs.
slowdown() is the rule that says a sample shows the GPU slowed by heat or power hardware (pure)."""

from __future__ import annotations

from typing import Any, Callable

from rocmcheck.facts.parsers.gpu_health import NVML_REASONS_SLOWDOWN, describe_reasons
from rocmcheck.facts.parsers.links import normal_bus_id

# amdsmi's gpu_metrics throttle_status values that mean "not throttled" (the doctor's health.throttle reads the
# same field the same way).
AMDSMI_UNTHROTTLED = (0, False, "UNTHROTTLED")


class Telemetry:
    """One GPU of an open binding. sample() never raises: a field the GPU does not report is None."""

    def __init__(self, binding: Any, index: int, matched_by: str) -> None:
        self.binding, self.index, self.matched_by = binding, index, matched_by

    @property
    def source(self) -> str:
        return str(getattr(self.binding, "name", "binding"))

    def sample(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            r = self.binding.reading(self.index)
            out.update(power_w=r.power_w, temp_c=r.temp_c, sm_clock_mhz=r.sm_clock_mhz,
                       mem_clock_mhz=r.mem_clock_mhz)
        except Exception:  # noqa: BLE001 - a reading that fails is not known; the stress goes on
            pass
        try:
            health = self.binding.health(self.binding.handles[self.index]) or {}
        except Exception:  # noqa: BLE001
            health = {}
        if isinstance(health.get("clock_event_reasons"), int):
            out["clock_event_reasons"] = health["clock_event_reasons"]
        if "throttle_status" in health and health["throttle_status"] is not None:
            out["throttle_status"] = health["throttle_status"]
        return out

    def close(self) -> None:
        try:
            self.binding.close()
        except Exception:  # noqa: BLE001
            pass


def match_index(binding: Any, bus_id: str | None, torch_count: int) -> tuple[int | None, str]:
    """(the binding's index of torch's device, how it was matched)."""
    if bus_id:
        for i, handle in enumerate(binding.handles):
            try:
                theirs = normal_bus_id((binding.health(handle) or {}).get("bus_id"))
            except Exception:  # noqa: BLE001
                theirs = None
            if theirs == bus_id:
                return i, "pci address"
    if len(binding.handles) == torch_count and torch_count:
        return 0, "position"
    return None, f"the binding lists {len(binding.handles)} GPUs, torch sees {torch_count}, no PCI address matched"


def open_telemetry(vendor: str, bus_id: str | None, torch_count: int,
                   opener: Callable[[], Any] | None = None) -> tuple[Telemetry | None, str]:
    """(the device's telemetry, "") or (None, why not). opener: the binding's open() (default: by vendor)."""
    from rocmcheck.facts.bindings import Amdsmi, BindingUnavailable, Nvml

    if opener is None:
        opener = {"nvidia": Nvml.open, "amd": Amdsmi.open}.get(vendor)
    if opener is None:
        return None, f"no vendor binding for {vendor or 'this device'}"
    try:
        binding = opener()
    except BindingUnavailable as exc:
        return None, str(exc)
    index, how = match_index(binding, bus_id, torch_count)
    if index is None:
        binding.close()
        return None, how
    return Telemetry(binding, index, how), ""


def slowdown(sample: dict[str, Any]) -> list[str]:
    """The heat / power-hardware slowdown reasons a sample shows (NVML's clock-event bits, amdsmi's throttle
    status); [] when none. The software power cap a GPU at full load sits at is not one of them."""
    reasons = sample.get("clock_event_reasons")
    found = describe_reasons(reasons & NVML_REASONS_SLOWDOWN) if isinstance(reasons, int) else []
    status = sample.get("throttle_status")
    if status is not None and status not in AMDSMI_UNTHROTTLED:
        found.append(f"amdsmi throttle status {status}")
    return found
