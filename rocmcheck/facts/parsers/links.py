"""GPU-to-GPU link types from the topology tools: which pairs of GPUs talk over NVLink, XGMI or PCIe.

Pure and total: any text gives a Topology (possibly with no GPUs), never an exception. Three outputs:

- `nvidia-smi topo -m`: a matrix whose first columns are GPU0..GPUn (then NICs, then "CPU Affinity", "NUMA
  Affinity", ...); a cell is X (itself), NV<n> (n bonded NVLinks), or a PCIe path: PIX, PXB, PHB, NODE, SYS. The
  header row may carry terminal underline codes. The rows are in nvidia-smi's index order (PCI bus order).
- `amd-smi topology`: sections "ACCESS TABLE:", "WEIGHT TABLE:", "HOPS TABLE:", "LINK TYPE TABLE:", ... each a
  matrix whose rows and columns are the GPUs' PCI addresses; a link type cell is SELF, XGMI or PCIE.
- `rocm-smi --showtopo`: blocks "Weight between two GPUs", "Hops between two GPUs", "Link Type between two GPUs";
  rows and columns GPU0..GPUn, a link type cell 0 (itself), XGMI or PCIE.

Every PCIe path counts as one kind, "pcie": what a busbw or copy rate is judged against is whether the pair has a
GPU fabric (NVLink, XGMI) or not. The tool's own word for each pair is kept beside it ("NV18", "SYS").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.facts.parsers._text import clean_lines

NVLINK, XGMI, PCIE = "nvlink", "xgmi", "pcie"
LINK_KINDS = (NVLINK, XGMI, PCIE)
# nvidia-smi topo -m's PCIe path words (its legend): at most one bridge, several bridges, a host bridge, between
# host bridges of one NUMA node, across NUMA nodes.
NVIDIA_PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")
MAX_GPUS = 256  # more columns than any node has: a longer header is not a topology matrix

_NVLINK = re.compile(r"^NV(\d+)$")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_BDF = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_AMD_SECTION = re.compile(r"^\s*([A-Z][A-Z0-9 /-]*TABLE):\s*$")
_ROCM_SMI_BLOCK = re.compile(r"^=+\s*(.*?)\s*=+$")


@dataclass
class Topology:
    """GPUs in the tool's order (index i is the tool's GPU i) and the link kind of each pair that the tool named."""

    source: str  # "nvidia-smi topo -m" | "amd-smi topology" | "rocm-smi --showtopo"
    gpus: list[str] = field(default_factory=list)  # the tool's labels: "GPU0" or "0000:0d:00.0"
    bus_ids: list[str | None] = field(default_factory=list)  # normalised PCI addresses, when the tool names them
    kinds: dict[tuple[int, int], str] = field(default_factory=dict)  # (i, j) -> nvlink | xgmi | pcie
    words: dict[tuple[int, int], str] = field(default_factory=dict)  # (i, j) -> the tool's word ("NV18", "SYS")

    def kind(self, i: int, j: int) -> str | None:
        return self.kinds.get((i, j))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: pairs as "i-j"."""
        return {"source": self.source, "gpus": list(self.gpus), "bus_ids": list(self.bus_ids),
                "pairs": {f"{i}-{j}": {"kind": k, "word": self.words.get((i, j))}
                          for (i, j), k in sorted(self.kinds.items())}}


def normal_bus_id(text: Any) -> str | None:
    """"0000:1b:00.0" from NVML's "00000000:1B:00.0", amd-smi's "0000:1b:00.0" or a bare "1b:00.0"."""
    if not isinstance(text, str) or not _BDF.match(text.strip()):
        return None
    parts = text.strip().lower().split(":")
    domain = parts[0][-4:] if len(parts) == 3 else "0000"
    return f"{domain}:{parts[-2]}:{parts[-1]}"


def kind_of(word: str) -> str | None:
    """The link kind a tool's cell word names; None for the GPU itself or an unknown word."""
    word = word.strip().upper()
    if _NVLINK.match(word):
        return NVLINK
    if word == "XGMI":
        return XGMI
    if word in ("PCIE", *NVIDIA_PCIE_PATHS):
        return PCIE
    return None


def parse_nvidia_topo(text: Any) -> Topology:
    """`nvidia-smi topo -m`."""
    topo = Topology("nvidia-smi topo -m")
    lines = [line for line in clean_lines(text) if line.strip()]
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in lines:
        if line.strip().startswith("Legend"):
            break
        tokens = line.split()
        if header is None:
            # The header starts "GPU0 GPU1 ..." (or "GPU0 CPU Affinity" on one GPU); a data row "GPU0 X NV18".
            if tokens and _GPU_LABEL.match(tokens[0]) and (len(tokens) < 2 or (tokens[1] != "X"
                                                                               and kind_of(tokens[1]) is None)):
                header = tokens
            continue
        if tokens and _GPU_LABEL.match(tokens[0]):
            rows.append(tokens)
    if header is None:
        return topo
    columns = []
    for token in header:
        if token == "CPU" or len(columns) >= MAX_GPUS:  # "CPU Affinity": the device columns have ended
            break
        columns.append(token)
    gpu_columns = [c for c in columns if _GPU_LABEL.match(c)]
    topo.gpus = gpu_columns
    topo.bus_ids = [None] * len(gpu_columns)
    index = {label: i for i, label in enumerate(gpu_columns)}
    for tokens in rows:
        src = index.get(tokens[0])
        if src is None:
            continue
        for col, word in zip(columns, tokens[1:1 + len(columns)]):
            dst = index.get(col)
            kind = kind_of(word)
            if dst is not None and dst != src and kind is not None:
                topo.kinds[(src, dst)] = kind
                topo.words[(src, dst)] = word
    return topo


def _matrix(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """(column labels, rows of [row label, cells...]) of one table: the first line is the header."""
    if not lines:
        return [], []
    header = lines[0].split()[:MAX_GPUS]
    rows = [line.split() for line in lines[1:] if line.split()]
    return header, rows


def _fill(topo: Topology, header: list[str], rows: list[list[str]]) -> None:
    topo.gpus = header
    index = {label: i for i, label in enumerate(header)}
    for tokens in rows:
        src = index.get(tokens[0])
        if src is None:
            continue
        for dst, word in enumerate(tokens[1:1 + len(header)]):
            kind = kind_of(word)
            if dst != src and kind is not None:
                topo.kinds[(src, dst)] = kind
                topo.words[(src, dst)] = word


def parse_amd_smi_topology(text: Any) -> Topology:
    """`amd-smi topology` (its LINK TYPE TABLE)."""
    topo = Topology("amd-smi topology")
    section: str | None = None
    table: list[str] = []
    for line in clean_lines(text):
        m = _AMD_SECTION.match(line)
        if m:
            if section == "LINK TYPE TABLE":
                break
            section, table = m.group(1), []
            continue
        if section == "LINK TYPE TABLE" and line.strip():
            if line.strip().startswith("Legend"):
                break
            table.append(line)
    header, rows = _matrix(table)
    if not header or not all(_BDF.match(h) for h in header):
        return topo
    _fill(topo, header, rows)
    topo.bus_ids = [normal_bus_id(h) for h in header]
    return topo


def parse_rocm_smi_topo(text: Any) -> Topology:
    """`rocm-smi --showtopo` (its "Link Type between two GPUs" block)."""
    topo = Topology("rocm-smi --showtopo")
    inside = False
    table: list[str] = []
    for line in clean_lines(text):
        m = _ROCM_SMI_BLOCK.match(line.strip())
        if m:
            if inside:
                break
            inside = m.group(1).lower().startswith("link type between two gpus")
            continue
        if inside and line.strip():
            table.append(line)
    header, rows = _matrix(table)
    if not header or not all(_GPU_LABEL.match(h) for h in header):
        return topo
    _fill(topo, header, rows)
    topo.bus_ids = [None] * len(header)
    return topo
