"""`python -m torch.utils.collect_env` (and vLLM's `collect_env`, a superset) -> CollectEnv.

Written against every layout in tests/fixtures/pastes/collect_env/ and tests/fixtures/public/collect_env/:
torch 1.1 (pytorch-pr16999: "Is debug build: No", "[pip]", no ROCM line), torch 1.7 (pytorch-pr44106: the first
"ROCM used to build PyTorch" / "HIP runtime version" / "MIOpen runtime version" lines), torch 2.0-2.8 (a
"CUDA_MODULE_LOADING set to" line, the lscpu "CPU:" block, a UserWarning printed before the report, one
"GPU N: name" line per GPU under "GPU models and configuration:"), torch 2.9+ ("Is XPU available",
"Caching allocator config", an empty "CUDA_MODULE_LOADING set to:"), and vLLM's extra lines ("ROCM Version",
"vLLM Version", "vLLM Build Flags"). A paste may start or stop anywhere (an excerpt from "Versions of relevant
libraries:" on, as in triage-corpus 18-pytorch-pytorch-164346). Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.facts.parsers.versions import parse_torch_rocm_suffix, torch_device_wheels, torch_version_of
from rocmcheck.triage.readers._read import as_bool, known, normalize_name, read_lines

# collect_env's own labels -> CollectEnv attribute (torch/utils/collect_env.py, env_info_fmt, every release).
_FIELDS = {
    "PyTorch version": "torch_version",
    "CUDA used to build PyTorch": "cuda_build",
    "ROCM used to build PyTorch": "rocm_build",
    "OS": "os",
    "GCC version": "gcc",
    "Clang version": "clang",
    "CMake version": "cmake",
    "Libc version": "libc",
    "Python platform": "python_platform",
    "CUDA runtime version": "cuda_runtime",
    "CUDA_MODULE_LOADING set to": "cuda_module_loading",
    "Nvidia driver version": "nvidia_driver",
    "cuDNN version": "cudnn",
    "HIP runtime version": "hip_runtime",
    "MIOpen runtime version": "miopen",
    "Caching allocator config": "caching_allocator_config",
}
_BOOLS = {
    "Is debug build": "debug_build",
    "Is CUDA available": "cuda_available",
    "Is XNNPACK available": "xnnpack_available",
    "Is XPU available": "xpu_available",
}
_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_ ./()+-]*?):(?:\s(.*))?$")
_GPU_LINE = re.compile(r"^GPU (\d+): (.+)$")
_ARCH = re.compile(r"\((gfx[0-9a-f]+)(?::[^)]*)?\)\s*$", re.IGNORECASE)
# `(.*\S|.)\s*$`: what a lazy `(.+?)\s*$` captures, in one pass (it retried `\s*$` inside each run of spaces).
_PIP = re.compile(r"^\[(pip3?)\]\s+(.*\S|.)\s*$")
_CONDA = re.compile(r"^\[conda\]\s+(.*\S|.)\s*$")
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==|===|@)\s*(\S+)")


@dataclass
class CollectEnv:
    torch_version: str | None = None  # "2.4.1+rocm6.1"
    debug_build: bool | None = None
    cuda_build: str | None = None  # "CUDA used to build PyTorch": "12.1"; None for "N/A" (not a CUDA build)
    rocm_build: str | None = None  # "ROCM used to build PyTorch": "6.1.40091-a8dbc0c19"; None for "N/A"
    os: str | None = None
    gcc: str | None = None
    clang: str | None = None
    cmake: str | None = None
    libc: str | None = None
    python_version: str | None = None  # "3.10.12" (the version alone)
    python_version_text: str | None = None  # the whole line: "3.10.12 (main, ...) [GCC 11.4.0] (64-bit runtime)"
    python_platform: str | None = None  # "Linux-5.15.0-84-generic-x86_64-with-glibc2.35"
    cuda_available: bool | None = None
    cuda_runtime: str | None = None
    cuda_module_loading: str | None = None
    gpus: list[str] = field(default_factory=list)  # as printed: "AMD Instinct MI300X (gfx942:sramecc+:xnack-)"
    gpu_archs: list[str] = field(default_factory=list)  # "gfx942", from the names that carry one
    nvidia_driver: str | None = None
    cudnn: str | None = None  # as printed: "8.9.2", a path, or "Probably one of the following:"
    cudnn_files: list[str] = field(default_factory=list)  # the libraries listed under "Probably one of the following:"
    hip_runtime: str | None = None  # "6.1.40093"
    miopen: str | None = None
    xnnpack_available: bool | None = None
    xpu_available: bool | None = None
    caching_allocator_config: str | None = None
    cpu: dict[str, str] = field(default_factory=dict)  # the lscpu block: "Model name" -> "AMD EPYC 9654 ..."
    pip_packages: dict[str, str] = field(default_factory=dict)  # PEP 503 name -> version: "torch" -> "2.4.1+rocm6.1"
    conda_packages: dict[str, str] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)  # every "Label: value" line as printed (vLLM's too)
    warnings: list[str] = field(default_factory=list)  # lines printed before the report (a UserWarning, ...)
    sections: list[str] = field(default_factory=list)  # "report", "cpu", "libraries": which parts the paste holds

    @property
    def torch_rocm(self) -> str | None:
        """The ROCm the torch wheel was built for, from its version label ("6.1" from "2.4.1+rocm6.1")."""
        return parse_torch_rocm_suffix(self.torch_build)

    @property
    def torch_build(self) -> str | None:
        """torch's version: "PyTorch version", else its "[pip3] torch==" line, else the version of TheRock's device
        wheels ("[pip3] amd-torch-device-gfx942==2.12.0+rocm7.14.0"); None when none is shown."""
        return self.torch_version or torch_version_of(self.pip_packages)

    @property
    def torch_device_archs(self) -> list[str]:
        """The archs (or arch families, "gfx11") whose TheRock torch device wheels are listed."""
        return sorted(torch_device_wheels(self.pip_packages))

    @property
    def found(self) -> bool:
        return bool(self.sections)


def parse_collect_env(text: Any) -> CollectEnv:
    """Never raises; what the text does not show stays None / empty.

    Written against tests/fixtures/pastes/collect_env/ (torch1.1.0a0_cuda10.0_macOS_GTX1060_Yes-No-booleans_...,
    torch1.7.0a0_rocm3.7_first-HIP-fields_MI50-66a1_..., torch2.0.1+cu117_H100-PCIe_sm90-UserWarning_...,
    torch2.4.1+cu121_8xA100-SXM4-40GB_multiline-GPU-list_..., torch2.8.0.dev+rocm6.4_WSL2_RX7900XT_CUDA-unavailable_...,
    torch2.9.1+rocm7.13_MI300X_Caching-allocator-config_... and the rest there), tests/fixtures/public/collect_env/
    mi300x-8gpu-vllm-collect-env-rocm6.1-torch2.4.1.txt and corpus/18-pytorch-pytorch-164346.paste.txt."""
    env = CollectEnv()
    section = "report"
    seen_report = False
    for raw in read_lines(text):
        line = raw.strip()
        if not line:
            if section in ("cpu", "gpus", "cudnn"):
                section = "report"
            continue
        if line.startswith("[pip") or line.startswith("[conda]"):
            _library(env, line)
            _mark(env, "libraries")
            continue
        if line == "Versions of relevant libraries:":
            section = "libraries"
            _mark(env, "libraries")
            continue
        if line == "CPU:":
            section = "cpu"
            _mark(env, "cpu")
            continue
        if section == "cpu":
            m = _LINE.match(line)
            if m and len(env.cpu) < 200:
                env.cpu[m.group(1).strip()] = (m.group(2) or "").strip()
                continue
            section = "report"
        if section == "gpus":
            m = _GPU_LINE.match(line)
            if m:
                _gpu(env, m.group(2))
                continue
            section = "report"
        if section == "cudnn" and line.startswith("/"):
            if len(env.cudnn_files) < 50:
                env.cudnn_files.append(line)
            continue
        if line.startswith("Collecting environment information"):
            _mark(env, "report")
            continue
        m = _LINE.match(line)
        if not m:
            if not seen_report and len(env.warnings) < 50:
                env.warnings.append(line[:500])
            continue
        label, value = m.group(1).strip(), (m.group(2) or "").strip()
        if label not in _FIELDS and label not in _BOOLS and label not in ("Python version", "GPU models and "
                                                                          "configuration") and not seen_report:
            if len(env.warnings) < 50:
                env.warnings.append(line[:500])
            continue
        if label == "PyTorch version" or label in _BOOLS or label in _FIELDS:
            seen_report = True
            _mark(env, "report")
        if len(env.fields) < 200:
            env.fields.setdefault(label, value)
        _field(env, label, value)
        if label == "GPU models and configuration" and not known(value):
            section = "gpus"
        elif label == "cuDNN version":
            section = "cudnn"
    return env


def _mark(env: CollectEnv, section: str) -> None:
    if section not in env.sections:
        env.sections.append(section)


def _field(env: CollectEnv, label: str, value: str) -> None:
    if label in _FIELDS:
        attr = _FIELDS[label]
        if getattr(env, attr) is None:
            setattr(env, attr, known(value))
    elif label in _BOOLS:
        attr = _BOOLS[label]
        if getattr(env, attr) is None:
            setattr(env, attr, as_bool(value))
    elif label == "Python version" and env.python_version is None:
        env.python_version_text = value or None
        m = re.match(r"(\d+\.\d+(?:\.\d+)?)", value)
        env.python_version = m.group(1) if m else None
    elif label == "GPU models and configuration" and known(value):
        _gpu(env, value)


def _gpu(env: CollectEnv, name: str) -> None:
    name = name.strip()
    m = _GPU_LINE.match(name)  # "GPU 0: NVIDIA H100 PCIe" on the label's own line
    if m:
        name = m.group(2).strip()
    if not known(name) or len(env.gpus) >= 64:
        return
    env.gpus.append(name)
    m = _ARCH.search(name)
    if m and m.group(1).lower() not in env.gpu_archs:
        env.gpu_archs.append(m.group(1).lower())


def _library(env: CollectEnv, line: str) -> None:
    m = _PIP.match(line)
    if m:
        req = _REQUIREMENT.match(m.group(2))
        if req and len(env.pip_packages) < 2000:
            env.pip_packages.setdefault(normalize_name(req.group(1)), req.group(2))
        return
    m = _CONDA.match(line)
    if m:
        parts = m.group(1).split()
        if len(parts) >= 2 and parts[0][0].isalnum() and re.match(r"^\d", parts[1]) and len(env.conda_packages) < 2000:
            env.conda_packages.setdefault(normalize_name(parts[0]), parts[1])
