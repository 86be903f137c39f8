"""accelerate env, transformers env and llamafactory-cli env on real pastes."""

from __future__ import annotations

from conftest import project_fixture

from rocmcheck.triage.readers.env_reports import parse_env_report
from rocmcheck.triage.readers.paste import split


def _report(relpath: str, kind: str):
    [block] = split(project_fixture("pastes/" + relpath)).of_kind(kind)
    return parse_env_report(block.text)


def test_accelerate_0_15_old_layout():
    r = _report("accelerate_env/accelerate0.15.0_torch1.14.0a0-NGC-22.12_root-prompt_README.txt", "accelerate_env")
    assert r.tool == "accelerate" and r.versions["accelerate"] == "0.15.0" and r.versions["numpy"] == "1.22.2"
    assert (r.torch_version, r.torch_gpu, r.gpu_type) == ("1.14.0a0+410ce96", True, None)
    assert r.config["distributed_type"] == "NO" and r.config["mixed_precision"] == "fp16" and len(r.config) == 22


def test_accelerate_0_25_on_rocm():
    r = _report("accelerate_env/accelerate0.25.0_torch2.1.0+rocm5.6_MI210x4_DeepSpeed_HMT-README_excerpt.txt",
                "accelerate_env")
    assert (r.torch_version, r.torch_gpu, r.gpu_type) == ("2.1.0+rocm5.6", True, "AMD Instinct MI210")
    assert r.system_ram == "503.71 GB" and r.fields["PyTorch XPU available"] == "False"
    assert r.config["distributed_type"] == "DEEPSPEED" and r.config["num_processes"] == "4"
    assert "'zero_stage': 2" in r.config["deepspeed_config"]


def test_accelerate_1_10_tab_indented_config():
    r = _report("accelerate_env/accelerate1.10.0_torch2.8.0+cu128_H100-NVL_azure_tab-indented_README_excerpt.txt",
                "accelerate_env")
    assert r.torch_version == "2.8.0+cu128" and r.torch_gpu is None and r.accelerator == "CUDA"
    assert r.gpu_type == "NVIDIA H100 NVL" and r.python_version == "3.13.7"
    assert r.config["enable_cpu_affinity"] == "False" and r.config["distributed_type"] == "DEEPSPEED"


def test_transformers_env_with_log_noise_and_in_details():
    win = _report("transformers_env/transformers-cli-env_4.31.0.dev0_Windows_torch-cpu_TF-GPU_log-noise_README_"
                  "excerpt.txt",
                  "transformers_env")
    assert win.tool == "transformers" and win.versions["transformers"] == "4.31.0.dev0"
    assert (win.torch_version, win.torch_gpu) == ("2.0.1+cpu", False) and win.platform == "Windows-10-10.0.22621-SP0"
    assert win.versions["huggingface-hub"] == "0.15.1" and "jax" not in win.versions  # "not installed"
    linux = _report("transformers_env/transformers-cli-env_4.38.2_torch2.2.1+cu121_in-details-indented_jax-warning_"
                    "diffusers-pr7403.txt", "transformers_env")
    assert (linux.torch_version, linux.torch_gpu) == ("2.2.1+cu121", True) and linux.versions["accelerate"] == "0.28.0"
    assert linux.versions["jaxlib"] == "0.4.25" and linux.fields["Accelerate config"] == "not found"


def test_llamafactory_env_three_releases():
    old = _report("llamafactory_env/llamafactory0.9.1.dev0_torch2.3.0+cu121_H20_root-prompt_ds-INFO-line_"
                  "LlamaFactory-6118.txt",
                  "llamafactory_env")
    assert old.tool == "llamafactory" and (old.torch_version, old.torch_gpu) == ("2.3.0+cu121", True)
    assert old.gpu_type == "NVIDIA H20" and old.versions["deepspeed"] == "0.15.4"
    new = _report("llamafactory_env/llamafactory0.9.4.dev0_torch2.7.1+cu126_RTX2080Ti_GPU-number-memory_"
                  "LlamaFactory-8598.txt",
                  "llamafactory_env")
    assert (new.gpu_count, new.gpu_memory) == (1, "10.57GB") and new.versions["peft"] == "0.15.2"
    no_gpu = _report("llamafactory_env/llamafactory0.9.4.dev0_torch2.7.1+cu126_no-GPU-detected_vLLM_LlamaFactory-"
                     "9053.txt",
                     "llamafactory_env")
    assert no_gpu.torch_version == "2.7.1+cu126" and no_gpu.torch_gpu is None and no_gpu.gpu_type is None
    assert no_gpu.versions["vllm"] == "0.10.0"


def test_llamafactory_env_in_corpus_threads():
    r = _report("corpus/05-hiyouga-LlamaFactory-5633.paste.txt", "llamafactory_env")
    assert r.torch_version == "2.4.1+cu121" and r.gpu_type == "NVIDIA A40" and r.versions["trl"] == "0.9.6"
    r = _report("corpus/06-hiyouga-LlamaFactory-5843.paste.txt", "llamafactory_env")
    assert r.torch_version == "2.3.1+cu121" and r.torch_gpu is None and r.versions["transformers"] == "4.42.4"
