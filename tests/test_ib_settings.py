"""The RDMA devices and GID tables of /sys/class/infiniband (rocmcheck/facts/infiniband.py), and NCCL_IB_GID_INDEX /
NCCL_IB_HCA judged against them by env.nccl_ib (rocmcheck/checks/ib_settings.py) on the recorded 8 x MI300X and
8 x H100 machines. The sysfs trees are planted in tmp_path from real ibstatus / ibstat / show_gids / ibv_devinfo
outputs (tests/fixtures/infiniband)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest
from machines import amd_machine, verdicts
from test_checks_nvidia import nvidia_machine

from rocmcheck.facts.health import node_health
from rocmcheck.facts.infiniband import read_infiniband
from rocmcheck.result import Status

FIXTURES = Path(__file__).parent / "fixtures" / "infiniband"
STATES = {"Down": "1: DOWN", "Active": "4: ACTIVE"}  # ibstat's words as sysfs writes them (enum ib_port_state)
PHYS = {"Disabled": "3: Disabled", "LinkUp": "5: LinkUp"}
TYPES = {"v1": "IB/RoCE v1", "v2": "RoCE v2", "RoCE v1": "IB/RoCE v1", "RoCE v2": "RoCE v2"}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _plant_ports_from_ibstatus(root: Path) -> None:
    text = (FIXTURES / "ibstatus-roce-nccl-1866.txt").read_text()
    for section in text.split("Infiniband device ")[1:]:
        hca, port = re.match(r"'(\S+)' port (\d+) status:", section).groups()
        body = section.split("\n", 1)[1]
        fields = dict(re.findall(r"^\s+([a-z_ ]+):\s+(.+)$", body, re.M))
        base = root / hca / "ports" / port
        for name, key in (("state", "state"), ("phys_state", "phys state"), ("rate", "rate"),
                          ("link_layer", "link_layer")):
            _write(base / name, fields[key])


def _plant_ports_from_ibstat(root: Path) -> None:
    text = (FIXTURES / "ibstat-mlx4_0-rdma-core-847.txt").read_text()
    hca = re.search(r"CA '(\S+)'", text).group(1)
    for port, body in re.findall(r"Port (\d+):\n((?:\t\t.+\n?)+)", text):  # a port's lines: two tabs in
        fields = dict(re.findall(r"^\t\t([A-Za-z ]+): (.+)$", body, re.M))
        base = root / hca / "ports" / port
        _write(base / "state", STATES[fields["State"]])
        _write(base / "phys_state", PHYS[fields["Physical state"]])
        _write(base / "rate", fields["Rate"])
        _write(base / "link_layer", fields["Link layer"])


def _plant_gid(base: Path, index: int, gid: str, kind: str, ndev: str | None, table_len: int = 8) -> None:
    full = ipaddress.IPv6Address(gid).exploded  # sysfs writes the eight groups in full
    _write(base / "gids" / str(index), full)
    _write(base / "gid_attrs" / "types" / str(index), TYPES[kind])
    if ndev:
        _write(base / "gid_attrs" / "ndevs" / str(index), ndev)


def _plant_unused(base: Path, upto: int) -> None:
    for k in range(upto):  # the rest of the table: all zeros, no type (reading it fails with EINVAL)
        if not (base / "gids" / str(k)).exists():
            _write(base / "gids" / str(k), "0000:0000:0000:0000:0000:0000:0000:0000")


def _plant_show_gids(root: Path) -> None:
    for line in (FIXTURES / "show_gids-connectx6-ibm-spectrumscale.txt").read_text().splitlines()[2:]:
        parts = line.split()
        if len(parts) >= 6 and parts[0].startswith("mlx"):
            hca, port, index, gid, ver, ndev = parts[0], parts[1], int(parts[2]), parts[3], parts[-2], parts[-1]
            _plant_gid(root / hca / "ports" / port, index, gid, ver, ndev)
    _plant_unused(root / "mlx5_0" / "ports" / "1", 8)


def _plant_juniper_gids(root: Path) -> None:
    base = root / "mlx5_0" / "ports" / "1"
    for line in (FIXTURES / "ibv_devinfo-gids-mlx5_6-juniper.txt").read_text().splitlines():
        index, gid, kind = re.match(r"GID\[\s*(\d+)\]: (\S+), (RoCE v\d)", line).groups()
        _plant_gid(base, int(index), gid, kind, None)
    _plant_unused(base, 8)


@pytest.fixture
def roce_node(tmp_path) -> Path:
    """mlx5_0 / mlx5_1 (RoCE, ACTIVE) with mlx5_0's show_gids table, and the InfiniBand mlx4_0 (port 1 DOWN)."""
    root = tmp_path / "sys" / "class" / "infiniband"
    _plant_ports_from_ibstatus(root)
    _plant_show_gids(root)
    _plant_ports_from_ibstat(root)
    return root


def _nvidia(ib: dict, env: dict[str, str]):
    facts = nvidia_machine()
    facts.env, facts.node_health = env, {"infiniband": ib}
    return facts


def _nccl_ib(ib: dict, env: dict[str, str], machine=None):
    """env.nccl_ib's verdict on the recorded MI300X node (or the machine given) with this record and environment."""
    facts = machine or amd_machine(env=env, node_health={"infiniband": ib})
    return verdicts(facts, "env.nccl_ib")["env.nccl_ib"]


def test_the_reader_gives_each_port_and_its_populated_gids(roce_node):
    ib = read_infiniband(str(roce_node))
    assert ib["present"] and sorted(ib["hcas"]) == ["mlx4_0", "mlx5_0", "mlx5_1"]
    port = ib["hcas"]["mlx5_0"]["ports"]["1"]
    assert (port["state"], port["phys_state"], port["rate"], port["link_layer"]) == (
        "ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet")
    assert sorted(port["gids"], key=int) == ["0", "1", "2", "3", "4", "5"]  # the zeros at 6 and 7 are left out
    assert port["gids"]["5"] == {"gid": "0000:0000:0000:0000:0000:ffff:ac13:003c", "type": "RoCE v2",
                                 "ndev": "ens1f0", "family": "ipv4"}
    assert port["gids"]["3"]["family"] == "ipv6-link-local" and port["gids"]["4"]["type"] == "IB/RoCE v1"
    assert ib["hcas"]["mlx4_0"]["ports"]["1"]["state"] == "DOWN"
    assert ib["hcas"]["mlx5_1"]["ports"]["1"]["gids"] == {}  # its table was not recorded: nothing planted
    assert read_infiniband(str(roce_node.parent / "absent")) == {"present": False, "hcas": {}}


def test_the_collector_reads_it_into_node_health(roce_node):
    facts = node_health({}, root=str(roce_node.parent.parent), cwd=str(roce_node), config_root=str(roce_node))
    assert sorted(facts["infiniband"]["hcas"]) == ["mlx4_0", "mlx5_0", "mlx5_1"]


def test_the_gid_index_must_be_a_routable_roce_v2_entry(roce_node):
    ib = read_infiniband(str(roce_node))
    amds = _nccl_ib(ib, {"NCCL_IB_GID_INDEX": "3"})  # AMD's value; here a link-local RoCE v2 entry
    assert amds.status is Status.WARN and "NCCL_IB_GID_INDEX=3 is GID 3 = fe80:" in amds.summary
    assert "link-local" in amds.summary and "(its IPv4 RoCE v2 entry is 5)" in amds.summary
    assert any("mlx5_0 port 1: ACTIVE, Ethernet (RoCE), 100 Gb/sec (4X EDR); IPv4 RoCE v2 GID at 5 (172.19.0.60)"
               == line for line in amds.evidence)
    v1 = _nccl_ib(ib, {"NCCL_IB_GID_INDEX": "4"})
    assert v1.status is Status.WARN and "not RoCE v2" in v1.summary
    empty = _nccl_ib(ib, {"NCCL_IB_GID_INDEX": "7"})
    assert empty.status is Status.WARN and "empty on mlx5_0 port 1" in empty.summary
    assert _nccl_ib(ib, {"NCCL_IB_GID_INDEX": "5"}).status is Status.PASS


def test_index_three_passes_where_the_table_puts_ipv4_there(tmp_path):
    root = tmp_path / "infiniband"
    _plant_ports_from_ibstatus(root)
    _plant_juniper_gids(root)
    ib = read_infiniband(str(root))
    assert ib["hcas"]["mlx5_0"]["ports"]["1"]["gids"]["3"]["family"] == "ipv4"
    r = _nccl_ib(ib, {"NCCL_IB_GID_INDEX": "3"})
    assert r.status is Status.PASS, r.summary
    wrong = _nccl_ib(ib, {"NCCL_IB_GID_INDEX": "1"})
    assert wrong.status is Status.WARN and wrong.fix.text == "export NCCL_IB_GID_INDEX=3"


def test_the_hca_list_must_name_devices_that_exist_and_are_active(roce_node):
    ib = read_infiniband(str(roce_node))
    r = _nccl_ib(ib, {"NCCL_IB_HCA": "mlx5_0,mlx5_7,mlx4_0:1"})
    assert r.status is Status.WARN
    assert "mlx5_7 is not an RDMA device of this node (it has: mlx4_0, mlx5_0, mlx5_1)" in r.summary
    assert "mlx4_0:1 has no ACTIVE port (mlx4_0 port 1 DOWN)" in r.summary
    assert "mlx5_0 is not" not in r.summary and "mlx5_0 has no" not in r.summary
    assert r.fix.text == "grep -H . /sys/class/infiniband/*/ports/*/state"
    # A prefix takes every device it starts ("mlx": all three, each with an ACTIVE port); "=" asks for exact names.
    # Fewer NICs than GPUs is named only where the list leaves active NICs out.
    assert _nccl_ib(ib, {"NCCL_IB_HCA": "mlx"}).summary == "NCCL_IB_HCA=mlx: consistent with this node's RDMA devices"
    one = _nccl_ib(ib, {"NCCL_IB_HCA": "mlx5_1"})
    assert "lets the job use 1 of this node's 3 active RDMA NICs for 8 GPUs (left out: mlx4_0, mlx5_0)" in one.summary
    assert "mlx5 is not an RDMA device" in _nccl_ib(ib, {"NCCL_IB_HCA": "=mlx5"}).summary
    assert _nccl_ib(ib, {"NCCL_IB_HCA": "^mlx5_7"}).status is Status.PASS  # excluding: not judged
    ib_only = {"present": True, "hcas": {"mlx4_0": ib["hcas"]["mlx4_0"]}}
    assert _nccl_ib(ib_only, {"NCCL_IB_GID_INDEX": "3"}).status is Status.PASS  # InfiniBand links need no index


def test_a_nic_list_on_a_node_without_rdma_devices_is_named(tmp_path):
    none = read_infiniband(str(tmp_path / "no-such-class"))
    r = _nccl_ib(none, {"NCCL_IB_HCA": "rdma0,rdma1"})
    assert r.status is Status.WARN and "this node has none (no /sys/class/infiniband)" in r.summary
    assert r.fix.text == "unset NCCL_IB_HCA"
    assert _nccl_ib(none, {"NCCL_IB_HCA": "^rdma7"}).status is Status.SKIP  # excluding: nothing to judge


def test_a_hand_edited_record_gives_a_verdict_not_a_crash():
    odd = {"present": True, "hcas": {"mlx5_0": {"ports": {"x": {"state": 4, "link_layer": "Ethernet",
                                                                 "gids": {"3": "RoCE v2", "y": {"gid": 7}}}}},
                                     "mlx5_1": {"ports": ["1"]}, "mlx5_2": None}}
    r = _nccl_ib(odd, {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5_0,mlx5_3"})
    assert r.status is Status.WARN and "NCCL_IB_GID_INDEX=3 is empty on mlx5_0 port x" in r.summary
    assert "mlx5_3 is not an RDMA device of this node (it has: mlx5_0, mlx5_1, mlx5_2)" in r.summary


def test_an_nvidia_node_gets_the_same_verdicts(roce_node):
    """NCCL reads the variables on NVIDIA nodes: the recorded H100 node with the planted RoCE tree."""
    ib = read_infiniband(str(roce_node))
    gid = _nccl_ib(ib, {}, _nvidia(ib, {"NCCL_IB_GID_INDEX": "3"}))
    assert gid.status is Status.WARN and "a link-local address" in gid.summary
    assert gid.fix.text == "export NCCL_IB_GID_INDEX=5"
    one = _nccl_ib(ib, {}, _nvidia(ib, {"NCCL_IB_HCA": "mlx5_1"}))
    assert "lets the job use 1 of this node's 3 active RDMA NICs for 8 GPUs (left out: mlx4_0, mlx5_0)" in one.summary
    unset = _nccl_ib(ib, {}, _nvidia(ib, {}))
    assert unset.status is Status.PASS and "library picks the GID and the NICs itself" in unset.summary
    assert any(line.startswith("mlx4_0 port 1: DOWN, InfiniBand") for line in unset.evidence)


def test_one_place_per_fact_and_no_record_is_not_known(roce_node):
    """On AMD, env.rccl_validation keeps MSCCL and stream priority and leaves the GID index and the NIC list to
    env.nccl_ib; a node health record without /sys/class/infiniband's (an older collector) judges neither."""
    ib = read_infiniband(str(roce_node))
    env = {"NCCL_IB_GID_INDEX": "3", "RCCL_MSCCL_ENABLE": "1"}
    v = verdicts(amd_machine(env=env, node_health={"infiniband": ib}), "env.nccl_ib", "env.rccl_validation")
    assert v["env.nccl_ib"].status is Status.WARN and "RCCL_MSCCL_ENABLE" not in v["env.nccl_ib"].summary
    assert v["env.rccl_validation"].status is Status.WARN and "GID" not in v["env.rccl_validation"].summary
    older = verdicts(amd_machine(env=env, node_health={}), "env.nccl_ib")["env.nccl_ib"]
    assert older.status is Status.SKIP and older.data["not_known"] == [
        "the RDMA devices and their GID tables (/sys/class/infiniband)"]
    none = read_infiniband(str(roce_node.parent / "absent"))
    idle = _nccl_ib(none, {}, _nvidia(none, {"NCCL_IB_GID_INDEX": "3"}))
    assert idle.status is Status.SKIP and idle.summary == "no RDMA device on this node: NCCL_IB_GID_INDEX=3 not used"
