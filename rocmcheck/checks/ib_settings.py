"""NCCL_IB_GID_INDEX and NCCL_IB_HCA (NCCL's variables; RCCL reads the same) against the node's RDMA devices and
their GID tables, as rocmcheck/facts/infiniband.py reads them from /sys/class/infiniband. Pure functions of the
variable's value and that record; env.nccl_ib (rocmcheck/checks/runtime_env.py) calls them, on any vendor's node.

The GID index. On a RoCE link (link layer Ethernet) every message carries the GID the index picks, so it must be a
populated entry of type RoCE v2: RoCE v1 frames are not routed over IP, and an empty entry fails the connection.
The common choice is the IPv4-mapped RoCE v2 entry (::ffff:a.b.c.d), which is index 3 where each interface has one
IPv4 address (entries 0/1 the link-local address as v1/v2, 2/3 the IPv4 address as v1/v2) but moves with more
addresses, IPv6, or a link toggle ("RoCE and GID index 3", NVIDIA developer forum,
https://forums.developer.nvidia.com/t/configure-cx-7-400ge-not-to-change-gid-index/297832). A link-local RoCE v2
entry (fe80::) reaches only its own L2 segment. On an InfiniBand link the index is not needed.

The HCA list (NCCL's documented syntax): comma-separated names, each a prefix ("mlx5" takes mlx5_0, mlx5_1, ...)
unless the list starts with "=" (exact names), with an optional ":port"; a leading "^" excludes the names instead.
The library uses only ports that are ACTIVE: a name that matches no device, or only ports that are not ACTIVE,
leaves that NIC out of the job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rocmcheck.facts.infiniband import ACTIVE, ETHERNET, ROCE_V2, ipv4_of

GID_FIX_COMMAND = "grep -H . /sys/class/infiniband/*/ports/*/gid_attrs/types/*"
HCA_FIX_COMMAND = "grep -H . /sys/class/infiniband/*/ports/*/state"


@dataclass(frozen=True)
class Port:
    hca: str
    port: str
    record: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.hca} port {self.port}"

    @property
    def active(self) -> bool:
        return self.record.get("state") == ACTIVE

    @property
    def roce(self) -> bool:
        return self.record.get("link_layer") == ETHERNET

    def gids(self) -> dict[str, dict[str, Any]]:
        gids = self.record.get("gids")  # from a bundle: whatever it holds, only entries that are objects count
        return {str(k): v for k, v in gids.items() if isinstance(v, dict)} if isinstance(gids, dict) else {}

    def ipv4_roce_v2(self) -> str | None:
        """The index of this port's first IPv4-mapped RoCE v2 entry, or None."""
        found = [k for k, g in self.gids().items() if g.get("type") == ROCE_V2 and g.get("family") == "ipv4"]
        return min(found, key=_number_order) if found else None


def _number_order(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() and len(key) < 10 else (1 << 40, key)


def ports(ib: dict[str, Any]) -> list[Port]:
    hcas = ib.get("hcas") if isinstance(ib, dict) else None
    out = []
    for hca, rec in sorted((hcas if isinstance(hcas, dict) else {}).items()):
        pmap = rec.get("ports") if isinstance(rec, dict) else None
        for port, prec in sorted((pmap if isinstance(pmap, dict) else {}).items(),
                                 key=lambda kv: _number_order(str(kv[0]))):
            if isinstance(prec, dict):
                out.append(Port(str(hca), str(port), prec))
    return out


def describe_port(p: Port) -> str:
    """"mlx5_0 port 1: ACTIVE, Ethernet (RoCE), 100 Gb/sec (4X EDR); IPv4 RoCE v2 GID at 5 (172.19.0.60)"."""
    rec = p.record
    layer = rec.get("link_layer") or "link layer unknown"
    text = f"{p.name}: {rec.get('state') or 'state unknown'}, {layer}{' (RoCE)' if p.roce else ''}, " \
           f"{rec.get('rate') or 'rate unknown'}"
    if p.roce:
        index = p.ipv4_roce_v2()
        gid = str(p.gids().get(index or "", {}).get("gid", ""))
        text += (f"; IPv4 RoCE v2 GID at {index} ({ipv4_of(gid)})" if index is not None else
                 f"; no IPv4 RoCE v2 GID among its {len(p.gids())} populated entries")
    return text


def _entry_text(index: str, g: dict[str, Any]) -> str:
    return f"GID {index} = {g.get('gid')} ({g.get('type') or 'type unknown'}" \
           f"{', ' + g['ndev'] if g.get('ndev') else ''})"


def gid_index_problem(value: str, ib: dict[str, Any]) -> str | None:
    """Why NCCL_IB_GID_INDEX=value is wrong on this node's RoCE ports, or None (right, or no RoCE port to judge)."""
    index = value.strip()
    if not index.lstrip("-").isdigit():
        return f"NCCL_IB_GID_INDEX={value} is not a number: the library ignores it"
    roce = [p for p in ports(ib) if p.roce and p.gids()]  # a table with no entry was not readable: not judged
    judged = [p for p in roce if p.active] or roce
    if index.startswith("-") or not judged:  # -1: the library picks one itself; InfiniBand links need none
        return None
    wrong = []
    for p in judged:
        g = p.gids().get(index)
        better = p.ipv4_roce_v2()
        hint = f" (its IPv4 RoCE v2 entry is {better})" if better is not None and better != index else ""
        if g is None:
            wrong.append(f"empty on {p.name}{hint}")
        elif g.get("type") != ROCE_V2:
            wrong.append(f"{_entry_text(index, g)} on {p.name}, not RoCE v2: RoCE v1 is not routed over IP{hint}")
        elif g.get("family") == "ipv6-link-local":
            wrong.append(f"{_entry_text(index, g)} on {p.name}, a link-local address that reaches only its own L2 "
                         f"segment{hint}")
    if not wrong:
        return None
    return f"NCCL_IB_GID_INDEX={index} is " + "; ".join(wrong)


def suggested_gid_index(ib: dict[str, Any]) -> str | None:
    """The IPv4-mapped RoCE v2 index, when every active RoCE port with a readable table has it at the same index."""
    found = {p.ipv4_roce_v2() for p in ports(ib) if p.roce and p.active and p.gids()}
    return found.pop() if len(found) == 1 and None not in found else None


def _parse_hca(value: str) -> tuple[bool, bool, list[tuple[str, str | None]]]:
    """(excluding, exact, [(name, port or None)]) from NCCL_IB_HCA's text."""
    text = value.strip()
    excluding = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    entries = []
    for item in text.lstrip("=").split(","):
        name, _, port = item.strip().partition(":")
        if name:
            entries.append((name, port or None))
    return excluding, exact, entries


def _matches(p: Port, name: str, port: str | None, exact: bool) -> bool:
    return (p.hca == name if exact else p.hca.startswith(name)) and (port is None or p.port == port)


def active_hcas(ib: dict[str, Any]) -> set[str]:
    """The node's RDMA devices with an ACTIVE port."""
    return {p.hca for p in ports(ib) if p.active}


def chosen_active_hcas(value: str, ib: dict[str, Any]) -> set[str]:
    """The devices with an ACTIVE port that NCCL_IB_HCA=value lets the library use."""
    excluding, exact, entries = _parse_hca(value)
    picked = {p.hca for p in ports(ib) if p.active and any(_matches(p, n, port, exact) for n, port in entries)}
    return active_hcas(ib) - picked if excluding else picked


def hca_problems(value: str, ib: dict[str, Any]) -> list[str]:
    """Each name of NCCL_IB_HCA=value that matches no RDMA device of this node, or only ports that are not ACTIVE.
    An exclusion list (^...) is not judged: leaving out a device that is not there costs nothing."""
    excluding, exact, entries = _parse_hca(value)
    if excluding or not entries:
        return []
    all_ports = ports(ib)
    hcas = ib.get("hcas") if isinstance(ib, dict) else None
    names = sorted({p.hca for p in all_ports} | {str(h) for h in (hcas if isinstance(hcas, dict) else {})})
    problems = []
    for name, port in entries:
        matched = [p for p in all_ports if _matches(p, name, port, exact)]
        what = f"{name}:{port}" if port else name
        if not matched:
            has = ", ".join(names) if names else "none"
            problems.append(f"{what} is not an RDMA device of this node (it has: {has})")
        elif not any(p.active for p in matched):
            states = ", ".join(f"{p.name} {p.record.get('state') or 'state unknown'}" for p in matched)
            problems.append(f"{what} has no ACTIVE port ({states})")
    return problems
