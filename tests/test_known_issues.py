"""The known-issues tables (rocmcheck/knowledge/known_issues.json, generated from AMD's release notes and RCCL's
changelog; known_issues_threads.json, written from owners' threads) and versions.known_issues on planted facts and on
real recorded outputs: the recorded 8 x MI300X rocminfo (tests/machines.py), Debian's ROCm user space
(tests/fixtures/debian-sid-rocm), a published collect_env and pip list read by triage (tests/fixtures/public,
tests/fixtures/pastes, each with its .source)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import PROJECT_FIXTURES_DIR, read_fixture
from machines import amd_machine, ran, verdicts
from packaging.specifiers import SpecifierSet
from test_checks_nvidia import nvidia_machine
from test_ib_settings import roce_node  # noqa: F401 (a fixture: recorded RoCE and InfiniBand ports)
from test_rocm_distro_layout import debian_sid_facts

from rocmcheck.facts.infiniband import read_infiniband
from rocmcheck.facts.known import everything
from rocmcheck.knowledge.known_issues import TABLES, all_issues, row_problems
from rocmcheck.package_data import read_json
from rocmcheck.result import Status
from rocmcheck.triage import triage

ROOT = Path(__file__).resolve().parent.parent
ID = "versions.known_issues"


def _rows() -> list[tuple[str, dict]]:
    return [(table, row) for table in TABLES for row in read_json("rocmcheck.knowledge", table)["issues"]]


def test_every_row_validates_with_sources_a_date_and_a_specifier():
    rows = _rows()
    assert len(rows) >= 8
    ids = [row["id"] for _, row in rows]
    assert len(ids) == len(set(ids)), "row ids are unique"
    for table, row in rows:
        assert row_problems(row) == [], (table, row["id"])
        assert all(s.startswith("https://github.com/") for s in row["sources"]), row["id"]
        assert row["read"] == "2026-12-07", row["id"]
        SpecifierSet(row["affected"])  # packaging reads it
        assert row["basis"] == "owner file" if table == "known_issues.json" else row["basis"] != "owner file"
    assert len(all_issues()) == len(rows)


def test_a_bad_row_is_named():
    row = dict(_rows()[0][1])
    row.update(affected="6.3.0 to 6.3.1", sources=["http://example.org"], severity="bad", read="")
    row["fix"] = {"upgrade": "6.3.0", "env": {"A B": "1"}}
    problems = " | ".join(row_problems(row))
    for word in ("affected", "sources", "severity", "read", "fix.env"):
        assert word in problems
    row["fix"] = {"upgrade": "6.2.5"}
    row["affected"] = ">=6.2.0,<6.3.0"
    assert any("inside the affected range" in p for p in row_problems(row))


def _make_knowledge():
    spec = importlib.util.spec_from_file_location("make_knowledge", ROOT / "scripts" / "make_knowledge.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_knowledge"] = module
    spec.loader.exec_module(module)
    return module


def test_a_generated_row_stands_on_the_sentences_of_its_snapshot(monkeypatch):
    """make_knowledge.py refuses a row whose quoted sentence its snapshot does not hold."""
    mk = _make_knowledge()
    table = mk.build_known_issues()
    conv = next(r for r in table["issues"] if r["id"] == "rocm-6.3.0-mi300-conv-wgrad")
    assert conv["affected"] == ">=6.3.0,<6.3.1" and conv["fix"]["env"] == {"MIOPEN_FIND_MODE": "3",
                                                                            "MIOPEN_FIND_ENFORCE": "3"}
    assert conv["sources"][0].startswith("https://github.com/ROCm/ROCm/blob/059c2cd9")
    spec = next(s for s in mk.KNOWN_ISSUES if s["id"] == "rocm-6.3.0-mi300-conv-wgrad")
    changed = dict(spec, quotes={"6.3.1_ROCm-ROCm_82d7903e": ["Fixed nothing at all"]})
    monkeypatch.setattr(mk, "KNOWN_ISSUES", [changed])
    with pytest.raises(SystemExit, match="does not say"):
        mk.build_known_issues()


def _rocm(version: str) -> dict:
    return {"roots": {"/opt/rocm": {"info_version": f"{version}\n", "therock_cores": {}}}}


def _machine(rocm: str, torch: str, *, gpu: str | None = None, kernel: str = "5.15.0-161-generic", **packages):
    """The recorded 8 x MI300X rocminfo with the system ROCm, torch and packages planted; gpu="MI355X" or "MI300A"
    plants that product's name (and gfx950 for MI355X) into the same recorded output."""
    facts = amd_machine(rocm_layout=_rocm(rocm))
    facts.platform["kernel"] = kernel
    facts.probes["torch"]["version"] = torch
    facts.packages.update({"torch": torch, **packages})
    if gpu:
        text = read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt").replace("MI300X", gpu)
        if gpu.startswith("MI35"):
            text = text.replace("gfx942", "gfx950")
        facts.commands["rocminfo"] = ran("rocminfo", stdout=text)
    return facts


def _verdict(facts):
    return verdicts(facts, ID)[ID]


def test_in_range_warns_with_the_sources_workaround():
    """ROCm 6.3.0 on MI300X: the backward-weights convolution issue, fixed in 6.3.1, worked around with MIOpen's find
    mode (AMD's 6.3.0 release notes)."""
    r = _verdict(_machine("6.3.0-39", "2.4.0+rocm6.3.0"))
    assert r.status is Status.WARN
    assert "rocm-6.3.0-mi300-conv-wgrad" in r.data["finding"]
    assert r.fix.text == "export MIOPEN_FIND_MODE=3 MIOPEN_FIND_ENFORCE=3" and "6.3.1" in r.fix.why
    assert any(line.startswith("rocm-6.3.0-mi300-conv-wgrad:") and "059c2cd9" in line for line in r.evidence)


def test_a_known_bad_package_fails_with_the_upgrade():
    r = _verdict(_machine("6.4.3", "2.6.0+rocm6.4.3", deepspeed="0.17.5"))
    assert r.status is Status.FAIL and "deepspeed 0.17.5" in r.summary
    assert r.fix.text == "pip install 'deepspeed>=0.17.6'"
    assert "deepspeed-0.17.5-rocm-op-build" in r.data["finding"]
    fixed = _verdict(_machine("6.4.3", "2.6.0+rocm6.4.3", deepspeed="0.17.6"))
    assert "deepspeed-0.17.5-rocm-op-build" in fixed.data["clear"]


def test_out_of_range_passes():
    r = _verdict(_machine("6.3.2", "2.4.0+rocm6.3.2", deepspeed="0.17.4"))
    assert r.status is Status.PASS, r.evidence
    assert {"rocm-6.3.0-mi300-conv-wgrad", "deepspeed-0.17.5-rocm-op-build"} <= set(r.data["clear"])
    assert r.data["finding"] == []


def test_an_unknown_version_is_not_judged():
    # deepspeed not installed: not judged, never clear
    absent = _verdict(_machine("6.3.2", "2.4.0+rocm6.3.2"))
    assert "deepspeed-0.17.5-rocm-op-build" in absent.data["not_judged"]
    assert "deepspeed-0.17.5-rocm-op-build" not in absent.data["clear"]
    # the installed packages not recorded at all: a skip naming them, however many other rows are clear
    facts = _machine("6.3.2", "2.4.0+rocm6.3.2", deepspeed="0.17.5")
    facts.known = {g: s for g, s in everything().items() if g != "packages"}
    unrecorded = _verdict(facts)
    assert unrecorded.status is Status.SKIP and unrecorded.summary.startswith("not known: ")
    assert "deepspeed-0.17.5-rocm-op-build" in unrecorded.data["not_judged"] and unrecorded.data["not_known"]
    assert unrecorded.data["clear"]  # the ROCm rows were judged, and the evidence says so
    # a torch wheel naming only its series (+rocm6.4) where the range splits the series (6.4.0 out, 6.4.1 in)
    series = _verdict(_machine("6.3.1", "2.6.0+rocm6.4"))
    assert {"rccl-6.4-mscclinit-commsplit-segfault", "rocm-6.4-hipmemrelease-keeps-memory"} <= set(
        series.data["not_judged"])
    # ... but a range that holds the whole series judges it: every 7.2.x is >=7.0.0
    whole = _verdict(_machine("7.2.1", "2.9.1+rocm7.2"))
    assert "rocm-7-ipc-export-pins-memory" in whole.data["finding"]
    assert whole.fix is not None


def test_other_platforms_archs_products_and_kernels_are_not_applied(roce_node):  # noqa: F811 (the fixture)
    # an NVIDIA machine with DeepSpeed 0.17.5: the row is for ROCm torch only, and every ROCm row is not applied
    nvidia = nvidia_machine()
    nvidia.packages["deepspeed"] = "0.17.5"
    r = _verdict(nvidia)
    assert "deepspeed-0.17.5-rocm-op-build" in r.data["not_applied"] and r.data["finding"] == []
    assert "rocm-6.3.0-mi300-conv-wgrad" in r.data["not_applied"]
    # the MSCCL LL corruption is gfx950's: an MI300X on 7.0.2 is not affected, an MI355X on 7.0.2 is
    mi300x = _verdict(_machine("7.0.2", "2.8.0+rocm7.0.2"))
    assert "rccl-7.0-gfx950-msccl-ll-corruption" in mi300x.data["not_applied"]
    mi355x = _verdict(_machine("7.0.2", "2.8.0+rocm7.0.2", gpu="MI355X"))
    assert "rccl-7.0-gfx950-msccl-ll-corruption" in mi355x.data["finding"]
    # the MI300A bandwidth limit on ROCm 6.2: not on an MI300X (same arch, another product)
    assert "rocm-6.2-mi300a-host-bandwidth" in _verdict(_machine("6.2.4", "2.5.1+rocm6.2.4")).data["not_applied"]
    assert "rocm-6.2-mi300a-host-bandwidth" in _verdict(
        _machine("6.2.4", "2.5.1+rocm6.2.4", gpu="MI300A")).data["finding"]
    # RCCL's GPU<->NIC DMA on Linux 6.8+ with RoCE (the recorded mlx5 RoCE ports of tests/fixtures/infiniband): a 5.15
    # kernel is not affected, nor a 6.8 node without RDMA devices
    rows = "rccl-6.2-kernel-6.8-no-gpu-nic-dma"
    roce = {"infiniband": read_infiniband(str(roce_node))}
    old = _machine("6.2.4", "2.5.1+rocm6.2.4")
    new = _machine("6.2.4", "2.5.1+rocm6.2.4", kernel="6.8.0-52-generic")
    bare = _machine("6.2.4", "2.5.1+rocm6.2.4", kernel="6.8.0-52-generic")
    old.node_health, new.node_health, bare.node_health = roce, roce, {"infiniband": {"present": False, "hcas": {}}}
    assert rows in _verdict(old).data["not_applied"] and rows in _verdict(bare).data["not_applied"]
    assert rows in _verdict(new).data["finding"]


def test_debian_rocm_user_space_is_judged_by_its_series():
    """Debian's ROCm (recorded, tests/fixtures/debian-sid-rocm) names HIP 6.4 without a ROCm patch release: rows
    splitting 6.4 are not judged, rows outside 6.4 are clear, and no finding rests on the missing patch."""
    r = _verdict(debian_sid_facts())
    assert r.data["finding"] == []
    assert {"rccl-6.4-mscclinit-commsplit-segfault", "rocm-6.4-hipmemrelease-keeps-memory"} <= set(
        r.data["not_judged"])
    assert "rocm-6.3.0-mi300-conv-wgrad" in r.data["clear"]


def _triaged(*paths: str):
    texts = [(p, (PROJECT_FIXTURES_DIR / p).read_text(encoding="utf-8")) for p in paths]
    return next(j.result for j in triage(texts).judged if j.result.id == ID)


def test_a_recorded_collect_env_on_a_6_8_kernel():
    """A published collect_env of 8 x MI300X (torch 2.4.1+rocm6.1, host kernel 6.8.0-45): RCCL's known issue of Linux
    6.8+ with RCCL before ROCm 6.3 on RoCE nodes is in range, but the paste does not show the node's RDMA devices, nor
    the system ROCm: those rows stay open, and the verdict names what the paste lacks."""
    r = _triaged("public/collect_env/mi300x-8gpu-vllm-collect-env-rocm6.1-torch2.4.1.txt")
    assert r.status is Status.SKIP and r.summary.startswith("not in the paste: ") and r.data["finding"] == []
    assert {"rccl-6.2-kernel-6.8-no-gpu-nic-dma", "rocm-7-ipc-export-pins-memory"} <= set(r.data["not_judged"])
    assert any(line.startswith("not judged: rccl-6.2-kernel-6.8-no-gpu-nic-dma") and "infiniband" in line
               for line in r.evidence), r.evidence


def test_a_pasted_pip_list_alone_judges_nothing():
    """A pip list (torch 2.8.0+rocm6.4) says nothing of the system ROCm: no ROCm row passes on torch's ROCm alone;
    torch's own row is judged from the version the list shows."""
    r = _triaged("pastes/pip_list/pip-list_torch-2.8.0+rocm6.4_comfyui_Radeon680M_ROCm-5225.txt")
    assert r.status is Status.SKIP and r.summary.startswith("not in the paste: ") and r.data["finding"] == []
    rocm_rows = {i.id for i in all_issues() if i.package == "rocm"}
    assert rocm_rows <= set(r.data["not_judged"]) and r.data["clear"] == ["torch-2.12-rdna-norm-backward"]


def _rdna(torch: str):
    """The recorded MI300X rocminfo with its arch and name planted as a Radeon RX 7900 XTX's (gfx1100, RDNA3)."""
    facts = _machine("7.2.1", torch)
    text = read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt").replace("gfx942", "gfx1100")
    facts.commands["rocminfo"] = ran("rocminfo", stdout=text.replace("AMD Instinct MI300X", "Radeon RX 7900 XTX"))
    return facts


def test_torch_2_12_on_rdna_fails_and_spares_cdna():
    """torch 2.12's LayerNorm/RMSNorm backward on wave32 GPUs (pytorch#183861): a fail with the upgrade on RDNA,
    not applied on MI300X (wave64), clear from 2.13.0."""
    rdna = _verdict(_rdna("2.12.1+rocm7.2"))
    assert rdna.status is Status.FAIL and "torch-2.12-rdna-norm-backward" in rdna.data["finding"]
    assert rdna.fix.text == "pip install 'torch>=2.13.0'"
    assert "torch-2.12-rdna-norm-backward" in _verdict(_machine("7.2.1", "2.12.1+rocm7.2")).data["not_applied"]
    assert "torch-2.12-rdna-norm-backward" in _verdict(_rdna("2.13.0+rocm7.2")).data["clear"]
