"""first_compiler_error on real build logs as users posted them (excerpts, verbatim; sources per case)."""
# ruff: noqa: E501 - the logs are kept verbatim, their long compiler lines included

from rocmcheck.probes.build_log import first_compiler_error

# https://github.com/deepspeedai/DeepSpeed/issues/889 (cpu_adam JIT build; comment by zainali60)
DS_889 = """/root/anaconda3/envs/bitten/lib/python3.8/site-packages/deepspeed/ops/csrc/includes/gemm_test.h:6:10: fatal error: cuda_profiler_api.h: No such file or directory
#include <cuda_profiler_api.h>
^~~~~~~~~
compilation terminated.
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
File "/root/anaconda3/envs/bitten/lib/python3.8/site-packages/torch/utils/cpp_extension.py", line 1900, in _run_ninja_build
subprocess.run(
File "/root/anaconda3/envs/bitten/lib/python3.8/subprocess.py", line 512, in run
raise CalledProcessError(retcode, process.args,
subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.
"""

# https://github.com/deepspeedai/DeepSpeed/issues/4050 (cpu_adam; the reporter's excerpt ends at ninja's FAILED line)
DS_4050 = """Allowing ninja to set a default number of workers... (overridable by setting the environment variable MAX_JOBS=N)
[1/2] c++ -MMD -MF cpu_adam.o.d -DTORCH_EXTENSION_NAME=cpu_adam -DTORCH_API_INCLUDE_EXTENSION_H -DPYBIND11_COMPILER_TYPE=\\"_gcc\\" -DPYBIND11_STDLIB=\\"_libstdcpp\\" -DPYBIND11_BUILD_ABI=\\"_cxxabi1013\\" -I/home/ubuntu/.local/lib/python3.8/site-packages/deepspeed/ops/csrc/includes -I/usr/include -isystem /usr/lib/python3/dist-packages/torch/include -isystem /usr/lib/python3/dist-packages/torch/include/torch/csrc/api/include -isystem /usr/lib/python3/dist-packages/torch/include/TH -isystem /usr/lib/python3/dist-packages/torch/include/THC -isystem /usr/include/python3.8 -D_GLIBCXX_USE_CXX11_ABI=1 -fPIC -std=c++17 -O3 -std=c++17 -g -Wno-reorder -L/usr/lib64 -lcudart -lcublas -g -march=native -fopenmp -D__AVX512__ -D__ENABLE_CUDA__ -DBF16_AVAILABLE -c /home/ubuntu/.local/lib/python3.8/site-packages/deepspeed/ops/csrc/adam/cpu_adam.cpp -o cpu_adam.o 
FAILED: cpu_adam.o
"""

# https://github.com/mapillary/inplace_abn/issues/245 (a torch cpp_extension JIT build through nvcc)
NVCC_FATAL = """nvcc fatal   : Unsupported NVHPC compiler found. nvc++ is the only NVHPC compiler that is supported.
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
  File "/home/qmin2/anaconda3/envs/biicae/lib/python3.9/site-packages/torch/utils/cpp_extension.py", line 2100, in _run_ninja_build
    subprocess.run(
"""

# https://github.com/ROCm/TheRock/issues/4311 (HIP clang: several errors; the first one explains it)
HIP_CLANG = """/__w/TheRock/TheRock/external-builds/pytorch/pytorch/aten/src/ATen/native/hip/TensorTopK.hip:285:7: error: use of undeclared identifier 'warp_bases'
  warp_bases[warp_id] = atomicAdd(&writeIndexStart, warp_count);

/__w/TheRock/TheRock/external-builds/pytorch/pytorch/aten/src/ATen/native/hip/TensorTopK.hip:293:24: error: use of undeclared identifier 'warp_bases'; did you mean 'warp_mask'?
  int writeIndex = warp_bases[warp_id] + my_offset;
"""

# https://github.com/deepspeedai/DeepSpeed/issues/6892 (fused_adam under torchrun: every line carries a rank prefix,
# and this excerpt holds no compiler line at all)
DS_6892 = """Building extension module fused_adam...
Allowing ninja to set a default number of workers... (overridable by setting the environment variable MAX_JOBS=N)
[rank1]: Traceback (most recent call last):
[rank1]:   File "[..]/svgen2/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2105, in _run_ninja_build
[rank1]:     subprocess.run(
[rank1]:   File "[..]/.pyenv/versions/3.11.9/lib/python3.11/subprocess.py", line 571, in run
[rank1]:     raise CalledProcessError(retcode, process.args,
[rank1]: subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.
"""


def test_missing_header_is_the_first_error():
    assert first_compiler_error(DS_889) == (
        "/root/anaconda3/envs/bitten/lib/python3.8/site-packages/deepspeed/ops/csrc/includes/gemm_test.h:6:10: "
        "fatal error: cuda_profiler_api.h: No such file or directory")


def test_only_a_failed_target_falls_back_to_ninjas_failed_line():
    assert first_compiler_error(DS_4050) == "FAILED: cpu_adam.o"


def test_nvcc_fatal_line():
    assert first_compiler_error(NVCC_FATAL).startswith("nvcc fatal   : Unsupported NVHPC compiler found.")


def test_first_of_several_hip_errors():
    line = first_compiler_error(HIP_CLANG)
    assert line.endswith("TensorTopK.hip:285:7: error: use of undeclared identifier 'warp_bases'")


def test_python_traceback_lines_are_not_compiler_errors():
    assert first_compiler_error(DS_6892) is None
