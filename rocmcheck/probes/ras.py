"""GPU memory-error counters read before and after a stress probe: any counter that grew is a fail.

The counters are the ones the doctor's node-health facts read, through the same readers: the vendor bindings
(rocmcheck/facts/bindings.py: NVML's ECC counts, retired pages and remapped rows; amdsmi's ECC counts and bad
pages) and amdgpu's RAS files in sysfs (rocmcheck/facts/health.py, parsed by facts/parsers/gpu_health.py). Each
GPU is keyed by its PCI address, so before and after match whatever order a reader lists them in.

read_counters() runs in the probe child (file reads and binding calls, no torch); increases() is pure."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from rocmcheck.facts.parsers.gpu_health import count_bad_pages, parse_ras_count
from rocmcheck.facts.parsers.links import normal_bus_id

Counters = dict[str, dict[str, int | None]]  # PCI address -> counter name -> value (None: not readable)

# The binding fields that count errors (names as rocmcheck/facts/bindings.py's health() gives them).
NVML_COUNTERS = ("ecc_uncorrected_volatile", "ecc_corrected_volatile", "ecc_uncorrected_aggregate",
                 "ecc_corrected_aggregate")
AMDSMI_COUNTERS = ("ecc_correctable", "ecc_uncorrectable", "ecc_deferred", "bad_pages")
# remapped_rows is NVML's [corrected, uncorrected, pending, failure].
REMAPPED_ROWS = ("remapped_rows_corrected", "remapped_rows_uncorrected", "remapped_rows_pending",
                 "remapped_rows_failure")


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def from_binding_health(health: Mapping[str, Any]) -> dict[str, int | None]:
    """The counters of one GPU from a binding's health() dict (NVML or amdsmi)."""
    out = {k: _int(health.get(k)) for k in (*NVML_COUNTERS, *AMDSMI_COUNTERS) if k in health}
    retired = health.get("retired_pages")
    if isinstance(retired, dict):
        out.update({f"retired_pages_{k}": _int(v) for k, v in retired.items()})
    rows = health.get("remapped_rows")
    if isinstance(rows, list) and len(rows) >= len(REMAPPED_ROWS):
        out.update({k: _int(v) for k, v in zip(REMAPPED_ROWS, rows)})
    return out


def from_sysfs_gpu(entry: Mapping[str, Any]) -> dict[str, int | None]:
    """The counters of one AMD GPU from facts/health.py's sysfs entry: RAS ue/ce summed over the blocks, and the
    retired pages."""
    ue = ce = None
    for text in (entry.get("ras") or {}).values():
        u, c = parse_ras_count(text)
        ue = (ue or 0) + u if u is not None else ue
        ce = (ce or 0) + c if c is not None else ce
    out: dict[str, int | None] = {}
    if ue is not None or ce is not None:
        out.update(ras_uncorrectable=ue, ras_correctable=ce)
    bad = count_bad_pages(entry.get("bad_pages"))
    if bad is not None:
        out["ras_bad_pages"] = bad
    return out


def _binding_counters(opener: Callable[[], Any]) -> Counters:
    from rocmcheck.facts.bindings import BindingUnavailable, attempt

    try:
        binding = opener()
    except BindingUnavailable:
        return {}
    out: Counters = {}
    try:
        for i, handle in enumerate(binding.handles):
            health = attempt(binding.health, handle) or {}
            key = normal_bus_id(health.get("bus_id")) or f"{binding.name} GPU {i}"
            out[key] = from_binding_health(health)
    finally:
        binding.close()
    return out


def read_counters(vendor: str, sysfs_root: str = "/sys", openers: Mapping[str, Callable[[], Any]] | None = None
                  ) -> Counters:
    """Every GPU's error counters now: the vendor's binding, then (AMD) the RAS sysfs files. Never raises;
    a GPU or counter that cannot be read is left out (not known)."""
    from rocmcheck.facts.bindings import Amdsmi, Nvml
    from rocmcheck.facts.health import node_health

    chosen = dict(openers) if openers is not None else {"nvidia": Nvml.open, "amd": Amdsmi.open}
    counters: Counters = {}
    opener = chosen.get(vendor)
    if opener is not None:
        counters.update(_binding_counters(opener))
    if vendor == "amd":
        try:
            gpus = node_health(dict(os.environ), root=sysfs_root)["pci_gpus"]
        except Exception:  # noqa: BLE001 - a sysfs oddity must not cost the probe its result
            gpus = []
        for entry in gpus:
            key = normal_bus_id(entry.get("bdf")) or str(entry.get("bdf"))
            counters.setdefault(key, {}).update(from_sysfs_gpu(entry))
    return counters


def increases(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per counter that grew between the two readings ("0000:1b:00.0: ecc_corrected_volatile 0 -> 3").
    Pure; a counter missing from either reading is not compared."""
    grew = []
    for gpu, now in after.items():
        then = before.get(gpu) or {}
        for name, value in now.items():
            old = then.get(name)
            if isinstance(value, int) and isinstance(old, int) and value > old:
                grew.append(f"{gpu}: {name} {old} -> {value}")
    return grew


def compared(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]) -> int:
    """How many counters were read both times (0: the check could not be made)."""
    return sum(1 for gpu, now in after.items() for name, value in now.items()
               if isinstance(value, int) and isinstance((before.get(gpu) or {}).get(name), int))


def ras_lines(data: Mapping[str, Any]) -> tuple[list[str], str]:
    """(the counters that grew, one evidence line) from a stress probe's "ras" data ({"before", "after"})."""
    ras = data.get("ras") or {}
    before, after = ras.get("before") or {}, ras.get("after") or {}
    grew = increases(before, after)
    n = compared(before, after)
    if grew:
        return grew, f"memory-error counters grew during the run: {'; '.join(grew[:4])}"
    if not n:
        return [], "memory-error counters: not readable here (no binding or RAS sysfs), not compared"
    return [], f"memory-error counters: {n} compared before and after, none grew"


def memory_errors_fix(vendor: str):
    """Read the counters that grew (harmless); what to do with the node goes in the why."""
    from rocmcheck.fixes import shell

    why = ("new memory errors appeared under load: drain the node; once the GPU is idle a reset (or reboot) "
           "retires the bad pages; if uncorrectable errors come back, contact the vendor (RMA)")
    if vendor == "amd":
        return shell("amd-smi metric --ecc; amd-smi bad-pages", why)
    return shell("nvidia-smi -q -d ECC,ROW_REMAPPER", why)
