"""Causes and readers written from the tuning part of the recorded threads (tests/fixtures/triage_threads/tune/),
each tested on the real pastes it was written from and on real lines it must leave alone."""

from __future__ import annotations

import json

from conftest import PROJECT_FIXTURES_DIR

from rocmcheck.triage import shapes, triage


def _tune_paste(name: str) -> str:
    path = PROJECT_FIXTURES_DIR / "triage_threads" / "tune" / f"{name}.json"
    return json.loads(path.read_text("utf-8"))["paste"]


def _top_ids(text: str, n: int = 3) -> list[str]:
    return [f.id for f in triage([("p", text)]).findings[:n]]


def test_rocblas_without_a_kernel_library_for_the_arch_on_windows():
    """YellowRoseCx/koboldcpp-rocm#91: a Windows build whose bundled rocBLAS lacks the gfx1100 Tensile files. The
    Linux-only causes of the same line (the ROCm release's GPU list, HSA_OVERRIDE_GFX_VERSION) do not hold on
    Windows; the missing library does, and its fix names no Linux or ROCm-on-Linux step."""
    t = triage([("p", _tune_paste("YellowRoseCx-koboldcpp-rocm-91"))])
    top = t.findings[0]
    assert top.id == "rocblas.arch_library_missing"
    assert "for GPU arch : gfx1100" in top.quotes[0].text
    for word in ("/opt/rocm", "sudo", "apt ", "HSA_OVERRIDE", "PYTORCH_ROCM_ARCH"):
        assert word not in top.fix.text


def test_nccl_shm_open_permission_denied_is_a_permission_not_a_size():
    """NVIDIA/nccl#328: shm_open in /dev/shm fails with Permission denied (the fix was chmod on /dev/shm); the
    segment error printed beside it is then evidence of the permission too. A segment that cannot grow for lack of
    space (nccl.shm_segment's own example) stays host.shm."""
    assert _top_ids(_tune_paste("NVIDIA-nccl-328"), 1) == ["host.shm_permission"]
    size = "NCCL WARN Error: failed to extend /dev/shm/nccl-xyz to 9637892 bytes\n"
    ids = _top_ids(size)
    assert ids[0] == "host.shm" and "host.shm_permission" not in ids


def test_pcie_acs_redirect_in_lspci_output():
    """NVIDIA/nccl#2079: GPUs behind bridges with ACS redirect on (ReqRedir+) deadlocked NCCL; lspci's ACSCtl line
    (and the summary of it the reporter wrote) names it. The bits off (ReqRedir-) are no evidence."""
    assert "pcie.acs_redirect" in _top_ids(_tune_paste("NVIDIA-nccl-2079"))
    on = "                ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    off = "                ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    assert _top_ids(on, 1) == ["pcie.acs_redirect"]
    assert "pcie.acs_redirect" not in _top_ids(off)


def test_mps_backend_refused_on_this_macos():
    """pytorch/pytorch#139425: torch 2.5 refuses MPS on macOS 12.7.6 with a message naming 12.3+ (the real floor
    was 13.0). The answer names the refusal and asks for the versions; its fix names no Linux or CUDA step."""
    t = triage([("p", _tune_paste("pytorch-pytorch-139425"))])
    top = t.findings[0]
    assert top.id == "macos.mps_os_too_old"
    for word in ("sudo", "apt ", "nvidia", "rocm"):
        assert word not in top.fix.text.lower()
    assert _top_ids("NotImplementedError: The operator 'aten::roll' is not currently implemented for the MPS "
                    "device.\n", 1) == ["shape.mps_op_missing"]


def test_a_wsl_kernel_older_than_the_first_with_gpu_compute():
    """vllm-project/vllm#6184: WSL's kernel 5.10.16.3 is older than 5.10.43.3, the first WSL kernel with GPU compute
    (NVIDIA's CUDA on WSL guide); the fix is Windows' `wsl --update`. The catalogue's WSL example kernel, 5.15.153.1,
    is new enough."""
    t = triage([("p", _tune_paste("vllm-project-vllm-6184"))])
    assert [s for s, _ in t.pasted.signs] == ["wsl.kernel_too_old"]
    top = t.findings[0]
    assert top.id == "wsl.kernel_too_old"
    assert top.fix.text.startswith("this WSL kernel is 5.10.16.3; GPU compute inside WSL 2 needs kernel 5.10.43.3")
    assert "wsl --update" in top.fix.text
    assert shapes.wsl_kernel_too_old(["Linux version 5.15.153.1-microsoft-standard-WSL2"]) is None
    assert shapes.wsl_kernel_too_old(["Linux version 4.4.0-19041-Microsoft"]) is None  # WSL 1: no such kernel


SMI_PROCESSES = (  # apache/mxnet#4242's Processes table (older driver: GPU, PID, type)
    "|  GPU       PID  Type  Process name                               Usage      |\n"
    "|    0     31794    C   Unknown Error                                 5371MiB |\n"
)


def test_gpu_memory_held_on_an_idle_gpu_with_no_process_listed():
    """wencolani/CrossE#2: 12799 of 16280 MiB in use at 0% utilisation, no process listed (a leftover process held
    it). The same row beside a Processes table that lists a process, a busy GPU, or a little memory in use is no
    sign: the claim is conditional ("if no job of yours is running")."""
    paste = _tune_paste("wencolani-CrossE-2")
    t = triage([("p", paste)])
    assert [s for s, _ in t.pasted.signs] == ["nvidia_smi.idle_memory_held"]
    top = t.findings[0]
    assert top.id == "gpu.memory_held_idle" and top.text.startswith("If no job of yours is running")
    row = "| N/A   36C    P0    41W / 300W |  12799MiB / 16280MiB |      0%      Default |"
    assert shapes.idle_gpu_memory_held([row]) == row
    assert shapes.idle_gpu_memory_held([row] + SMI_PROCESSES.splitlines()) is None
    assert shapes.idle_gpu_memory_held([row.replace("     0%", "    87%")]) is None
    assert shapes.idle_gpu_memory_held([row.replace("12799MiB", "  301MiB")]) is None
    new = "|    0   N/A  N/A     12345      C   python                          500MiB |"
    assert shapes.idle_gpu_memory_held([row, new]) is None


def test_a_gpu_index_past_the_visible_gpus():
    """THUDM/slime#1326: gpu_id=6 under CUDA_VISIBLE_DEVICES='4,5,6,7' (four visible GPUs, indices 0-3) fails with
    "invalid device ordinal"; the fix names the visible list and where physical GPU 6 is in it. The error alone
    (unsloth#670's, tab-ddpm#20's) is the usual cause's evidence but no sign; an index inside the list is none."""
    t = triage([("p", _tune_paste("THUDM-slime-1326"))])
    assert [s for s, _ in t.pasted.signs] == ["gpu_index.beyond_visible"]
    top = t.findings[0]
    assert top.id == "shape.device_index_beyond_visible"
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7 makes this process see 4 GPU(s)" in top.fix.text
    assert "physical GPU 6 is index 2 there" in top.fix.text
    alone = "RuntimeError: CUDA error: invalid device ordinal\n"
    t = triage([("p", alone)])
    assert not t.pasted.signs and t.findings[0].id == "shape.device_index_beyond_visible" and t.findings[0].thin
    inside = ("Context: self.gpu_id=2 os.environ.get('CUDA_VISIBLE_DEVICES')='4,5,6,7'\n"
              "torch.AcceleratorError: CUDA error: invalid device ordinal\n")
    assert shapes.device_index_beyond_visible(shapes.lines_of([inside])) is None


def test_vllm_custom_all_reduce_hang():
    """vllm-project/vllm#8410: an 8-GPU tensor-parallel server whose NCCL collective hung on one rank until
    --disable_custom_all_reduce; ROCm/vllm#390's title names the same flag for AMD GPUs. The cause is stated with
    "if" (the paste points at the kernel, it does not trace the hang), and a line naming the kernel without a hang
    or the flag is no evidence."""
    t = triage([("p", _tune_paste("vllm-project-vllm-8410"))])
    top = [f for f in t.findings if f.id == "vllm.custom_all_reduce"]
    assert top and top[0].thin and top[0].text.startswith("If the hang is in vLLM's custom all-reduce")
    assert "--disable-custom-all-reduce" in top[0].fix.text
    rocm = "[Bug]: Multi-GPU AMD Setup Hangs without NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce\n"
    assert "vllm.custom_all_reduce" in _top_ids(rocm)
    assert "vllm.custom_all_reduce" not in _top_ids("INFO custom_all_reduce.py:44 custom allreduce is enabled\n")


def test_a_wheel_cuda_library_linked_against_another_copy_of_its_sibling():
    """pytorch/pytorch#103832: the nvidia-cublas wheel's libcublas.so.11 resolved libcublasLt.so.11 from the image
    (cublasLtGetStatusString missing); deepmodeling/deepmd-kit#2241's wording of the same failure ("symbol ...
    not defined in file ... with link time reference"). An undefined symbol in a library outside a wheel's
    nvidia/ folder is the generic reader's, not this cause."""
    assert _top_ids(_tune_paste("pytorch-pytorch-103832"), 1) == ["shape.system_library_shadows_wheel"]
    other = ("OSError: /home/u/envs/tf/lib/python3.10/site-packages/nvidia/cublas/lib/libcublas.so.11: symbol "
             "cublasLtHSHMatmulAlgoInit, version libcublasLt.so.11 not defined in file libcublasLt.so.11 with link "
             "time reference\n")
    assert _top_ids(other, 1) == ["shape.system_library_shadows_wheel"]
    plain = ("ImportError: /usr/lib/python3/dist-packages/foo/_C.so: undefined symbol: "
             "_ZN3c104cuda9SetDeviceEi\n")
    assert "shape.system_library_shadows_wheel" not in _top_ids(plain)


def test_a_command_and_its_argument_run_as_one_file_name():
    """hiyouga/LlamaFactory#3603: an exec-form CMD ["llamafactory-cli webui"] made the entrypoint look for a file
    named "llamafactory-cli webui". A missing file without a space (a real missing program) is not this cause."""
    assert _top_ids(_tune_paste("hiyouga-LlamaFactory-3603"), 1) == ["shape.command_and_argument_as_one_word"]
    missing = "/opt/nvidia/nvidia_entrypoint.sh: line 49: /usr/local/bin/llamafactory-cli: No such file or directory\n"
    assert "shape.command_and_argument_as_one_word" not in _top_ids(missing)


def test_a_cuda_only_build_under_a_rocm_torch():
    """Dao-AILab/flash-attention#205: flash-attn 1.0.4's setup asks for nvcc while torch is 1.13.1+rocm5.2: the
    release has no ROCm path. The same request beside a CUDA torch stays a missing build tool; the fix names no
    CUDA-only step on this ROCm paste."""
    t = triage([("p", _tune_paste("Dao-AILab-flash-attention-205"))])
    assert [s for s, _ in t.pasted.signs] == ["build.cuda_path_under_rocm"]
    top = t.findings[0]
    assert top.id == "shape.cuda_build_under_rocm"
    for word in ("nvcc", "whl/cu", "NVIDIA driver", "CUDA_VISIBLE_DEVICES"):
        assert word not in top.fix.text
    cuda = ("RuntimeError: flash_attn was requested, but nvcc was not found.  Are you sure your environment has nvcc "
            "available?\n      torch.__version__  = 2.1.0+cu121\n")
    assert shapes.cuda_build_under_rocm_torch(shapes.lines_of([cuda])) is None


def test_torch_not_compiled_with_cuda_names_the_program_asking_for_cuda_too():
    """karpathy/nanoGPT#281: train.py's device='cuda' default on a machine whose torch has no CUDA. The line keeps
    its usual cause first (a torch without CUDA installed, lm-sys/FastChat#2298's Windows CPU wheel); the program's
    request for CUDA is named beside it, with "if", and its fix names no vendor-only step."""
    t = triage([("p", _tune_paste("karpathy-nanoGPT-281"))])
    ids = [f.id for f in t.findings[:3]]
    assert ids[0] == "torch.build" and "code.cuda_device_requested" in ids
    f = next(f for f in t.findings if f.id == "code.cuda_device_requested")
    assert f.thin and f.text.startswith("If this machine has no CUDA GPU")
    assert "nvidia" not in f.fix.text.lower() and "whl/cu" not in f.fix.text
