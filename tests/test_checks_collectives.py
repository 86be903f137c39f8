"""The collective settings against the job: RCCL's channel minimum against the job's ranks (launcher, visibility
variables), the variables AMD's validation page sets (rccl_settings.json), leftover runtime knobs. Machines: the
recorded 8 x MI300X rocminfo of tests/machines.py; the environment is planted per case, and one case records it
through the real collector."""

from __future__ import annotations

from machines import amd_machine, verdicts

from rocmcheck.facts.collect import collect_facts
from rocmcheck.fixes import FixKind
from rocmcheck.result import Status


def _check(env: dict[str, str], check: str):
    return verdicts(amd_machine(env=env), check)[check]


def test_channels_count_the_jobs_ranks_not_the_nodes_gpus():
    """8 GPUs on the node, 4 visible to the job: RCCL runs 4 ranks and drops a minimum of 112."""
    r = _check({"NCCL_MIN_NCHANNELS": "112", "HIP_VISIBLE_DEVICES": "0,1,2,3"}, "env.nccl_channels")
    assert r.status is Status.WARN and "ignored with 4 ranks" in r.summary
    assert any("HIP_VISIBLE_DEVICES=0,1,2,3 leaves 4 of the node's 8 GPUs" in line for line in r.evidence)
    mpi = _check({"NCCL_MIN_NCHANNELS": "112", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4",
                  "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, "env.nccl_channels")
    assert mpi.status is Status.WARN and "with 4 ranks" in mpi.summary
    # two nodes of 4 visible GPUs under torchrun: 8 ranks in the communicator, the minimum holds
    two_nodes = _check({"NCCL_MIN_NCHANNELS": "112", "HIP_VISIBLE_DEVICES": "0,1,2,3", "TORCHELASTIC_RUN_ID": "j",
                        "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "2"},
                       "env.nccl_channels")
    assert two_nodes.status is Status.PASS and any("torchrun" in line for line in two_nodes.evidence)


def test_rccl_settings_against_amds_validation():
    planted = _check({"RCCL_MSCCL_ENABLE": "1", "TORCH_NCCL_HIGH_PRIORITY": "0", "NCCL_IB_GID_INDEX": "0"},
                     "env.rccl_validation")
    assert planted.status is Status.WARN
    for text in ("RCCL_MSCCL_ENABLE=1", "TORCH_NCCL_HIGH_PRIORITY=0", "corruption"):
        assert text in planted.summary
    assert "NCCL_IB_GID_INDEX" not in planted.summary  # the node's GID table decides it (env.nccl_ib)
    assert planted.fix.kind is FixKind.SHELL and planted.fix.text.startswith("export RCCL_MSCCL_ENABLE=0 && ")
    assert "prerequisite-system-validation" in planted.evidence[0]
    amds = _check({"RCCL_MSCCL_ENABLE": "0", "TORCH_NCCL_HIGH_PRIORITY": "1", "NCCL_IB_GID_INDEX": "3",
                   "NCCL_IB_HCA": ",".join(f"rdma{i}" for i in range(8))}, "env.rccl_validation")
    assert amds.status is Status.PASS and "agree" in amds.summary


def test_the_nic_list_gives_each_gpu_its_nic():
    """Eight InfiniBand NICs, each with one ACTIVE port (a planted /sys/class/infiniband record), for eight GPUs."""
    ib = {"present": True, "hcas": {f"mlx5_{i}": {"ports": {"1": {"state": "ACTIVE", "link_layer": "InfiniBand",
                                                                 "gids": {}}}} for i in range(8)}}

    def nccl_ib(hca: str):
        return verdicts(amd_machine(env={"NCCL_IB_HCA": hca}, node_health={"infiniband": ib}), "env.nccl_ib")[
            "env.nccl_ib"]

    one = nccl_ib("mlx5_0")
    assert one.status is Status.WARN
    assert "lets the job use 1 of this node's 8 active RDMA NICs for 8 GPUs" in one.summary
    assert nccl_ib("mlx5").status is Status.PASS  # a prefix: all eight
    assert nccl_ib("^mlx5_8").status is Status.PASS  # an exclusion list


def test_leftover_runtime_knobs_are_named():
    r = _check({"GPU_MAX_HW_QUEUES": "2", "HSA_ENABLE_SDMA": "0", "HIP_FORCE_DEV_KERNARG": "1"}, "env.runtime_knobs")
    assert r.status is Status.WARN and "GPU_MAX_HW_QUEUES=2" in r.summary and "HSA_ENABLE_SDMA=0" in r.summary
    assert r.fix.text.startswith("unset GPU_MAX_HW_QUEUES HSA_ENABLE_SDMA")
    alone = _check({"HIP_FORCE_DEV_KERNARG": "1"}, "env.runtime_knobs")
    assert alone.status is Status.PASS and "HIP_FORCE_DEV_KERNARG=1" in alone.summary


def test_the_collector_records_what_these_checks_read(monkeypatch):
    planted = {"TORCH_NCCL_HIGH_PRIORITY": "0", "GPU_MAX_HW_QUEUES": "2", "OMPI_COMM_WORLD_SIZE": "4",
               "WORLD_SIZE": "16"}
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    facts = collect_facts(deadline_s=20, python_probes=False)
    assert {k: facts.env.get(k) for k in planted} == planted


def test_digit_runs_too_long_for_a_number_are_not_counts():
    """A launcher variable or a knob of 5,000 digits is not a count: the ranks are counted from the GPUs instead (8
    here), the knob is judged as no number; never a crash."""
    huge = "9" * 5000
    channels = _check({"NCCL_MIN_NCHANNELS": "112", "TORCHELASTIC_RUN_ID": "j", "WORLD_SIZE": huge},
                      "env.nccl_channels")
    assert channels.status is Status.PASS and any("no launcher" in line for line in channels.evidence)
    knobs = _check({"GPU_MAX_HW_QUEUES": huge}, "env.runtime_knobs")
    assert knobs.status is Status.WARN and "GPU_MAX_HW_QUEUES" in knobs.summary
