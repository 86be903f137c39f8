"""read_block: each block of a real paste goes to its reader, the GPU tools' blocks to the readers of
rocminfo.py, smi.py, nvidia_smi.py, hipconfig.py and kernel_log.py."""

from __future__ import annotations

from conftest import project_fixture, read_fixture

from rocmcheck.facts.parsers.models import HipConfig, RocminfoReport, SmiReport
from rocmcheck.triage.readers.collect_env import CollectEnv
from rocmcheck.triage.readers.paste import KINDS, split
from rocmcheck.triage.readers.paste_read import READERS, read_block


def _read(relpath: str, kind: str, public: bool = False):
    text = read_fixture(relpath) if public else project_fixture("pastes/" + relpath)
    return [read_block(b) for b in split(text).of_kind(kind)]


def test_every_kind_but_text_has_a_reader():
    assert set(READERS) == set(KINDS) - {"text"}


def test_rocminfo_blocks():
    [full] = _read("rocminfo/rocminfo_full_MI300X-x4_EPYC9474F_thamada-gls.txt", "rocminfo")
    assert isinstance(full, RocminfoReport) and [a.name for a in full.gpus] == ["gfx942"] * 4 and full.complete
    [kfd] = _read("corpus/10-ROCm-legacy-rocm-build-1798.paste.txt", "rocminfo")
    assert kfd.error_kind == "kfd_missing"  # the inline-code marks around each line are gone
    [wsl] = _read("rocminfo/rocminfo-support_WSL2_RX6800XT_no-ROCk-line_unpadded_ROCm-3581.txt", "rocminfo")
    assert wsl.gpus[0].marketing_name == "AMD Radeon RX 6800 XT"
    [hsa] = _read("corpus/23-rocm-arch-rocm-arch-901.paste.txt", "rocminfo")
    assert hsa.hsa_status == "HSA_STATUS_ERROR_OUT_OF_RESOURCES"


def test_smi_blocks():
    [concise] = _read("rocm_smi/concise_newstyle-partitions_MI300X-x4_SRIOV-VM_thamada-gls.txt", "rocm_smi")
    assert isinstance(concise, SmiReport) and len(concise.gpus) == 4 and concise.gpus[0].partition == "SPX"
    [as_json] = _read("rocm_smi/json_showproductname_MI250X-HPE_rocm_smi_lib-159.txt", "rocm_smi")
    assert as_json.gpus[0].device_id == "0x7408"
    version, ids = [read_block(b) for b in split(project_fixture(
        "pastes/rocm_smi/i_MI300X-partitioned_rocm6.4.1_NA-values_plus-amd-smi-version_ROCm-4759_excerpt.txt"))
        if b.kind != "text"]
    assert (version.tool, version.rocm_version) == ("amd-smi", "6.4.1")
    assert ids.gpus[0].product_name == "AMD Instinct MI300X"
    [static] = _read("amd_smi/static_MI350X_driver-6.18.3_rocm-systems-pr2987_excerpt.txt", "amd_smi")
    assert static.gpus[0].gfx == "gfx950"
    [table] = _read("nvidia_smi/default_H100-SXM-x8_565.57.01_cuda12.7_thamada-gls.txt", "nvidia_smi")
    assert (len(table.gpus), table.driver_version, table.cuda_version) == (8, "565.57.01", "12.7")


def test_nvidia_smi_csv_read_with_the_fields_of_its_command_or_header():
    header, noheader = _read("nvidia_smi/query-gpu-csv_name-memory-driver_plus-noheader-compute_cap_RTX5070_595.84_"
                             "notes.txt", "nvidia_smi")
    assert header.gpus[0].product_name == "NVIDIA GeForce RTX 5070" and header.driver_version == "595.84"
    assert noheader.gpus[0].compute_cap == "12.0"  # the fields come from `--query-gpu=compute_cap`
    [l40s] = _read("nvidia_smi/query-gpu-csv_index-name-memory_plus-query-compute-apps_L40S_deploy-"
                   "notes.txt", "nvidia_smi")
    assert l40s.gpus[0].product_name == "NVIDIA L40S"


def test_hipconfig_and_kernel_log_blocks():
    [config] = _read("hipconfig/hipconfig_rocm6.2.0_new-C++-layout_HIP_PLATFORM-amd-on-NVIDIA-box_hip-3521_excerpt.txt",
                     "hipconfig")
    assert isinstance(config, HipConfig) and config.hip_version_short == "6.2" and config.platform == "amd"
    [findings] = _read("kernel_log/ring-gfx-timeout_MES-failed_MODE2-reset_gfx11-APU_ROCm-6273_"
                       "excerpt.txt", "kernel_log")
    assert [f.pattern_id for f in findings][:2] == ["amdgpu_ring_timeout", "amdgpu_reset"]
    [findings] = _read("corpus/24-ROCm-legacy-rocm-build-5724.paste.txt", "kernel_log")
    assert findings and findings[0].device == "0000:c5:00.0"


def test_public_collect_env_through_the_dispatcher():
    [env] = _read("collect_env/mi300x-8gpu-vllm-collect-env-rocm6.1-torch2.4.1.txt", "collect_env", public=True)
    assert isinstance(env, CollectEnv) and env.hip_runtime == "6.1.40093"


def test_text_has_no_reader():
    [block] = split("the GPU works when I run it as root").of_kind("text")
    assert read_block(block) is None
