"""parse_docker_run on real docker run command lines (ROCm and NVIDIA), and docker's own refusals."""

from __future__ import annotations

from conftest import project_fixture

from rocmcheck.triage.readers.docker_run import parse_docker_run
from rocmcheck.triage.readers.paste import split

D = "pastes/docker_run/"


def _runs(relpath: str):
    return [parse_docker_run(b.text) for b in split(project_fixture(relpath)).of_kind("docker_run")]


def test_vllm_rocm_multiline():
    [run] = _runs(D + "docker-run_rocm_unfenced-multiline_privileged_vllm-rocm_vllm-7207.txt")
    assert run.device_paths == ["/dev/kfd", "/dev/dri"] and run.group_add == ["video"] and run.ipc == "host"
    assert run.privileged and run.security_opt == ["seccomp=unconfined"] and run.cap_add == ["SYS_PTRACE"]
    assert (run.image, run.command, run.network) == ("vllm-rocm", ["bash"], "host")
    [same] = _runs("pastes/corpus/02-vllm-project-vllm-7207.paste.txt")
    assert same.devices == run.devices and same.image == run.image


def test_device_space_form_env_and_bash_c():
    [run] = _runs(D + "docker-run_rocm_StrixHalo_device-space-form_env-vars_bash-c_ROCm-5444.txt")
    assert run.devices == ["/dev/kfd", "/dev/dri"] and run.group_add == ["video", "render"] and run.shm_size == "16g"
    assert run.env["HSA_OVERRIDE_GFX_VERSION"] == "11.5.1" and run.env["PYTORCH_ROCM_ARCH"] == "gfx1151"
    assert run.image == "kyuz0/vllm-therock-gfx1151:stable" and run.command[:2] == ["bash", "-c"]


def test_quoted_devices_and_the_image():
    [run] = _runs("pastes/corpus/41-ROCm-ROCm-docker-36.paste.txt")
    assert run.devices == ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/renderD129"]
    assert run.image == "rocm/rocm-terminal" and run.command == [] and run.group_add == []


def test_nvidia_gpus_and_runtime():
    without, with_shm = _runs(D + "docker-run_nvidia_gpus-all_shm-size-fix_single-line-triple-backticks_video-"
                                  "diffusion-speedrun-2.txt")
    assert (without.gpus, without.shm_size) == ("all", None) and (with_shm.gpus, with_shm.shm_size) == ("all", "1g")
    [legacy] = _runs(D + "docker-run_nvidia_runtime-nvidia-legacy_NGC-tf1_inline-code_NVIDIA-nccl-290.txt")
    assert legacy.runtime_option == "nvidia" and legacy.gpus is None
    assert legacy.image == "nvcr.io/nvidia/tensorflow:20.01-tf1-py3" and legacy.command == ["sh"]
    [floyd] = _runs("pastes/corpus/36-floydhub-dockerfiles-3.paste.txt")
    assert floyd.gpus is None and floyd.devices == [] and floyd.command == ["ipython"]


def test_an_option_after_the_image_belongs_to_the_container():
    runs = _runs(D + "docker-run_rocm_privileged-AFTER-image-name_kfd-missing-error_l1na-sd-rocm-docker-8.txt")
    run = runs[0]
    assert run.image == "rocm/pytorch:latest" and run.command == ["--privileged"] and not run.privileged
    assert runs[1].errors == ['docker: Error response from daemon: error gathering device information while adding '
                              'custom device "/dev/kfd": no such file or directory.']


def test_mi355x_recipe_and_placeholder_image():
    [run] = _runs(D + "docker-run_rocm_MI355X_multiline-backslash_shm-size-128g_llm-d-pr1228.txt")
    assert run.shm_size == "128g" and run.devices == ["/dev/kfd", "/dev/dri"]
    assert run.volumes == ["/path/to/models:/models:ro"]
    [run] = _runs(D + "docker-run_rocm_device-kfd-dri_inline-code-single-line_placeholder-image_ROCm-pytorch-513.txt")
    assert run.image == "<dockername>" and run.runtime == "docker" and run.text.startswith("sudo docker run")


def test_a_text_without_docker_run():
    assert not parse_docker_run("docker ps -a").found and parse_docker_run(None).found is False
