"""parse_traceback on real tracebacks and error logs."""

from __future__ import annotations

from conftest import project_fixture

from rocmcheck.triage.readers.paste import split
from rocmcheck.triage.readers.traceback import parse_traceback

D = "pastes/traceback/"


def _tb(relpath: str, index: int = 0):
    return parse_traceback(split(project_fixture(relpath)).of_kind("traceback")[index].text)


def test_hip_oom_from_the_middle_of_a_traceback():
    tb = _tb(D + "hip-oom_GPU7-287.98GiB-MI355X-class_PYTORCH_CUDA_ALLOC_CONF-hint_pytorch-175431_excerpt.txt")
    assert tb.exception_type == "torch.OutOfMemoryError" and not tb.has_header
    assert tb.message.startswith("HIP out of memory. Tried to allocate 2.00 MiB. GPU 7 has a total capacity of "
                                 "287.98 GiB")
    assert [f.function for f in tb.frames] == ["_wrapped_call_impl", "_call_impl", "forward"]
    assert tb.frames[-1].code == "amax, _ = torch.max(torch.abs(block_x), dim=-1, keepdim=True)"
    assert tb.library is None and tb.frames[0].library == "torch"  # the failing frame is the program's own


def test_hip_oom_with_the_hip_alloc_conf_hint():
    tb = _tb(D + "hip-oom_PYTORCH_HIP_ALLOC_CONF-hint_RX7900XT-20GB_amdsmi-warning_autotrain-737_excerpt.txt")
    assert tb.exception_type == "torch.OutOfMemoryError"
    assert "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True" in tb.message
    assert any(w.category == "UserWarning" and "amdsmi" in w.message for w in tb.warnings)


def test_pytest_failed_lines_under_ci_timestamps():
    tb = _tb(D + "hip-oom_pytest-FAILED-lines_GitHub-Actions-timestamps_255.98GiB-MI325X_TheRock-2118_excerpt.txt")
    assert tb.exception_type == "torch.OutOfMemoryError" and "255.98 GiB" in tb.message


def test_invalid_device_function_three_ways():
    new = _tb(D + "invalid-device-function_torch.AcceleratorError_hipErrorInvalidDeviceFunction_rocm7.0-nightly_"
                  "pytorch-164346.txt")
    assert (new.exception_type, new.message) == ("torch.AcceleratorError", "HIP error: invalid device function")
    assert any("AMD_SERIALIZE_KERNEL=3" in line for line in new.message_lines)
    old = _tb(D + "invalid-device-function_RuntimeError_distributed-broadcast_R9700-gfx1201_verl-3163_excerpt.txt")
    assert old.exception_type == "RuntimeError" and old.library == "torch"
    assert old.failing_frame.function == "_sync_params_and_buffers"
    comfy = _tb(D + "invalid-device-function_ComfyUI-node-error_message-before-frames_ComfyUI-2842_excerpt.txt")
    assert comfy.exception_type is None and comfy.message == "HIP error: invalid device function"
    assert comfy.failing_frame.function == "load_checkpoint" and comfy.frame_count == 4


def test_no_code_object_for_the_gpu():
    quoted = _tb(D + "hipErrorNoBinaryForGpu_quoted_bash-Aborted-line_easydiffusion-1400.txt")
    assert quoted.message == "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"
    plain = _tb(D + "hipErrorNoBinaryForGpu_unquoted_NVIDIA-laptop_localized-bash-message_easydiffusion-1477.txt")
    assert plain.errors == ["hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"]


def test_hsa_error_from_clinfo():
    tb = _tb(D + "hsa-error-incompatible-kernel-userspace_Device-66af-RadeonVII_via-clinfo_NixOS_nixpkgs-128078_"
                 "excerpt.txt")
    assert tb.message == "HSA Error:  Incompatible kernel and userspace, Device 66af disabled. Upgrade amdgpu."


def test_flash_attn_undefined_symbol():
    tb = _tb("pastes/corpus/01-ayulockin-neurips-llm-efficiency-challenge-12.paste.txt")
    assert tb.exception_type == "ImportError" and tb.undefined_symbol == "_ZN3c104cuda9SetDeviceEi"
    assert tb.shared_object == "/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"
    assert tb.library == "flash_attn" and tb.chained == []


def test_a_library_the_loader_did_not_find_is_not_the_object_that_failed():
    """ld.so's "<name>: cannot open shared object file" names a dependency of the module being imported; the object
    that failed is the failing frame's (flash-attn's), and a missing path is still the object itself."""
    tb = _tb(D + "flash-attn-import_libcudart.so.12-not-found_torch-2.1.0-cu118_flash-attention-631_excerpt.txt")
    assert tb.exception_type == "ImportError" and tb.missing_library == "libcudart.so.12"
    assert tb.shared_object is None and tb.library == "flash_attn"
    missing = parse_traceback("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                              "OSError: /opt/conda/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so: "
                              "cannot open shared object file: No such file or directory")
    assert missing.missing_library is None
    assert missing.shared_object == "/opt/conda/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so"


def test_chained_torch_exception_keeps_the_nccl_message():
    tb = _tb("pastes/corpus/04-pytorch-torchtitan-853.paste.txt")
    assert tb.exception_type == "torch.distributed.DistBackendError" and "NCCL version 2.21.5" in tb.message
    assert "Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)" in tb.message_lines


def test_more_corpus_errors():
    tb = _tb("pastes/corpus/14-YanWenKun-ComfyUI-Docker-126.paste.txt")
    assert tb.has_header and tb.exception_type == "RuntimeError" and tb.message.startswith("Found no NVIDIA driver")
    assert tb.library == "torch" and tb.failing_frame.function == "_lazy_init" and tb.frame_count == 6
    tb = _tb("pastes/corpus/17-OpenRLHF-OpenRLHF-63.paste.txt")
    assert tb.exception_type == "ValidationError" and "zero_hpz_partition_size" in tb.message_lines
    tb = _tb("pastes/corpus/25-deepspeedai-DeepSpeed-2080.paste.txt")
    assert tb.exception_type == "FileNotFoundError" and "/opt/rocm/.info/version-dev" in tb.message
    assert tb.failing_frame.function == "installed_rocm_version" and tb.message_lines == [tb.message]
    tb = _tb("pastes/corpus/29-IEIT-Yuan-Yuan-2.0-65.paste.txt")
    assert tb.warnings[0].category == "UserWarning" and "found version 11000" in tb.warnings[0].message
    tb = _tb("pastes/corpus/11-ROCm-flash-attention-37.paste.txt")
    assert tb.exception_type == "AssertionError" and tb.failing_frame.file == "/opt/submodules/flash-attention/setup.py"


def test_nothing_to_find():
    tb = parse_traceback("the model trained for three epochs")
    assert not tb.found and tb.library is None and tb.failing_frame is None
