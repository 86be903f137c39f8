"""Collectives and links: the topology parsers on real tool outputs, the link kinds mapped onto torch's GPUs, the
NCCL transport variables (probe verdict and cheap env check), the collective sweep (a real gloo run of two CPU
ranks, and its judge on NVLink / XGMI figures) and the per-pair copy matrix (a real CPU run, and its judge on a
matrix with a slow pair). The GPU runs are for a machine with 2+ GPUs (benchmarks/bench_level3.py)."""

from __future__ import annotations

import os
import stat

import pytest
from conftest import read_fixture
from machines import amd_machine, verdicts

from rocmcheck.facts.parsers.links import normal_bus_id, parse_amd_smi_topology, parse_nvidia_topo, parse_rocm_smi_topo
from rocmcheck.facts.parsers.nccl_env import p2p_turned_off, transport_settings
from rocmcheck.probes.catalog import collective_sweep as sweep_probe
from rocmcheck.probes.catalog import p2p_matrix as p2p_probe
from rocmcheck.probes.catalog.collective import bus_bandwidth_gbps
from rocmcheck.probes.context import DeviceContext
from rocmcheck.probes.links import pair_kinds, read_topology, slowest_kind
from rocmcheck.probes.stage import run_stage
from rocmcheck.probes.sweep import sizes
from rocmcheck.result import Status

H200 = DeviceContext(vendor="nvidia", name="NVIDIA H200", arch="sm_90", count=2)
MI300X = DeviceContext(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", count=8)


# ----------------------------------------------------------------------------------------- topology

def test_nvidia_smi_topo_on_two_h200s_names_nvlink():
    topo = parse_nvidia_topo(read_fixture("nvidia-smi/h200x2-topo-m-nvlink.txt"))
    assert topo.gpus == ["GPU0", "GPU1"] and topo.kinds == {(0, 1): "nvlink", (1, 0): "nvlink"}
    assert topo.words[(0, 1)] == "NV18" and topo.bus_ids == [None, None]


def test_amd_smi_topology_on_eight_mi355x_is_all_xgmi():
    topo = parse_amd_smi_topology(read_fixture("amd-smi/mi355x-x8-topology-xgmi.txt"))
    assert len(topo.gpus) == 8 and len(topo.kinds) == 56 and set(topo.kinds.values()) == {"xgmi"}
    assert topo.bus_ids[0] == "0000:0d:00.0" and topo.bus_ids[7] == "0000:f4:00.0"


def test_amd_smi_topology_on_two_radeons_is_pcie():
    topo = parse_amd_smi_topology(read_fixture("amd-smi/rx7900xtx-x2-topology-pcie-rocm7.2.1.txt"))
    assert topo.to_dict()["pairs"] == {"0-1": {"kind": "pcie", "word": "PCIE"}, "1-0": {"kind": "pcie", "word": "PCIE"}}


def test_rocm_smi_showtopo_reads_the_link_type_block():
    topo = parse_rocm_smi_topo(read_fixture("rocm-smi/4gpu-showtopo-pcie-rocm-smi-lib-108.txt"))
    assert topo.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and len(topo.kinds) == 12
    assert set(topo.kinds.values()) == {"pcie"}


@pytest.mark.parametrize("text", ["", "garbage\x00\x1b[31m", "GPU0 GPU1\nGPU0 X", "LINK TYPE TABLE:\nx y\n", None])
def test_the_parsers_never_raise(text):
    for parse in (parse_nvidia_topo, parse_amd_smi_topology, parse_rocm_smi_topo):
        assert parse(text).kinds == {}


def test_pci_addresses_are_normalised():
    assert normal_bus_id("00000000:1B:00.0") == "0000:1b:00.0" == normal_bus_id("1b:00.0")
    assert normal_bus_id("GPU0") is None and normal_bus_id(None) is None


def test_read_topology_runs_the_tool(tmp_path):
    tool = tmp_path / "nvidia-smi"
    fixture = tmp_path / "topo.txt"
    fixture.write_text(read_fixture("nvidia-smi/h200x2-topo-m-nvlink.txt"))
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = topo ] && [ \"$2\" = -m ] && exec cat {fixture}\nexit 9\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    read = read_topology("nvidia", {"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert read["known"] and read["topology"]["pairs"]["0-1"]["kind"] == "nvlink"
    missing = read_topology("amd", {"PATH": str(tmp_path / "none"), "ROCM_PATH": str(tmp_path / "none")})
    assert not missing["known"] and "amd-smi not found" in missing["why"]


def test_links_map_onto_torchs_gpus_by_pci_address_or_position():
    amd = {"known": True, "topology": parse_amd_smi_topology(read_fixture("amd-smi/mi355x-x8-topology-xgmi.txt"))
           .to_dict()}
    # torch sees two of the eight (ROCR_VISIBLE_DEVICES=3,7): matched by address, renumbered 0 and 1.
    kinds, how = pair_kinds(amd, ["0000:75:00.0", "0000:f4:00.0"], {"ROCR_VISIBLE_DEVICES": "3,7"})
    assert how == "pci address" and kinds == {"0-1": "xgmi", "1-0": "xgmi"}
    nv = {"known": True, "topology": parse_nvidia_topo(read_fixture("nvidia-smi/h200x2-topo-m-nvlink.txt")).to_dict()}
    assert pair_kinds(nv, [None, None], {}) == ({"0-1": "nvlink", "1-0": "nvlink"}, "position")
    kinds, why = pair_kinds(nv, [None, None], {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert kinds == {} and "renumbers" in why
    assert pair_kinds(nv, [None], {})[0] == {}  # the tool lists 2, torch sees 1
    assert slowest_kind({"0-1": "nvlink", "1-0": "nvlink", "0-2": "pcie", "2-0": "pcie", "1-2": "nvlink",
                         "2-1": "nvlink"}, [0, 1, 2]) == "pcie"
    assert slowest_kind({"0-1": "xgmi"}, [0, 1]) is None  # 1-0 not known


# ------------------------------------------------------------------------------- NCCL transport vars

def test_transport_settings_read_what_nccl_reads():
    assert transport_settings({}) == [] and transport_settings({"NCCL_P2P_DISABLE": "0"}) == []
    off = p2p_turned_off({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_P2P_LEVEL": "NVL"})
    assert [(s.name, s.turns_off) for s in off] == [("NCCL_P2P_DISABLE", "p2p"), ("NCCL_SHM_DISABLE", "shm")]
    assert p2p_turned_off({"NCCL_P2P_LEVEL": "LOC"})[0].turns_off == "p2p"
    assert p2p_turned_off({"NCCL_P2P_LEVEL": "0"})[0].turns_off == "p2p"
    limited = transport_settings({"NCCL_P2P_LEVEL": "PIX"})
    assert limited[0].turns_off is None and "PIX" in limited[0].meaning
    assert "not a number" in transport_settings({"NCCL_P2P_DISABLE": "yes"})[0].meaning


def test_the_env_check_flags_a_leftover_nccl_p2p_disable():
    r = verdicts(amd_machine(env={"NCCL_P2P_DISABLE": "1"}), "env.nccl_transport")["env.nccl_transport"]
    assert r.status == Status.WARN and "NCCL_P2P_DISABLE=1" in r.summary
    assert r.fix.text == "unset NCCL_P2P_DISABLE"
    assert verdicts(amd_machine(), "env.nccl_transport")["env.nccl_transport"].status == Status.PASS
    limited = verdicts(amd_machine(env={"NCCL_P2P_LEVEL": "NVL"}), "env.nccl_transport")["env.nccl_transport"]
    assert limited.status == Status.PASS and "NVL" in limited.summary


# ------------------------------------------------------------------------------------ collective sweep

def test_the_sweep_doubles_from_8_bytes_to_the_largest():
    points = sizes(1 << 30)
    assert points[0] == 8 and points[-1] == 1 << 30 and len(points) == 28
    assert all(b == 2 * a for a, b in zip(points, points[1:]))


def _rows(busbw_at_largest: float, world: int = 2, ok: bool = True) -> list[dict]:
    rows = []
    for size in sizes(1 << 30):
        for op in ("all_reduce", "all_gather"):
            scale = min(1.0, size / (256 << 20))
            busbw = max(0.01, busbw_at_largest * scale)
            factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
            seconds = size / (busbw / factor * 1e9)
            algbw, bus = bus_bandwidth_gbps(op, size, seconds, world)
            rows.append({"op": op, "bytes": size, "ok": ok or size != 4096, "us": seconds * 1e6, "algbw_gbps": algbw,
                         "busbw_gbps": bus})
    return rows


def _sweep(busbw: float, kind: str = "nvlink", world: int = 2, env=(), ok: bool = True) -> dict:
    kinds = {f"{a}-{b}": kind for a in range(world) for b in range(world) if a != b}
    settings = [{"name": s.name, "value": s.value, "turns_off": s.turns_off, "meaning": s.meaning}
                for s in transport_settings(dict(env))]
    return {"world": world, "backend": "nccl", "rows": _rows(busbw, world, ok), "links": {"kinds": kinds},
            "transport_env": settings}


def test_nvlink_busbw_as_recorded_on_h200_passes():
    r = sweep_probe.judge(_sweep(261.0), H200)
    assert r.status == Status.PASS and "above the 130 GB/s NVLink links reach" in r.summary
    assert any(e.startswith("all_reduce 8 B:") for e in r.evidence)
    assert any(e.startswith("all_reduce 1 GiB:") for e in r.evidence)


def test_a_slow_sweep_measured_with_p2p_disabled_names_the_cause():
    r = sweep_probe.judge(_sweep(40.0, env={"NCCL_P2P_DISABLE": "1"}), H200)
    assert r.status == Status.FAIL and "measured with NCCL_P2P_DISABLE=1" in r.summary
    assert "slow for that reason" in r.summary and r.fix.text == "unset NCCL_P2P_DISABLE"


def test_a_fast_sweep_with_a_leftover_shm_disable_warns():
    r = sweep_probe.judge(_sweep(255.0, env={"NCCL_SHM_DISABLE": "1"}), H200)
    assert r.status == Status.WARN and "NCCL_SHM_DISABLE=1 is set" in r.summary


def test_xgmi_busbw_below_one_links_worth_warns_and_names_the_tools():
    r = sweep_probe.judge(_sweep(25.0, kind="xgmi", world=8), MI300X)
    assert r.status == Status.WARN and "below the 32.9 GB/s XGMI links reach" in r.summary
    assert r.fix.text.startswith("amd-smi topology")


def test_wrong_data_at_one_size_fails():
    r = sweep_probe.judge(_sweep(261.0, ok=False), MI300X)
    assert r.status == Status.FAIL and "wrong data" in r.summary and "4.0 KiB" in r.summary
    assert "RCCL_MSCCL_ENABLE=0" in r.fix.text


def test_the_sweep_runs_over_gloo_with_two_cpu_ranks():
    r = run_stage(timeout_s=120, only={"collective_sweep"}, cpu=True)[0]
    assert r.status == Status.PASS, (r.summary, r.evidence)
    assert "link type not known: not judged" in r.summary
    rows = r.data["rows"]
    assert rows[0]["bytes"] == 8 and max(x["bytes"] for x in rows) == 1 << 20 and all(x["ok"] for x in rows)
    assert {x["op"] for x in rows} == {"all_reduce", "all_gather"}


def test_the_sweep_child_records_a_leftover_p2p_disable(monkeypatch):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    r = run_stage(timeout_s=120, only={"collective_sweep"}, cpu=True)[0]
    assert r.status == Status.WARN and "NCCL_P2P_DISABLE=1 is set" in r.summary
    assert os.environ["NCCL_P2P_DISABLE"] == "1"


# -------------------------------------------------------------------------------------- P2P matrix

def _matrix(gbps: dict[str, float], kind: str = "xgmi", ok: dict[str, bool] | None = None, peer: bool = True):
    pairs = []
    for key, value in gbps.items():
        a, b = (int(x) for x in key.split("->"))
        pairs.append({"src": a, "dst": b, "gbps": value, "latency_us": 9.0, "ok": (ok or {}).get(key, True),
                      "peer_access": peer, "bytes": 256 << 20})
    kinds = {f"{p['src']}-{p['dst']}": kind for p in pairs}
    return {"gpus": 4, "pairs": pairs, "links": {"kinds": kinds}}


def _all_pairs(value: float, n: int = 4) -> dict[str, float]:
    return {f"{a}->{b}": value for a in range(n) for b in range(n) if a != b}


def test_a_healthy_xgmi_matrix_passes():
    gbps = {k: 48.0 + i * 0.1 for i, k in enumerate(_all_pairs(0))}
    r = p2p_probe.judge(_matrix(gbps), MI300X)
    assert r.status == Status.PASS and "12 GPU pair(s) copy right" in r.summary and "XGMI" in r.summary


def test_a_slow_pair_among_equal_links_is_named():
    gbps = _all_pairs(420.0)
    gbps["2->3"] = 250.0  # above the NVLink floor, far below its peers
    r = p2p_probe.judge(_matrix(gbps, kind="nvlink"), H200)
    assert r.status == Status.WARN and "2->3 250.0 GB/s vs 420.0 for the other NVLink pairs" in r.summary
    assert r.fix.text.startswith("nvidia-smi topo -m")


def test_a_pair_far_below_its_link_fails_and_one_below_warns():
    gbps = _all_pairs(48.0)
    gbps["1->0"] = 12.0
    r = p2p_probe.judge(_matrix(gbps), MI300X)
    assert r.status == Status.FAIL and "1->0 12.0 GB/s over XGMI" in r.summary
    gbps["1->0"] = 30.0
    assert p2p_probe.judge(_matrix(gbps), MI300X).status == Status.WARN


def test_bytes_that_arrive_wrong_fail():
    r = p2p_probe.judge(_matrix(_all_pairs(48.0), ok={"0->3": False}), MI300X)
    assert r.status == Status.FAIL and "wrong bytes on 1 of 12 pairs (0->3)" in r.summary


def test_peer_access_off_on_a_fabric_pair_warns():
    r = p2p_probe.judge(_matrix(_all_pairs(48.0), peer=False), MI300X)
    assert r.status == Status.WARN and "peer access is off" in r.summary


def test_the_matrix_runs_through_the_real_child_in_cpu_mode():
    r = run_stage(timeout_s=120, only={"p2p_matrix"}, cpu=True)[0]
    # Two CPU "devices" share one memory; their rates waver with the shared box, the bytes may not.
    assert r.status in (Status.PASS, Status.WARN), r.summary
    assert len(r.data["pairs"]) == 2 and all(p["ok"] for p in r.data["pairs"])
    assert all(p["gbps"] > 0 and p["latency_us"] > 0 for p in r.data["pairs"])


def test_torchs_pci_address_is_read_from_the_device_properties():
    from types import SimpleNamespace

    from rocmcheck.probes.links import torch_bus_id

    assert torch_bus_id(SimpleNamespace(pci_domain_id=0, pci_bus_id=0xDC, pci_device_id=0)) == "0000:dc:00.0"
    assert torch_bus_id(SimpleNamespace()) is None  # a torch that does not report it
