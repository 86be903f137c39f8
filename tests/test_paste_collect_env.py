"""parse_collect_env on every collect_env layout in the fixtures (torch 1.1 to 2.9, CUDA and ROCm, vLLM's)."""

from __future__ import annotations

import pytest
from conftest import project_fixture, read_fixture

from rocmcheck.triage.readers.collect_env import parse_collect_env
from rocmcheck.triage.readers.paste import split

D = "pastes/collect_env/"


def _env(relpath: str, public: bool = False):
    text = read_fixture(relpath) if public else project_fixture(relpath)
    [block] = split(text).of_kind("collect_env")
    return parse_collect_env(block.text)


def test_torch_1_1_yes_no_and_pip_without_3():
    env = _env(D + "torch1.1.0a0_cuda10.0_macOS_GTX1060_Yes-No-booleans_pytorch-pr16999.txt")
    assert (env.torch_version, env.debug_build) == ("1.1.0a0+4335aac", False)
    assert (env.cuda_build, env.rocm_build) == ("10.0", None)
    assert env.cuda_available is True and env.cuda_runtime == "10.0.130" and env.os == "Mac OSX 10.13.6"
    assert env.gcc is None and env.fields["GCC version"] == "Could not collect"  # not known, never "absent"
    assert env.gpus == ["GeForce GTX 1060 with Max-Q Design"] and env.nvidia_driver == "1.1.0"
    assert env.cudnn == "/Users/hameerabbasi/cuda/lib/libcudnn.dylib" and env.python_version == "3.7"
    assert env.pip_packages == {"numpy": "1.15.4", "torch": "1.1.0a0+4335aac"}
    assert env.conda_packages["mkl-fft"] == "1.0.10" and env.conda_packages["torch"] == "1.1.0a0+4335aac"


def test_torch_1_7_first_rocm_fields():
    env = _env(D + "torch1.7.0a0_rocm3.7_first-HIP-fields_MI50-66a1_pytorch-pr44106_excerpt.txt")
    assert env.cuda_build is None and env.rocm_build == "3.7.20315-077bcfa0"
    assert (env.hip_runtime, env.miopen, env.cuda_available) == ("3.18.2", "2.6.0", True)
    assert env.gpus == ["Device 66a1"] and env.gpu_archs == [] and env.nvidia_driver is None
    assert env.python_version == "3.6" and env.pip_packages["torchvision"] == "0.8.0a0+a4736ea"


def test_cuda_2_0_with_a_warning_before_the_report():
    env = _env(D + "torch2.0.1+cu117_H100-PCIe_sm90-UserWarning_pytorch-110153_excerpt.txt")
    assert env.torch_version == "2.0.1+cu117" and env.cuda_build == "11.7" and env.cuda_runtime == "12.2.140"
    assert env.gpus == ["NVIDIA H100 PCIe"] and env.nvidia_driver == "535.104.12" and env.cuda_module_loading == "EAGER"
    assert env.warnings[0].endswith("UserWarning:") and "sm_90 is not compatible" in env.warnings[1]
    assert env.python_platform == "Linux-5.15.0-84-generic-x86_64-with-glibc2.35"
    assert env.sections == ["report", "cpu"] and env.cpu == {"Architecture": "x86_64"}  # cut inside the CPU block


def test_one_line_per_gpu():
    env = _env(D + "torch2.4.1+cu121_8xA100-SXM4-40GB_multiline-GPU-list_AWS_pytorch-134366_excerpt.txt")
    assert env.gpus[:6] == ["NVIDIA A100-SXM4-40GB"] * 6 and env.gpus[6] == "NVIDIA A100-SXM"  # cut mid-name
    assert env.clang == "10.0.0-4ubuntu1"


@pytest.mark.parametrize("name, torch, rocm, hip, miopen, gpu, arch", [
    ("torch2.1.2+rocm6.1.3_WSL2_RX6800XT_with-prompt_no-CPU-block_ROCm-3581.txt", "2.1.2+rocm6.1.3",
     "6.1.40093-bd86f1708", "6.1.40093", "3.1.0", "AMD Radeon RX 6800 XT", []),
    ("torch2.7.0+rocm6.3_MI100_gfx908_pytorch-152941_excerpt.txt", "2.7.0+rocm6.3", "6.3.42131-fa1d09cbd",
     "6.3.42131", "3.3.0", "AMD Instinct MI100 (gfx908:sramecc+:xnack-)", ["gfx908"]),
    ("torch2.9.1+rocm7.13_MI300X_Caching-allocator-config_pytorch-180500_excerpt.txt", "2.9.1+rocm7.13.0a20260401",
     "7.13.60800-96e30b429c", "7.13.60800", "3.5.1", "AMD Instinct MI300X (gfx942:sramecc+:xnack-)", ["gfx942"]),
])
def test_rocm_builds(name, torch, rocm, hip, miopen, gpu, arch):
    env = _env(D + name)
    assert (env.torch_version, env.rocm_build, env.hip_runtime, env.miopen) == (torch, rocm, hip, miopen)
    assert env.cuda_build is None and env.gpus == [gpu] and env.gpu_archs == arch and env.cuda_available is True
    assert env.torch_rocm == torch.split("+rocm")[1][:len(env.torch_rocm or "")]


def test_newest_layout_xpu_and_allocator_lines():
    env = _env(D + "torch2.9.1+rocm7.13_MI300X_Caching-allocator-config_pytorch-180500_excerpt.txt")
    assert env.xpu_available is False and env.xnnpack_available is True
    assert env.caching_allocator_config is None and env.fields["Caching allocator config"] == "N/A"
    assert env.cuda_module_loading is None and env.fields["CUDA_MODULE_LOADING set to"] == ""
    assert env.cpu["Model name"] == "AMD EPYC 9654 96-Core Processor" and env.cpu["CPU(s)"] == "384"
    cuda = _env(D + "torch2.9.1+cu126_H100-80GB_XPU-field_empty-CUDA_MODULE_LOADING_feral-18_excerpt.txt")
    assert cuda.cuda_build == "12.6" and cuda.gpus == ["NVIDIA H100 80GB HBM3"] and cuda.nvidia_driver == "580.126.09"
    assert cuda.python_version == "3.11.14" and "conda-forge" in cuda.python_version_text


def test_rocm_wheel_that_sees_no_gpu_with_cuda_pip_packages():
    env = _env(D + "torch2.8.0.dev+rocm6.4_WSL2_RX7900XT_CUDA-unavailable_unfenced_CPU-block_mixed-nvidia-libs_"
                   "ROCm-4864.txt")
    assert env.torch_version == "2.8.0.dev20250529+rocm6.4" and env.rocm_build == "6.4.43482-0f2d60242"
    assert env.cuda_available is False and env.gpus == [] and env.hip_runtime is None
    assert env.fields["GPU models and configuration"] == "No CUDA"
    assert env.pip_packages["nvidia-cudnn-cu12"] == "9.5.1.17" and env.pip_packages["triton"] == "3.3.0"
    assert env.pip_packages["pytorch-triton-rocm"] == "3.3.1+gitc8757738" and env.conda_packages == {}
    assert env.cpu["Vulnerability Spectre v2"].startswith("Mitigation; Retpolines")
    assert env.sections == ["report", "cpu", "libraries"] and env.warnings[0].startswith("<frozen runpy>:128")


def test_public_fixtures_vllm_and_wsl():
    vllm = _env("collect_env/mi300x-8gpu-vllm-collect-env-rocm6.1-torch2.4.1.txt", public=True)
    assert vllm.torch_version == "2.4.1+rocm6.1" and vllm.gpu_archs == ["gfx942"]
    assert vllm.fields["vLLM Version"] == "0.6.3.dev116+g151ef4ef"
    assert vllm.fields["ROCM Version"] == "6.1.40091-a8dbc0c19"
    assert vllm.pip_packages["torchvision"] == "0.16.1+fdea156" and vllm.conda_packages == {}
    wsl = _env("collect_env/wsl2-rx7900xtx-gfx1100-rocm6.3.4-torch2.4.0.txt", public=True)
    assert wsl.gpu_archs == ["gfx1100"] and wsl.torch_rocm == "6.3.4"
    assert any("Can't initialize amdsmi" in w for w in wsl.warnings)


def test_an_excerpt_from_versions_of_relevant_libraries_on():
    [block] = split(project_fixture("pastes/corpus/18-pytorch-pytorch-164346.paste.txt")).of_kind("collect_env")
    env = parse_collect_env(block.text)
    assert env.torch_version is None and env.sections == ["libraries"]
    assert env.pip_packages["torch"] == "2.10.0.dev20250929+rocm7.0"
    assert env.conda_packages["pytorch-triton-rocm"] == "3.5.0+gitbbb06c03"


def test_torch_1_11_cudnn_files_and_two_gpus():
    text = project_fixture("pastes/python_session/python-c_get_device_name-per-GPU-no-prompt_plus-collect_env-"
                           "torch1.11-cudnn-list_pytorch-75198_excerpt.txt")
    [block] = split(text).of_kind("collect_env")
    env = parse_collect_env(block.text)
    assert env.torch_version == "1.11.0" and env.cuda_build == "11.3" and env.nvidia_driver == "510.47.03"
    assert env.gpus == ["NVIDIA Graphics Device", "NVIDIA GeForce RTX 3090"]
    assert env.cudnn == "Probably one of the following:" and env.cudnn_files[0].endswith("libcudnn.so.7.6.5")
    assert env.cudnn_files[-1].endswith("libcudnn_o") and len(env.cudnn_files) == 8  # the paste is cut there


def test_therock_device_wheels_are_torchs_build_and_its_archs():
    # ROCm/pytorch#3518: collect_env's "[pip3]" lines of TheRock's multi-arch torch, one device wheel per arch (and the
    # family bundles gfx11, gfx12-0), each with torch's version; the excerpt stops inside the last line.
    from conftest import project_fixture

    from rocmcheck.triage.readers.collect_env import parse_collect_env

    ce = parse_collect_env(project_fixture("pastes/collect_env/pip3-section_TheRock-amd-torch-device-gfx-wheels_"
                                           "torch2.12.0+rocm7.14.0_MI250_pytorch-3518_excerpt.txt"))
    assert (ce.torch_version, ce.torch_build, ce.torch_rocm) == (None, "2.12.0+rocm7.14.0", "7.14.0")
    assert {"gfx90a", "gfx942", "gfx950", "gfx11", "gfx12-0"} <= set(ce.torch_device_archs)
    assert len(ce.torch_device_archs) == 26 and not ce.gpu_archs  # the wheels' archs, not the machine's GPUs
    from rocmcheck.triage.pasted import read_pastes

    text = project_fixture("pastes/collect_env/pip3-section_TheRock-amd-torch-device-gfx-wheels_torch2.12.0+rocm7.14.0_"
                           "MI250_pytorch-3518_excerpt.txt")
    assert read_pastes([("paste", text)]).facts.packages == {"torch": "2.12.0+rocm7.14.0"}


def test_therocks_rocmsdk_label_is_a_rocm_build_with_no_rocm_version():
    # TheRock's Windows wheels (repo.radeon.com/rocm/windows/rocm-rel-7.1.1/torch-2.9.0+rocmsdk20251116-...whl): the
    # label is a build date.
    from rocmcheck.facts.parsers.versions import is_rocm_torch, parse_torch_rocm_suffix

    assert is_rocm_torch("2.9.0+rocmsdk20251116") and parse_torch_rocm_suffix("2.9.0+rocmsdk20251116") is None
    assert is_rocm_torch("2.12.0+rocm7.14.0rc0") and not is_rocm_torch("2.6.0+cu126") and not is_rocm_torch("2.6.0")
