"""parse_python_session on real `python -c` one-liners, REPL and IPython sessions."""

from __future__ import annotations

from conftest import project_fixture

from rocmcheck.triage.readers.paste import split
from rocmcheck.triage.readers.python_session import parse_python_session

D = "pastes/python_session/"


def _session(relpath: str):
    [block] = split(project_fixture(relpath)).of_kind("python_session")
    return parse_python_session(block.text)


def test_two_one_liners_after_conda_prompts():
    s = _session(D + "python-c_torch2.1.0+cu118_is_available-True_conda-prompt_unfenced_robosense2025-track5-11.txt")
    assert (s.torch_version, s.cuda_available) == ("2.1.0+cu118", True) and len(s.runs) == 2


def test_amd_log_level_lines_between_the_output():
    s = _session("pastes/corpus/45-ROCm-hip-3710.paste.txt")
    assert s.cuda_available is False and s.runs[0].env == {"AMD_LOG_LEVEL": "7"}
    assert s.runs[0].output == ["False"]  # the HIP runtime's own log lines are not the program's output
    s = _session(D + "python-c_is_available-False_AMD_LOG_LEVEL_plus-rocminfo-fragment_680M-RX6500M_hip-3465_"
                     "excerpt.txt")
    assert s.cuda_available is False and s.python_version == "3.10.13"  # `python --version` after it


def test_repl_on_rocm_prints_the_hip_version():
    s = _session(D + "repl_torch.version.hip-3.0.19493_conda-root_ROCm-pytorch-513_part2.txt")
    assert (s.hip_version, s.hip_printed, s.python_version) == ("3.0.19493-36529b1", True, "3.6.9")
    s = _session(D + "repl_torch.version.cuda-silent-on-ROCm_docker-root_ROCm-pytorch-513_part1.txt")
    assert s.python_version == "3.6.9" and s.runs[0].statements == ["import torch", "torch.version.cuda"]
    assert s.cuda_printed is False  # the paste ends at the statement: what it printed is not known


def test_repl_and_ipython_is_available_false():
    s = _session("pastes/corpus/27-mcmonkeyprojects-SwarmUI-566.paste.txt")
    assert s.cuda_available is False and s.runs[0].command == "python"
    s = _session("pastes/corpus/36-floydhub-dockerfiles-3.paste.txt")
    assert s.cuda_available is False and s.python_version == "3.5.3" and s.runs[0].output == ["False"]


def test_device_count_per_run_and_the_traceback():
    s = _session("pastes/corpus/50-Parsl-parsl-3858.paste.txt")
    assert [r.values.get("torch.cuda.device_count()") for r in s.runs] == ["1", "0", "1", "1"]
    assert [r.env for r in s.runs][1] == {"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}
    assert s.runs[1].exception.exception_type == "RuntimeError"
    assert s.runs[1].exception.message == "No HIP GPUs are available" and s.exception is s.runs[1].exception
    assert s.runs[1].exception.library == "torch" and s.device_count == 1  # the last run's


def test_python_c_over_several_lines():
    first, second = [parse_python_session(b.text) for b in
                     split(project_fixture("pastes/corpus/34-pytorch-pytorch-183387.paste.txt")).of_kind("python_session")]
    assert first.runs[0].env == {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    assert first.runs[0].statements[0] == "import torch" and len(first.runs[0].statements) == 3
    assert second.runs[0].env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_arch_list_printed_on_one_line_and_pretty_printed_over_several():
    s = _session(D + "repl_print-get_arch_list_rocm7.2-wheel_uv-pr18730_excerpt.txt")
    assert s.arch_list[-3:] == ["gfx950", "gfx1150", "gfx1151"] and len(s.arch_list) == 14
    assert s.python_version == "3.12.3"
    s = _session(D + "repl_pprint-get_arch_list-multiline_torch2.7.1+rocm6.3_uv-14086.txt")
    assert s.torch_version == "2.7.1+rocm6.3" and s.arch_list[0] == "gfx900" and s.arch_list[-1] == "gfx1201"
    assert len(s.arch_list) == 11 and s.runs[0].command is None  # a bare `>>>` session


def test_device_names_from_one_liners_pasted_without_a_prompt():
    blocks = split(project_fixture(D + "python-c_get_device_name-per-GPU-no-prompt_plus-collect_env-torch1.11-"
                                       "cudnn-list_pytorch-75198_excerpt.txt"))
    [block] = blocks.of_kind("python_session")
    s = parse_python_session(block.text)
    assert s.device_names == ["NVIDIA Graphics Device", "NVIDIA GeForce RTX 3090"] and len(s.runs) == 2
