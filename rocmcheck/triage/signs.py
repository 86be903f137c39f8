"""What the paste readers found that is evidence by itself, though no single line of text says it: a test run that
never printed its summary, a container started with no GPU at all. pasted.py records each with the pasted line
that shows it; a catalogue signature of the form {"fact": name} (rocmcheck/knowledge/signatures.json) turns it into
evidence of causes, exactly as a matched error text is.

Each name here is one reading rule, written where the reader's output is turned into facts (pasted.py)."""

from __future__ import annotations

SIGNS = {
    # nccl-tests / rccl-tests printed its devices (or its table header) and then neither a result row's summary
    # ("# Avg bus bandwidth") nor an error: the run stopped inside a collective. A run that ends normally always
    # prints the summary line (nccl-tests' common.cu), so a paste that shows the run without it shows a hang, or a
    # paste cut before the end (the quote lets the reader judge which).
    "nccl_tests.unfinished": "an nccl-tests / rccl-tests run printed no result summary and no error",
    # `docker run` with none of the flags that give a container a GPU: no --device for /dev/kfd or /dev/dri, no
    # --gpus, no --runtime=nvidia, no --privileged, and not started through nvidia-docker. Such a container has no
    # GPU device node, whichever the vendor.
    "docker_run.no_gpu": "a docker / podman run line that passes no GPU to the container",
    # `ls -l` shows /dev/kfd or a /dev/dri/renderD* node this user cannot read and write: by its mode and group and
    # who the pastes say the user is (`id`, `groups`, or a `$` prompt where only root may open the node). The HSA
    # runtime opens both read-write; without that it finds no GPU.
    "devices.no_access": "a listed AMD GPU device node this user cannot open read-write",
    # A CUDA runtime library a loader could not open (libcudart.so.11.0, cudart64_110.dll) belongs to one CUDA major
    # version, and every CUDA the pastes show (torch's +cuXYZ build, collect_env, nvcc, "CUDA 12.1") is another: the
    # module was built for that other CUDA (rocmcheck/triage/shapes.py, library_for_other_cuda).
    "cuda_library.other_major": "a missing CUDA runtime library of another CUDA major than the pastes show",
    # The pastes name one NVIDIA GPU whose arch rocmcheck's table knows, and every CUDA toolkit they show (nvcc's
    # release, "CUDA 11.3" in prose) predates the first toolkit that compiles for that arch (gpus.json's min_cuda):
    # nothing built here can target this GPU (rocmcheck/triage/shapes.py, gpu_newer_than_toolkit).
    "nvidia_gpu.newer_than_toolkit": "an NVIDIA GPU whose arch is newer than every CUDA toolkit the pastes show",
    # The pastes show both sides of the NVIDIA driver's age and they do not meet: the driver (nvidia-smi's,
    # collect_env's or dpkg's version, or the newest CUDA it runs: torch's "found version 11040", nvidia-smi's "CUDA
    # Version") is older than the floor of the CUDA torch was built for or a container asks (cuda_drivers.json), though
    # no error line says so (rocmcheck/triage/versions.py, driver_and_cuda).
    "nvidia_driver.older_than_cuda": "an NVIDIA driver older than the CUDA the pastes show torch or an image needs",
    # A library the loader could not open belongs to the other GPU vendor's stack than the paste's platform (a CUDA
    # runtime library on a ROCm machine, a ROCm one on a CUDA machine): the module that loads it is that vendor's
    # build (rocmcheck/triage/shapes.py, other_vendor_library).
    "library.other_vendor": "a missing library of the other GPU vendor's stack than the paste's platform",
    # The pastes name the machine's AMD GPU arch (rocminfo's ISA and agent names, amdgpu-arch's output, "GPU: ...
    # gfx1032", rocBLAS' "for GPU arch", ollama's gpu_type, llama.cpp's device line, HIP's code-object loader, hipcc's
    # unknown HIP target, a request for support) and no ROCm release in rocmcheck's table ships code for it
    # (rocmcheck/triage/shapes.py, amd_arch_not_supported).
    "amd_gpu.arch_not_supported": "an AMD GPU arch of this machine that no ROCm release ships code for",
    # A WSL 2 kernel version (uname -r, /proc/version: "5.10.16.3-microsoft-standard-WSL2") older than 5.10.43.3, the
    # first that runs GPU compute inside WSL (rocmcheck/triage/shapes.py, wsl_kernel_too_old).
    "wsl.kernel_too_old": "a WSL 2 kernel older than the first one that runs GPU compute",
    # nvidia-smi shows a GPU at 0% utilisation with a quarter or more of its memory (and at least 1 GiB) in use, and
    # lists no process using it: something the listing does not show holds that memory (rocmcheck/triage/shapes.py,
    # idle_gpu_memory_held).
    "nvidia_smi.idle_memory_held": "nvidia-smi shows GPU memory in use on an idle GPU with no process listed",
    # "invalid device ordinal" beside a *_VISIBLE_DEVICES list of n GPUs and a GPU index the program asked for
    # ("cuda:6", "gpu_id=6") that is n or more: indices count the visible GPUs from 0, not the physical ones
    # (rocmcheck/triage/shapes.py, device_index_beyond_visible).
    "gpu_index.beyond_visible": "a GPU index at or past the number of GPUs a *_VISIBLE_DEVICES list leaves visible",
    # A build asking for CUDA's compiler or toolkit ("nvcc was not found", "CUDA_HOME does not exist") where the
    # pastes show a ROCm build of torch (+rocmX, "ROCM used to build PyTorch"): the package's build took its CUDA
    # path on a ROCm machine (rocmcheck/triage/shapes.py, cuda_build_under_rocm_torch).
    "build.cuda_path_under_rocm": "a build asking for nvcc / CUDA_HOME beside a ROCm build of torch",
    # On a Windows or macOS paste, pip or an import names a package (pip's "requirement X", "Failed to build X", "No
    # module named 'X'", torch's "Cannot find a working triton installation") whose recent releases publish no wheel
    # for that system and no source build that runs there (rocmcheck/knowledge/wheel_platforms.json, from PyPI;
    # rocmcheck/triage/system_shapes.py, package_without_build).
    "package.no_build_for_os": "a package with no build for this Windows or macOS machine, failing to install or "
                               "import",
    # A package's own words that it does not run on this system ("X only supports Linux", "X is not supported on
    # Windows", "X does not support macOS"), on a paste that shows no Linux machine (rocmcheck/triage/system_shapes.py,
    # os_refusal).
    "package.refuses_os": "a package saying it does not run on this operating system (Linux only, or not on Windows "
                          "or macOS)",
}
