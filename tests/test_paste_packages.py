"""Package listings (pip list, pip freeze, conda list) and pip's install log, on real pastes."""

from __future__ import annotations

from conftest import project_fixture

from rocmcheck.triage.readers.packages import (
    parse_conda_list,
    parse_packages,
    parse_pip_freeze,
    parse_pip_install,
    parse_pip_list,
)
from rocmcheck.triage.readers.paste import split

P = "pastes/"


def _block(relpath: str, kind: str) -> str:
    return split(project_fixture(P + relpath)).of_kind(kind)[0].text


def test_pip_list_keeps_local_labels():
    text = _block("pip_list/pip-list_torch-2.8.0+rocm6.4_comfyui_Radeon680M_ROCm-5225.txt", "pip_list")
    pkgs = parse_pip_list(text)
    assert len(pkgs.versions) == 96
    assert pkgs.version("torch") == "2.8.0+rocm6.4" and pkgs.version("torchvision") == "0.23.0+rocm6.4"
    assert pkgs.version("torchaudio") == "2.8.0" and pkgs.version("pytorch-triton-rocm") == "3.4.0"
    assert pkgs.version("PyYAML") == "6.0.2" and pkgs.names["pyyaml"] == "PyYAML"
    assert pkgs.version("typing_extensions") == pkgs.version("typing-extensions") == "4.12.2"
    assert parse_packages(text).tool == "pip_list"


def test_pip_list_with_an_editable_location_column():
    pkgs = parse_pip_list(_block("pip_list/pip-list_Editable-project-location-column_root-prompt_LlamaFactory-3425_"
                                 "excerpt.txt",
                                 "pip_list"))
    assert pkgs.version("accelerate") == "0.29.3" and pkgs.version("bitsandbytes") == "0.41.3.post2"
    assert pkgs.version("conda_index") == "0.3.0" and pkgs.version("contourpy") is None  # the paste is cut there
    assert pkgs.details == {}  # no package of this excerpt is installed editable


def test_pip_freeze_with_a_note_after_a_line_and_a_file_url():
    text = _block("pip_freeze/pip-freeze_torch-2.4.0+rocm6.1_pytorch-triton-rocm-3.0.0_user-annotation-in-line_"
                  "ROCm-3132.txt",
                  "pip_freeze")
    pkgs = parse_pip_freeze(text)
    assert pkgs.version("torch") == "2.4.0+rocm6.1" and pkgs.version("pytorch-triton-rocm") == "3.0.0"
    assert pkgs.version("torchvision") == "0.19.0+rocm6.1" and pkgs.details["bitsandbytes"]["url"] == "file:///home/garrett/bnb"
    assert parse_packages(text).tool == "pip_freeze"


def test_pip_freeze_of_a_container_with_file_and_git_urls():
    pkgs = parse_pip_freeze(_block("pip_freeze/pip-freeze_NGC-container_file-URL-and-git-URL-lines_accelerate-2773_"
                                   "excerpt.txt", "pip_freeze"))
    assert pkgs.version("huggingface_hub") == "0.23.0" and pkgs.version("jinja2") == "3.1.2"
    assert pkgs.version("importlib-metadata") == "7.0.0" and pkgs.version("graphsurgeon") == "0.4.6"
    assert pkgs.version("jupyter-tensorboard") is None  # installed from git: the version is not in the line
    assert pkgs.details["jupyter-tensorboard"]["url"].startswith("git+https://github.com/cliffwoolley/")
    assert "llvmlite" in pkgs.names and pkgs.version("llvmlite") is None  # the paste is cut inside its URL


def test_versions_typed_in_freeze_form():
    # a person's list of versions, in pip freeze's form
    pkgs = parse_pip_freeze(_block("corpus/21-mit-han-lab-bevfusion-283.paste.txt", "pip_freeze"))
    assert pkgs.versions == {"torch": "1.8.1+cu101", "torchvision": "0.9.1+cu101", "torchaudio": "0.8.1"}


def test_conda_list_linux_and_windows():
    linux = _block("conda_list/conda-list_linux_cudatoolkit-10.1_in-details_empty-channel-column_pytorch-32369_"
                   "excerpt.txt",
                   "conda_list")
    pkgs = parse_conda_list(linux)
    assert pkgs.environment == "/home/rgommers/anaconda3/envs/pytorch-condabug"
    assert pkgs.version("cudatoolkit") == "10.1.243" and pkgs.details["cudatoolkit"] == {"build": "h6bb024c_0"}
    assert parse_packages(linux).tool == "conda_list"
    windows = parse_conda_list(_block("conda_list/conda-list_Windows_nvidia-channel-cuda-12.1-packages_conda-14054_"
                                      "excerpt.txt",
                                      "conda_list"))
    assert windows.environment == "D:\\Anaconda\\envs\\DL"
    assert windows.version("cuda-cudart") == "12.1.105" and windows.details["cuda-cudart"] == {"build": "0",
                                                                                              "channel": "nvidia"}
    assert windows.version("cuda-cccl_win-64") == "12.5.39"


def test_pip_install_finds_no_torch_for_the_python():
    r = parse_pip_install(_block("corpus/26-aqarooni02-Comfyui-AMD-Windows-Install-Script-1.paste.txt", "pip_install"))
    assert r.indexes == ["https://rocm.nightlies.amd.com/v2/gfx120X-all/"]
    assert r.not_found == ["torch"] and r.available == {"torch": "none"}
    assert r.installed == {"setuptools": "80.9.0", "wheel": "0.45.1"}


def test_pip_install_build_failures():
    r = parse_pip_install(_block("corpus/12-ROCm-flash-attention-80.paste.txt", "pip_install"))
    assert r.failed_builds == ["flash_attn"] and r.errors[0].startswith("ERROR: Failed to build installable wheels")
    blocks = split(project_fixture(P + "corpus/25-deepspeedai-DeepSpeed-2080.paste.txt")).of_kind("pip_install")
    assert parse_pip_install(blocks[-1].text).errors == ["metadata-generation-failed"]
