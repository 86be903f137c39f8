"""The link between each pair of GPUs, as the topology tool names it, mapped onto torch's device indices; and the
PCIe figures a fabric link is told apart by. No torch here: the link probes' children call read_topology() before
they measure, and their judges read the result from the child's data.

The tool is run through rocmcheck.runner and parsed by rocmcheck/facts/parsers/links.py: `nvidia-smi topo -m` on
NVIDIA, `amd-smi topology` on AMD (then `rocm-smi --showtopo` for ROCm releases without amd-smi).

Mapping the tool's GPUs onto torch's: by PCI address where both name one (amd-smi; torch when it reports a
device's PCI address); else by position, but only when the tool lists exactly as many GPUs as torch sees and no
visibility variable renumbers torch's (nvidia-smi numbers GPUs in PCI order, as CUDA does for identical GPUs).
Otherwise the pair's link is not known."""

from __future__ import annotations

from typing import Any, Mapping

from rocmcheck.facts.parsers.links import normal_bus_id, parse_amd_smi_topology, parse_nvidia_topo, parse_rocm_smi_topo
from rocmcheck.facts.tools import find_tool
from rocmcheck.runner import run_command

TOPOLOGY_TIMEOUT_S = 15.0
VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# PCIe per direction, after 128b/130b encoding (PCI-SIG: 16 GT/s x16 = 31.5 GB/s, 32 GT/s x16 = 63 GB/s). A rate a
# PCIe link cannot carry shows the pair uses its fabric; a fabric pair at these rates is running over PCIe/host.
PCIE_GEN4_X16_GBPS = 31.5
PCIE_GEN5_X16_GBPS = 63.0

LINK_NAMES = {"nvlink": "NVLink", "xgmi": "XGMI", "pcie": "PCIe"}  # as a person reads them

_TOOLS = {
    "nvidia": (("nvidia-smi", ["topo", "-m"], parse_nvidia_topo),),
    "amd": (("amd-smi", ["topology"], parse_amd_smi_topology), ("rocm-smi", ["--showtopo"], parse_rocm_smi_topo)),
}


def read_topology(vendor: str, env: Mapping[str, str] | None = None,
                  timeout_s: float = TOPOLOGY_TIMEOUT_S) -> dict[str, Any]:
    """{"known": True, "topology": Topology.to_dict()} from the first tool that names the links, or
    {"known": False, "why": ...}. Never raises."""
    why = []
    for name, args, parse in _TOOLS.get(vendor, ()):
        path = find_tool(name, env)
        if path is None:
            why.append(f"{name} not found")
            continue
        res = run_command([path, *args], timeout=timeout_s, env=dict(env) if env is not None else None)
        if not res.ok:
            why.append(f"{name} {' '.join(args)}: {res.describe_failure()}")
            continue
        topo = parse(res.stdout)
        if topo.kinds:
            return {"known": True, "topology": topo.to_dict()}
        why.append(f"{name} {' '.join(args)} named no GPU pair")
    return {"known": False, "why": "; ".join(why) or f"no topology tool for vendor {vendor or 'unknown'}"}


def torch_bus_id(props: Any) -> str | None:
    """A device's PCI address from torch's device properties ("0000:1b:00.0"), when this torch reports it."""
    bus, device, domain = (getattr(props, k, None) for k in ("pci_bus_id", "pci_device_id", "pci_domain_id"))
    if not all(isinstance(v, int) for v in (bus, device, domain)):
        return None
    return normal_bus_id(f"{domain:04x}:{bus:02x}:{device:02x}.0")


def pair_kinds(read: Mapping[str, Any], torch_bus_ids: list[str | None],
               env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """("i-j" in torch's indices -> nvlink | xgmi | pcie, how the GPUs were matched: "pci address" | "position" |
    why not known) from read_topology()'s answer. Pure."""
    if not read.get("known"):
        return {}, str(read.get("why") or "no topology read")
    topo: dict[str, Any] = read["topology"]
    tool_ids = [normal_bus_id(b) for b in topo.get("bus_ids") or []]
    count = len(torch_bus_ids)
    index: dict[int, int] = {}
    how = "pci address"
    if tool_ids and any(tool_ids) and all(torch_bus_ids):
        where = {b: i for i, b in enumerate(tool_ids) if b}
        index = {t: where[b] for t, b in enumerate(torch_bus_ids) if b in where}
    if not index:
        renumbered = [v for v in VISIBILITY_VARS if env.get(v)]
        if len(topo.get("gpus") or []) != count:
            return {}, f"{topo.get('source')} lists {len(topo.get('gpus') or [])} GPUs, torch sees {count}"
        if renumbered:
            return {}, f"{', '.join(renumbered)} renumbers torch's GPUs and the tool names no PCI addresses"
        index, how = {i: i for i in range(count)}, "position"
    kinds = {}
    for a, ta in index.items():
        for b, tb in index.items():
            pair = (topo.get("pairs") or {}).get(f"{ta}-{tb}")
            if a != b and isinstance(pair, dict) and pair.get("kind"):
                kinds[f"{a}-{b}"] = pair["kind"]
    return kinds, how


def topology_of(vendor: str, torch_bus_ids: list[str | None], env: Mapping[str, str]) -> dict[str, Any]:
    """What a link probe's child reports: the tool's answer and the kinds in torch's indices."""
    read = read_topology(vendor, env)
    kinds, how = pair_kinds(read, torch_bus_ids, env)
    return {"source": (read.get("topology") or {}).get("source"), "kinds": kinds, "matched_by": how,
            "why_not_known": None if kinds else how}


def slowest_kind(kinds: Mapping[str, str], gpus: list[int]) -> str | None:
    """The slowest link among every pair of `gpus` (a ring over them is as fast as its slowest hop); None when a
    pair's link is not known."""
    order = {"pcie": 0, "xgmi": 1, "nvlink": 2}
    seen = []
    for a in gpus:
        for b in gpus:
            if a != b:
                kind = kinds.get(f"{a}-{b}")
                if kind not in order:
                    return None
                seen.append(kind)
    return min(seen, key=order.__getitem__) if seen else None
