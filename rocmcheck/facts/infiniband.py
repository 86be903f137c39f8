"""The node's RDMA devices (HCAs) as the kernel lists them in /sys/class/infiniband: each port's state, link layer
(InfiniBand, or Ethernet for RoCE), rate, and its GID table with each entry's type and network device. The
collective libraries pick their NICs and GID from these (NCCL_IB_HCA, NCCL_IB_GID_INDEX; RCCL reads the same
variables), so the checks judge those variables against them.

The files, as the kernel's drivers/infiniband/core/sysfs.c writes them (and `ibstatus` / `show_gids` print them):
  <hca>/ports/<n>/state            "4: ACTIVE" (1: DOWN, 2: INIT, 3: ARMED, 4: ACTIVE, 5: ACTIVE_DEFER)
  <hca>/ports/<n>/phys_state       "5: LinkUp"
  <hca>/ports/<n>/rate             "100 Gb/sec (4X EDR)"
  <hca>/ports/<n>/link_layer       "InfiniBand" | "Ethernet"
  <hca>/ports/<n>/gids/<k>         "fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8"; an unused entry is all zeros
  <hca>/ports/<n>/gid_attrs/types/<k>  "IB/RoCE v1" | "RoCE v2" (reading an unused entry's fails: EINVAL)
  <hca>/ports/<n>/gid_attrs/ndevs/<k>  the network device of a RoCE entry ("ens1f0")
Everything is read through rocmcheck.safe.files.read_head: a missing or unreadable file is None, never an error.
The root is a parameter, so tests plant a tree."""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any

from rocmcheck.safe.files import read_head

SYSFS_INFINIBAND = "/sys/class/infiniband"
MAX_HCAS = 64  # more RDMA devices than this is not one node (a host exposing every SR-IOV VF stops here)
MAX_PORTS = 4
# GID table length: 256 on ConnectX (ibv_devinfo's gid_tbl_len); only populated entries are kept.
MAX_GIDS = 256
LINE = 128
ROCE_V2 = "RoCE v2"
ROCE_V1 = "IB/RoCE v1"
ACTIVE = "ACTIVE"
ETHERNET = "Ethernet"
_STATE = re.compile(r"^\s*(\d+)\s*:\s*(\S+)")
_ZERO_GID = re.compile(r"^[0:]+$")


def _line(path: str) -> str | None:
    text = read_head(path, LINE)
    return text.strip() if text is not None else None


def _numbered(folder: str, limit: int) -> list[int]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit() and int(n) < limit)


def gid_family(gid: str) -> str | None:
    """"ipv4" for an IPv4-mapped GID (::ffff:a.b.c.d, what RoCE v2 routes over IPv4), "ipv6-link-local" for fe80::/10,
    "ipv6" for another; None when it is no address. Pure; never raises."""
    try:
        address = ipaddress.IPv6Address(str(gid).strip())
    except ValueError:
        return None
    if address.ipv4_mapped is not None:
        return "ipv4"
    return "ipv6-link-local" if address.is_link_local else "ipv6"


def ipv4_of(gid: str) -> str | None:
    try:
        mapped = ipaddress.IPv6Address(str(gid).strip()).ipv4_mapped
    except ValueError:
        return None
    return str(mapped) if mapped is not None else None


def _gids(port: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for k in _numbered(os.path.join(port, "gids"), MAX_GIDS):
        gid = _line(os.path.join(port, "gids", str(k)))
        if not gid or _ZERO_GID.match(gid):
            continue  # an unused entry: its type cannot be read
        out[str(k)] = {"gid": gid, "type": _line(os.path.join(port, "gid_attrs", "types", str(k))),
                       "ndev": _line(os.path.join(port, "gid_attrs", "ndevs", str(k))),
                       "family": gid_family(gid)}
    return out


def _port(port: str) -> dict[str, Any]:
    state = _line(os.path.join(port, "state"))
    found = _STATE.match(state or "")
    return {"state": found.group(2) if found else state, "phys_state": _line(os.path.join(port, "phys_state")),
            "rate": _line(os.path.join(port, "rate")), "link_layer": _line(os.path.join(port, "link_layer")),
            "gids": _gids(port)}


def read_infiniband(root: str = SYSFS_INFINIBAND) -> dict[str, Any]:
    """{"present": whether the class folder exists, "hcas": {hca: {"ports": {port: {state, phys_state, rate,
    link_layer, gids: {index: {gid, type, ndev, family}}}}}}}. No folder (no RDMA stack loaded) is no HCA."""
    try:
        names = sorted(os.listdir(root))[:MAX_HCAS]
    except OSError:
        return {"present": False, "hcas": {}}
    hcas: dict[str, Any] = {}
    for name in names:
        ports = os.path.join(root, name, "ports")
        hcas[name] = {"ports": {str(n): _port(os.path.join(ports, str(n)))
                                for n in _numbered(ports, MAX_PORTS + 1) if n > 0}}
    return {"present": True, "hcas": hcas}
