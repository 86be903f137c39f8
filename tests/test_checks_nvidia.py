"""The same doctor on NVIDIA: real nvidia-smi outputs (H100 SXM table, H100 NVL csv query)."""

from __future__ import annotations

from machines import ran, verdicts

from rocmcheck.facts.collect import Facts
from rocmcheck.result import Status


def nvidia_machine(torch_cuda: str = "12.4", arch_list=("sm_80", "sm_86", "sm_90")) -> Facts:
    return Facts(
        platform={"system": "Linux", "kernel": "6.8.0"},
        os_info={"id": "ubuntu", "version": "22.04", "name": "Ubuntu 22.04"},
        present={"/sys/module/nvidia": True},
        commands={"nvidia-smi": ran("nvidia-smi", "nvidia-smi/h100-sxm-8gpu-driver565.57.01-default.txt"),
                  # The csv query failed on this driver: the table alone must carry the doctor.
                  "nvidia-smi-query": ran("nvidia-smi-query", stdout="", returncode=2)},
        packages={"torch": f"2.5.1+cu{torch_cuda.replace('.', '')}"},
        limits={"memlock_soft": -1, "unlimited": -1, "shm_bytes": 64 << 30},
        probes={"torch": {"version": f"2.5.1+cu{torch_cuda.replace('.', '')}", "hip": None, "cuda": torch_cuda,
                          "cuda_available": True, "device_count": 8, "arch_list": list(arch_list), "devices": []}},
    )


def test_h100_table_gives_gpus_and_driver_cuda():
    facts = nvidia_machine()
    facts.commands["nvidia-smi-query"] = ran("nvidia-smi-query", stdout="", returncode=0)
    v = verdicts(facts, "nvidia", "gpu.present", "torch.build")
    assert v["gpu.present"].status == Status.PASS and "8 NVIDIA GPU" in v["gpu.present"].summary
    assert v["nvidia.driver_cuda"].status == Status.PASS and "12.7" in v["nvidia.driver_cuda"].summary
    assert v["torch.build"].status == Status.PASS


def test_failed_query_with_a_working_table_passes_and_says_why_the_query_failed():
    # An older driver refuses a --query-gpu field (compute_cap, exit 2): the table still lists the GPUs.
    v = verdicts(nvidia_machine(), "nvidia.smi")
    assert v["nvidia.smi"].status == Status.PASS and "8 GPU" in v["nvidia.smi"].summary
    assert any("--query-gpu" in e and "exited 2" in e for e in v["nvidia.smi"].evidence)


def test_failed_nvidia_smi_is_a_failing_verdict_with_its_reason():
    facts = nvidia_machine()
    facts.commands["nvidia-smi"] = ran("nvidia-smi", stdout="", returncode=9)
    v = verdicts(facts, "nvidia.smi")
    assert v["nvidia.smi"].status == Status.FAIL and "exited" in v["nvidia.smi"].summary


def test_driver_older_than_torch_cuda_fails():
    facts = nvidia_machine(torch_cuda="13.0")
    v = verdicts(facts, "nvidia.driver_cuda")
    assert v["nvidia.driver_cuda"].status == Status.FAIL and "13.0" in v["nvidia.driver_cuda"].summary


def test_h100_nvl_csv_query_matches_the_product(fixture_text):
    # The published query is name,pci.device_id; the arch is not in it, so the product is matched by name only.
    from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv

    report = parse_nvidia_smi_csv(fixture_text("nvidia-smi/h100-nvl-query-name-pci-device-id-csv-noheader.txt"),
                                  ["name", "pci.device_id"])
    from rocmcheck.knowledge import arch_info

    assert arch_info("sm_90").match_product(report.gpus[0].product_name).name == "H100 NVL"


def test_rocm_torch_on_nvidia_machine_fails():
    facts = nvidia_machine()
    facts.probes["torch"] = {"version": "2.5.1+rocm6.2", "hip": "6.2", "cuda": None, "device_count": 0}
    v = verdicts(facts, "torch.build")
    assert v["torch.build"].status == Status.FAIL and "ROCm" in v["torch.build"].summary


def test_arch_specific_ptx_targets_are_understood():
    # Builds for Hopper-only features carry sm_90a / compute_90a; they run on sm_90 and not on older GPUs.
    facts = nvidia_machine(arch_list=("sm_80", "sm_90a", "compute_90a"))
    facts.commands["nvidia-smi-query"] = ran("nvidia-smi-query", stdout="", returncode=0)
    facts.probes["torch"]["devices"] = [{"capability": [9, 0]}] * 8
    v = verdicts(facts, "torch.arch_list")
    assert v["torch.arch_list"].status == Status.PASS
