"""Pastes -> partial Facts: each reader's facts land where the doctor's checks read them, `known` says which they
are, and a check whose facts are not in the paste skips ("not in the paste: ...") instead of failing or warning;
one whose facts are pasted judges them and quotes the pasted lines. Real pastes from tests/fixtures/."""

from __future__ import annotations

import pytest
from conftest import project_fixture, read_fixture

from rocmcheck.facts.known import ALL, NotKnown
from rocmcheck.result import Status
from rocmcheck.triage import triage
from rocmcheck.triage.context import facts_for_checks
from rocmcheck.triage.judge import context_of, judge
from rocmcheck.triage.known import Ledger, PartDict, group_dict
from rocmcheck.triage.pasted import DOCKER_DEFAULT_SHM, read_pastes

ARCH_LIST_REPL = "pastes/python_session/repl_pprint-get_arch_list-multiline_torch2.7.1+rocm6.3_uv-14086.txt"
COLLECT_ENV_ROCM = "pastes/collect_env/torch2.7.0+rocm6.3_MI100_gfx908_pytorch-152941_excerpt.txt"
PIP_LIST = "pastes/pip_list/pip-list_torch-2.8.0+rocm6.4_comfyui_Radeon680M_ROCm-5225.txt"
DS_REPORT = "pastes/ds_report/ds_report_rocm6.0_torch2.3.1_deepspeed0.14.0_Singularity-LUMI-container_complete.txt"
DOCKER_NO_SHM = ("pastes/docker_run/docker-run_rocm_device-kfd-dri_inline-code-single-line_placeholder-image_"
                 "ROCm-pytorch-513.txt")


def verdicts(*texts: str) -> dict[str, object]:
    pasted = read_pastes([(f"p{i}", t) for i, t in enumerate(texts)])
    return {j.result.id: j for j in judge(pasted)}


def test_a_part_dict_knows_only_what_was_pasted():
    ledger = Ledger()
    d = group_dict({"HIP_VISIBLE_DEVICES": "0"}, "env", ["HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"], ledger)
    assert d.get("HIP_VISIBLE_DEVICES") == "0" and d.get("ROCR_VISIBLE_DEVICES") is None  # known absent
    with pytest.raises(NotKnown, match="CUDA_VISIBLE_DEVICES"):
        d.get("CUDA_VISIBLE_DEVICES")
    with pytest.raises(NotKnown):
        list(d)  # all of a partial group is not known
    assert bool(d) and ledger.reads == ["env/HIP_VISIBLE_DEVICES", "env/ROCR_VISIBLE_DEVICES"]
    whole = group_dict({"torch": "2.4.1"}, "packages", ALL, ledger)
    assert whole.get("flash-attn") is None and list(whole) == ["torch"]
    assert isinstance(whole, PartDict)


def test_collect_env_gives_the_torch_probe_python_os_and_gpus():
    p = read_pastes([("ce", project_fixture(COLLECT_ENV_ROCM))])
    torch = p.facts.probes["torch"]
    assert torch["version"] == "2.7.0+rocm6.3" and torch["hip"].startswith("6.3") and torch["installed"] is True
    assert "arch_list" not in p.probe_known["torch"]  # collect_env does not print it: not known, not empty
    assert p.facts.known["probes"] == ["torch"] and p.facts.platform["kernel"]
    assert [g.arch for g in p.gpus] == ["gfx908"]
    assert p.where["probes/torch.version"].text.startswith("PyTorch version: 2.7.0")


def test_a_package_list_knows_every_package_and_the_absent_ones():
    p = read_pastes([("pip", project_fixture(PIP_LIST))])
    assert p.facts.known["packages"] == ALL
    assert p.facts.packages["torch"].startswith("2.8.0") and p.facts.packages["deepspeed"] is None


def test_ds_report_gives_the_deepspeed_probe_and_dev_shm():
    p = read_pastes([("ds", project_fixture(DS_REPORT))])
    ds = p.facts.probes["deepspeed"]
    assert ds["installed"] is True and ds["version"] == "0.14.0" and "cpu_adam" in ds["ops"]
    assert p.facts.limits["shm_bytes"] > 100 * 2**30 and "jit" in p.probe_known["deepspeed"]
    assert p.nested_known[("deepspeed", "jit")] == {"ninja"}  # ds_report says nothing of the compiler


def test_a_docker_run_line_is_what_the_container_got():
    p = read_pastes([("d", project_fixture(DOCKER_NO_SHM))])
    assert p.facts.present["/.dockerenv"] is True
    assert p.facts.devices["/dev/kfd"] == {"exists": True}
    assert p.facts.limits["shm_bytes"] == DOCKER_DEFAULT_SHM  # neither --shm-size nor --ipc=host
    v = verdicts(project_fixture(DOCKER_NO_SHM))
    assert v["host.shm"].result.status is Status.FAIL
    assert v["host.shm"].quotes and "docker run" in v["host.shm"].quotes[0].text


def test_variables_set_in_a_paste_are_known_and_only_those_rocmcheck_records():
    p = read_pastes([("x", "export HSA_OVERRIDE_GFX_VERSION=10.3.0\nMY_OWN=1 ROCR_VISIBLE_DEVICES=1 python x.py\n"
                           "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789 python y.py\n")])
    env = p.facts.env
    assert env["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0" and env["ROCR_VISIBLE_DEVICES"] == "1"
    assert "MY_OWN" not in env and "MY_OWN" not in p.facts.known["env"]
    assert "hf_abcdef" not in env.get("HF_TOKEN", "")  # the paste is redacted before it is read


def test_a_check_whose_facts_are_not_pasted_skips_and_says_which():
    v = verdicts("RuntimeError: HIP error: invalid device function\n")
    for check_id in ("torch.arch_list", "devices.kfd", "host.shm", "env.hsa_override", "gpu.rocminfo"):
        r = v[check_id].result
        assert r.status is Status.SKIP and r.summary.startswith("not in the paste: "), (check_id, r.summary)
        assert r.data["not_known"]
    assert not [j for j in v.values() if j.result.status in (Status.FAIL, Status.WARN, Status.CRASH)]


def test_torch_arch_list_judges_a_pasted_arch_list_against_a_pasted_gpu():
    """A Python session's get_arch_list() and rocminfo of a gfx1151 APU: torch.arch_list fails and quotes both;
    with rocminfo of an MI300X (gfx942, in the list) it passes."""
    repl = project_fixture(ARCH_LIST_REPL)
    apu = verdicts(repl, read_fixture("rocminfo/strix-halo-gfx1151-apu-rocm7.11-nightly.txt"))["torch.arch_list"]
    assert apu.result.status is Status.FAIL and "gfx1151" in apu.result.summary
    texts = [q.text for q in apu.quotes]
    assert any("gfx1151" in t for t in texts) and any("get_arch_list" in t for t in texts)
    mi300 = verdicts(repl, read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt"))["torch.arch_list"]
    assert mi300.result.status is Status.PASS


def test_a_passing_arch_list_moves_an_invalid_device_function_to_the_extension():
    repl = project_fixture(ARCH_LIST_REPL)
    rocminfo = read_fixture("rocminfo/mi300x-8gpu-rocm6.2.3-unpadded.txt")
    t = triage([("a", repl), ("b", rocminfo), ("c", "RuntimeError: HIP error: invalid device function\n")])
    ids = [f.id for f in t.findings]
    assert ids[0] == "extensions.arch" and "torch.arch_list" not in ids, ids  # the pasted facts rule torch out
    arch = next(j.result for j in t.judged if j.result.id == "torch.arch_list")
    assert arch.status is Status.PASS


def test_a_rocminfo_fragment_names_gpus_but_is_not_rocminfo_output():
    fragment = "  Name:                    gfx1030\n      Name:                    amdgcn-amd-amdhsa--gfx1030\n"
    p = read_pastes([("f", fragment)])
    assert "commands" not in p.facts.known and [g.arch for g in p.gpus] == ["gfx1030"]
    v = verdicts(fragment)
    assert v["gpu.rocminfo"].result.status is Status.SKIP  # never "rocminfo printed nothing rocmcheck understands"


def test_every_failed_verdict_on_pasted_facts_reads_only_pasted_facts():
    """The guard below the accessors: a view that reads a probe key nobody pasted gets NotKnown, not None."""
    p = read_pastes([("ce", project_fixture(COLLECT_ENV_ROCM))])
    ctx = context_of(p, facts_for_checks(p, Ledger()))
    with pytest.raises(NotKnown, match="arch_list"):
        ctx.torch.get("arch_list")
    assert ctx.torch.get("devices") is None  # an enrichment the views read: absent when not pasted


def test_a_pasted_amd_smi_gpu_keeps_the_index_and_partition_it_printed():
    # The last GPU block of a real `amd-smi static` (4x MI300A) pasted alone: GPU 3 as printed, SPX / NPS1 as printed.
    text = project_fixture("pastes/amd_smi/static_MI300A_x4_driver-6.9.0-rc5_amdsmi-readme.txt")
    p = read_pastes([("p", text[text.index("GPU: 3"):])])
    [gpu] = context_of(p, facts_for_checks(p, Ledger())).amd_gpus
    assert (gpu.index, gpu.arch, gpu.extra["partition"], gpu.extra["memory_partition"]) == (3, "gfx942", "SPX", "NPS1")
    v = verdicts(text[text.index("GPU: 3"):])
    assert v["gpu.partition"].result.status == Status.PASS
