"""split_paste on real pastes: every triage-corpus thread, every fixture under tests/fixtures/pastes/ and the
public tool outputs, plus the bounds (a paste of many MB, a line of many MB) and the markdown and terminal noise
around real outputs."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, PROJECT_FIXTURES_DIR

from rocmcheck.triage.readers import paste as paste_module
from rocmcheck.triage.readers.paste import KINDS, MAX_KEPT_CHARS, MAX_LINE_CHARS, split, split_paste

PASTES = PROJECT_FIXTURES_DIR / "pastes"
CORPUS = sorted((PASTES / "corpus").glob("*.paste.txt"))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def _tools(text: str) -> list[str]:
    return [b.kind for b in split(text) if b.kind != "text"]


# Every corpus thread, the tools its paste shows, in order (read by hand from each paste). Text blocks are left out.
CORPUS_KINDS = {
    "01": ["traceback"], "02": ["docker_run"], "03": ["nccl_log"], "04": ["traceback"],
    "05": ["llamafactory_env", "traceback"], "06": ["llamafactory_env", "traceback"], "07": ["nccl_log"],
    "08": ["rocminfo"], "09": ["traceback"], "10": ["rocminfo"], "11": ["traceback"], "12": ["pip_install"],
    "13": [], "14": ["traceback"], "15": ["nccl_tests"], "16": ["traceback"], "17": ["traceback"],
    "18": ["collect_env"], "19": ["traceback"], "20": ["traceback"], "21": ["pip_freeze"], "22": ["rocminfo"],
    "23": ["rocminfo"], "24": ["kernel_log"], "25": ["pip_install", "traceback", "pip_install"],
    "26": ["pip_install"], "27": ["python_session"], "28": [], "29": ["traceback"], "30": ["uname", "dkms"],
    "31": [], "32": ["rocminfo"], "33": ["hip_log"], "34": ["python_session", "python_session"], "35": [],
    "36": ["docker_run", "python_session"], "37": ["traceback"], "38": ["nccl_log"], "39": [], "40": [],
    "41": ["docker_run", "rocminfo", "rocminfo"], "42": ["traceback", "kernel_log"], "43": [], "44": [],
    "45": ["python_session"], "46": ["rocminfo"], "47": ["traceback"], "48": ["rocm_smi"], "49": ["traceback"],
    "50": ["python_session"], "51": ["nvidia_smi", "nccl_log"], "52": [],
}


def test_the_corpus_is_all_here():
    assert len(CORPUS) == 52 and sorted(CORPUS_KINDS) == sorted(p.name[:2] for p in CORPUS)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name[:2])
def test_corpus_paste_kinds(path):
    assert _tools(_read(path)) == CORPUS_KINDS[path.name[:2]]


# Signature lines that only the named tool prints: a text block holding one means a tool's output was missed.
_MISSED = re.compile(
    r"^(?:PyTorch version: \d|ROCk module|HSA System Attributes|DeepSpeed C\+\+/CUDA extension|=+\s*ROCm System "
    r"Management Interface|\|?\s*NVIDIA-SMI \d|AMDSMI Tool:|Traceback \(most recent call last\)|HIP version\s*:"
    r"|nvcc: NVIDIA|Cuda compilation tools|Distributor ID:|PRETTY_NAME=|- `(?:Accelerate|transformers|llamafactory)`"
    r" version|\S+ NCCL (?:INFO|WARN)|# nThread|:\d:\w+\.cpp\s*:\d+|\[\s*\d+\.\d{6}\] amdgpu|Package\s+Version"
    r"|# packages in environment)", re.MULTILINE)


def _every_paste() -> list[Path]:
    return sorted(p for p in PASTES.rglob("*.txt") if not p.name.endswith(".source"))


@pytest.mark.parametrize("path", _every_paste(), ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_no_tool_output_is_left_as_text(path):
    for block in split(_read(path)):
        if block.kind == "text":
            assert not _MISSED.search(block.text), (block.first_line, block.text[:300])


# Fixture folder -> the kind each of its pastes must show (the folders of the GPU tools' outputs included: their
# blocks go to the readers in rocminfo.py, smi.py, nvidia_smi.py, hipconfig.py, kernel_log.py).
FOLDER_KIND = {name: name for name in KINDS if name != "text"}


@pytest.mark.parametrize("path", [p for p in _every_paste() if p.parent.name in FOLDER_KIND],
                         ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_each_fixture_shows_its_tool(path):
    assert FOLDER_KIND[path.parent.name] in _tools(_read(path))


# The public outputs that are printed with no signature line of their own (`--format=csv,noheader`), with the
# command that printed them (from tests/fixtures/public/README.md): a paste shows them after it.
_COMMANDS = {
    "nvidia-smi/h100-nvl-query-name-pci-device-id-csv-noheader.txt":
        "nvidia-smi --query-gpu=name,pci.device_id --format=csv,noheader",
    "nvidia-smi/h200x2-driver580-query-index-name-memory-driver-compute_cap-uuid-csv-noheader-nounits.txt":
        "nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version,compute_cap,uuid "
        "--format=csv,noheader,nounits",
}


@pytest.mark.parametrize("relpath", sorted(str(p.relative_to(FIXTURES_DIR)) for p in FIXTURES_DIR.rglob("*.txt")
                                           if not p.name.endswith(".source")))
def test_public_tool_outputs_are_named_by_their_tool(relpath):
    folder = relpath.split("/")[0].replace("-", "_")
    # hipconfig's full report carries `uname -a` and `lsb_release -a` in its "== Linux Kernel" part
    expected = {"os_release": {"os_release", "uname"}, "hipconfig": {"hipconfig", "uname", "lsb_release"}}.get(
        folder, {folder})
    text = (FIXTURES_DIR / relpath).read_bytes().decode("utf-8")
    if relpath in _COMMANDS:
        text = f"$ {_COMMANDS[relpath]}\n{text}"
    kinds = set(_tools(text))
    assert kinds and kinds <= expected | {"traceback"}, kinds  # amd-smi / collect_env print warnings first


# ---- what the blocks hold ----------------------------------------------------------------------------------------

def test_commands_are_kept_and_prompts_removed():
    text = _read(PASTES / "os_release" / "cat-os-release_Ubuntu-20.04.3_author-truncated-dots_plus-uname-HWE_blog-"
                                         "openwebui.txt")
    blocks = split(text)
    osr = blocks.of_kind("os_release")[0]
    assert osr.command == "cat /etc/os-release" and osr.fenced and osr.text.startswith('NAME="Ubuntu"')
    uname = blocks.of_kind("uname")[0]
    assert uname.command == "uname -a" and uname.text.startswith("Linux ien20s 5.15.0-92-generic")
    # the command line itself stays in the paste as text, prompt and all
    assert any(b.kind == "text" and b.text == "$ uname -a" for b in blocks)


def test_first_line_numbers_point_into_the_paste():
    for path in CORPUS + _every_paste()[:40]:
        text = _read(path)
        lines = text.split("\n")
        for block in split(text):
            first = re.sub(r"[*`]", "", block.text.split("\n")[0]).strip()
            assert 1 <= block.first_line <= block.last_line <= len(lines)
            line = re.sub(r"[*`]", "", lines[block.first_line - 1])
            assert first and first[:20] in line, (path.name, block.first_line, first)


def test_several_outputs_in_one_fence_told_apart():
    # hipconfig's old full report carries `uname -a` and `lsb_release -a` output in its "== Linux Kernel" part
    blocks = split(_read(PASTES / "hipconfig" / "hipconfig_rocm4.3_centos8_HSA-errors-interleaved_ROCm-1583.txt"))
    assert [b.kind for b in blocks if b.kind != "text"] == ["hipconfig", "uname", "lsb_release"]
    assert all(b.fenced for b in blocks if b.kind != "text")
    # one fence, two prompts: `amd-smi version` then `rocm-smi -i`
    blocks = split(_read(PASTES / "rocm_smi" / "i_MI300X-partitioned_rocm6.4.1_NA-values_plus-amd-smi-version_ROCm-"
                                               "4759_excerpt.txt"))
    assert [(b.kind, b.command) for b in blocks if b.kind != "text"] == [("amd_smi", "amd-smi version"),
                                                                        ("rocm_smi", "rocm-smi -i")]


def test_a_fence_left_open_ends_at_the_next_template_heading():
    text = _read(PASTES / "rocminfo" / "kfd-open-failed_plus-amd-smi-no-gpu_plus-rocm-smi-no-gpu_MI50-eGPU_"
                                       "rocm6.2.4_ROCm-6176.txt")
    blocks = split(text)
    rocminfo = blocks.of_kind("rocminfo")[0]
    assert "Additional Information" not in rocminfo.text
    assert rocminfo.text.splitlines()[-1] == "ubuntu is member of video group"
    assert [b.kind for b in blocks if b.kind != "text"] == ["rocminfo", "traceback", "amd_smi", "rocm_smi"]


def test_python_session_keeps_what_its_program_printed():
    blocks = split(_read(PASTES / "corpus" / "45-ROCm-hip-3710.paste.txt"))
    session = blocks.of_kind("python_session")[0]
    assert session.embedded == ("hip_log",) and "hipGetDeviceCount: Returned hipErrorNoDevice" in session.text
    assert session.text.splitlines()[0].startswith("$ AMD_LOG_LEVEL=7 python3 -c")
    blocks = split(_read(PASTES / "corpus" / "50-Parsl-parsl-3858.paste.txt"))
    session = blocks.of_kind("python_session")[0]
    assert session.embedded == ("traceback",) and session.text.count("python -c") == 4


def test_docker_run_over_several_lines_and_the_container_command():
    blocks = split(_read(PASTES / "docker_run" / "docker-run_rocm_unfenced-multiline_privileged_vllm-rocm_vllm-"
                                                 "7207.txt"))
    run = blocks.of_kind("docker_run")[0]
    assert run.text.splitlines()[0] == "docker run -it \\" and run.text.splitlines()[-1].strip() == "bash"
    # `docker run ... ipython`: what follows is an IPython session
    blocks = split(_read(PASTES / "corpus" / "36-floydhub-dockerfiles-3.paste.txt"))
    assert [b.kind for b in blocks if b.kind != "text"] == ["docker_run", "python_session"]
    assert blocks.of_kind("python_session")[0].command == "ipython"


def test_warnings_and_log_lines_stay_with_the_output_they_precede():
    blocks = split(_read(PASTES / "llamafactory_env" / "llamafactory0.9.1.dev0_torch2.3.0+cu121_H20_root-prompt_ds-"
                                                       "INFO-line_LlamaFactory-6118.txt"))
    env = blocks.of_kind("llamafactory_env")[0]
    assert env.text.startswith("[2024-11-23 13:16:23,920] [INFO]") and env.command == "llamafactory-cli env"
    text = (FIXTURES_DIR / "collect_env" / "wsl2-rx7900xtx-gfx1100-rocm6.3.4-torch2.4.0.txt").read_bytes().decode()
    [block] = split(text)
    assert block.kind == "collect_env" and block.text.startswith("/usr/lib/python3.10/runpy.py:126: RuntimeWarning")


def test_a_warning_on_its_own_is_an_error_log():
    blocks = split(_read(PASTES / "corpus" / "29-IEIT-Yuan-Yuan-2.0-65.paste.txt"))
    assert blocks[0].kind == "traceback" and "NVIDIA driver on your system is too old" in blocks[0].text


def test_inline_code_and_bold_are_taken_off_whole_lines():
    blocks = split(_read(PASTES / "corpus" / "10-ROCm-legacy-rocm-build-1798.paste.txt"))
    rocminfo = blocks.of_kind("rocminfo")[0]
    assert rocminfo.text.splitlines() == ["ROCk module is loaded", "Unable to open /dev/kfd read-write: No such file "
                                          "or directory", "Failed to get user name to check for video group membership"]
    assert rocminfo.command == "/opt/rocm-5.2.0/bin/rocminfo"


def test_a_rocminfo_pasted_from_the_middle_of_an_agent():
    blocks = split(_read(PASTES / "corpus" / "08-ROCm-legacy-rocm-build-5238.paste.txt"))
    assert [b.kind for b in blocks] == ["rocminfo"] and blocks[0].first_line == 1


def test_wrapped_and_elided_lines_stay_in_their_output():
    # the author's "..." inside a journalctl excerpt; a vmcore-dmesg with register dumps wrapped over lines and notes
    # typed between them
    [log] = split(_read(PASTES / "kernel_log" / "journalctl_ring-gfx-timeout_BACO-reset_VRAM-lost_kernel6.8_"
                        "cosmic-comp-2626_excerpt.txt")).of_kind("kernel_log")
    assert "\n...\n" in log.text and log.text.splitlines()[-1].startswith("Jul ")
    text = _read(PASTES / "kernel_log" / "oops-null-deref-kfd_iommu_unbind_init_user_pages_MI50_el8_ROCm-1536.txt")
    [log] = split(text).of_kind("kernel_log")
    inside = text.split("\n")[log.first_line - 1:log.last_line]
    assert log.text.count("\n") + 1 == len(inside) and any(not line.startswith("[") for line in inside if line)


def test_label_before_output_on_the_same_line():
    blocks = split(_read(PASTES / "nvcc" / "nvcc-V-single-line-quoted_plus-nvidia-smi-header-line_cuda10.2_pytorch-"
                                           "85332.txt"))
    assert [b.kind for b in blocks][:2] == ["nvidia_smi", "nvcc"]


def test_ci_and_launcher_prefixes_are_removed():
    text = _read(PASTES / "nccl_log" / "nccl-shm-No-space-left-on-device-28_CI-log-timestamps_pytorch-ci-infra-490_"
                                       "excerpt.txt")
    [block] = split(text).of_kind("nccl_log")
    assert "[2026-04-22 21:34:20]" not in block.text and "shmutils.cc:88 NCCL WARN" in block.text
    blocks = split(_read(PASTES / "corpus" / "11-ROCm-flash-attention-37.paste.txt"))
    tb = blocks.of_kind("traceback")[0]
    assert "10.47" not in tb.text and tb.text.splitlines()[-1].startswith("AssertionError: One of GPU archs")


# ---- the same real pastes as they reach the splitter through other hands ---------------------------------------

_SAMPLE = [PASTES / "collect_env" / "torch2.7.0+rocm6.3_MI100_gfx908_pytorch-152941_excerpt.txt",
           PASTES / "ds_report" / "ds_report_rocm6.0_torch2.3.1_deepspeed0.14.0_Singularity-LUMI-container_"
                                  "complete.txt",
           PASTES / "corpus" / "41-ROCm-ROCm-docker-36.paste.txt",
           PASTES / "pip_list" / "pip-list_torch-2.8.0+rocm6.4_comfyui_Radeon680M_ROCm-5225.txt"]


@pytest.mark.parametrize("path", _SAMPLE, ids=lambda p: p.name[:30])
def test_crlf_and_a_quoted_reply_give_the_same_blocks(path):
    text = _read(path)
    kinds = [(b.kind, b.text) for b in split(text)]
    assert [(b.kind, b.text) for b in split(text.replace("\n", "\r\n"))] == kinds
    quoted = "\n".join("> " + line if line else ">" for line in text.split("\n"))
    assert [(b.kind, b.text) for b in split(quoted)] == kinds


def test_colour_codes_real_and_as_caret_text():
    # rocm-smi recorded with literal "^[[...m" caret text by the terminal it was copied from
    text = (FIXTURES_DIR / "rocm-smi" / "mi300x-8gpu-rocm6.2.3-concise-ansi-literal.txt").read_bytes().decode()
    [block] = split(text)
    assert block.kind == "rocm_smi" and "^[" not in block.text
    coloured = _read(_SAMPLE[0]).replace("PyTorch version:", "\x1b[1;32mPyTorch version:\x1b[0m")
    assert [b.text for b in split(coloured)] == [b.text for b in split(_read(_SAMPLE[0]))]


# ---- bounds --------------------------------------------------------------------------------------------------

def test_a_paste_of_many_megabytes_is_read_in_linear_time_and_bounded_memory():
    unit = "\n".join(_read(p) for p in CORPUS)
    small, big = unit * 4, unit * 64  # ~0.15 MB and ~2.4 MB
    start = time.process_time()
    split(small)
    t_small = time.process_time() - start
    start = time.process_time()
    result = split(big)
    t_big = time.process_time() - start
    assert t_big < 16 * 3 * max(t_small, 0.01), (t_small, t_big)  # 16 times the text: well under 48 times the time
    kept = sum(len(b.text) for b in result)
    assert kept <= MAX_KEPT_CHARS and len(result) <= paste_module.MAX_BLOCKS
    assert result.truncated and result.dropped_lines > 0 and result.lines == big.count("\n")


def test_one_line_of_many_megabytes_is_cut():
    result = split("ROCk module is loaded\n" + "x" * (3 * MAX_LINE_CHARS) + "\nAgent 1\n")
    assert result.cut_lines == 1 and result.truncated
    assert max(len(line) for b in result for line in b.text.split("\n")) <= MAX_LINE_CHARS


def test_a_block_keeps_its_head_and_its_tail():
    log = _read(PASTES / "kernel_log" / "ring-gfx-timeout_MES-failed_MODE2-reset_gfx11-APU_ROCm-6273_excerpt.txt")
    lines = [line for line in log.splitlines() if line.startswith("[")]
    text = "\n".join(lines * 4000)  # ~6 MB of one kernel log
    [block] = split(text)
    assert block.kind == "kernel_log" and block.dropped_lines > 0
    assert block.text.startswith(lines[0]) and block.text.endswith(lines[-1])
    assert len(block.text) <= paste_module.MAX_BLOCK_HEAD_CHARS + paste_module.MAX_BLOCK_TAIL_CHARS


def test_split_paste_never_raises_on_what_it_is_handed():
    for odd in (None, b"\xff\xfe\x00garbage", "", "\n\n\n", 12345, "```\n" * 1000, "> " * 5000):
        result = split_paste(odd)
        assert isinstance(result, list) and all(b.kind in KINDS for b in result)


def test_every_known_tool_name_passes_bare_commands_quick_look():
    """bare_command returns at once on a line holding none of _KNOWN_PARTS: every name that makes a command known
    holds one."""
    from rocmcheck.triage.readers import shell

    names = [*shell._TOOL_KINDS, *shell._SUBCOMMANDS, "nvcc", "cat", "python", "python3.11", "py", "pypy3",
             "python.exe", "all_reduce_perf", "sendrecv_perf_mpi"]
    assert [n for n in names if not shell._KNOWN_PARTS.search(n)] == []
    assert shell.bare_command("llamafactory-cli env").kind == "llamafactory_env"
