"""The platform a paste comes from, decided from the paste's own evidence, before any cause is named: ROCm on Linux,
CUDA on Linux, WSL, Windows, macOS, or a CPU-only stack. A cause and its fix hold for some platforms only
(rocmcheck/knowledge/signatures.json gives each cause's `platforms`); a fix for another platform than the paste's is
never offered, and where the paste does not show its platform and the fix depends on it, the answer says so and
asks the one thing that decides it.

The evidence, strongest first:
- the operating system: collect_env's "OS:" line, Windows drive paths (C:\\...), `WinError`, `.dll` loads, macOS
  paths (/Users/..., /opt/homebrew), `darwin` targets, MPS; WSL's kernel (`microsoft-standard-WSL2`), /usr/lib/wsl,
  /dev/dxg;
- the GPU stack: torch's build (`+cu121`, `+rocm6.2`, `+cpu`, collect_env's "CUDA used to build PyTorch" /
  "ROCM used to build PyTorch"), CUDA-only words (CUDA_LAUNCH_BLOCKING, nvcc, nvidia-smi, `sm_XX`, libcudart,
  cudaError...) and ROCm-only words (gfxNNN, hipcc, /opt/rocm, rocminfo, hipError..., HSA_STATUS, hipBLAS...).
  torch's own "CUDA error:" prefix is no evidence: a ROCm build prints it too; nor is a line that says what is
  absent (a loader's missing library names what a module was built against, a shell's "not found" what is missing).

Windows, macOS and WSL win over the vendor (unless the paste also shows Linux): CUDA on Windows is a Windows paste
(its fixes are not apt or modprobe), a CUDA error on a Mac is a Mac's;
WSL runs either vendor's stack on the Windows driver. Between ROCm and CUDA, torch's own build decides; else the
side with more distinct hints, and a tie is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from rocmcheck.triage.lines import LineIndex

PLATFORMS = ("rocm-linux", "cuda-linux", "wsl", "windows", "macos", "cpu")
GPU_LINUX = ("rocm-linux", "cuda-linux")

_WINDOWS = re.compile(
    r"(?:^|[\s\"'(=\[`])[A-Za-z]:\\\\?[\w$.~ -]+|\bWinError\b|\bOS: Microsoft Windows|\bwin_amd64\b|"
    r"\bMicrosoft (?:Visual )?C\+\+ (?:[\d.]+ or greater|Build Tools)|"
    r"\bPlatform: Windows|\bWindows-1\d-|\b\w+\.dll\b|\bPS [A-Z]:\\|\bWindows (?:10|11)\b|\bcmd\.exe\b|\.exe\b|"
    r"^\s*(?:OS:?\s*)?Windows\s*$|\b(?:on|using) Windows\b|windows下|\bWindowsPath\(|"
    # Python's own name for the system, as a package prints it: "Building on win32", "this platform (win32)".
    r"\b(?:on|platform:?|\()\s?win32\b|"
    # A drive path written with forward slashes, as Windows builds record their sources (D:/a/<repo>/...).
    r"(?:^|[\s\"'(=\[`])[A-Za-z]:/(?:[\w$.~ -]+/)+",
    re.IGNORECASE,
)
_MACOS = re.compile(
    r"\bOS: macOS|\bmacOS\b|\bdarwin\b|/Users/\w|/opt/homebrew|\bApple M\d|\bApple silicon|\bMPS (?:device|backend)|"
    r"\bfor the MPS device|\bmacosx_\d|\barm64-apple|ProductName:\s*mac|/private/var/folders/|\bMacBook|"
    r"\bM[1-4] (?:Max|Pro|Ultra|chip)\b",
    re.IGNORECASE,
)
# "including WSL" is a library naming where it runs ("vLLM only supports Linux platform (including WSL)"), printed
# on any machine: no evidence of this one.
_WSL = re.compile(r"microsoft-standard|(?<!including )\bWSL2?\b|/usr/lib/wsl\b|/dev/dxg\b", re.IGNORECASE)
_ROCM = re.compile(
    r"\+rocm\d|\bROCM used to build PyTorch: \d|\bHIP runtime version: \d|\bgfx\d{3,4}[a-f]?\b|\bhipcc\b|/opt/rocm|"
    r"\brocminfo\b|\brocm-smi\b|\bamd-smi\b|\bhipError\w+|\bHSA_STATUS_\w+|\bamdgpu\b|\blibamdhip64|\bROCm \d|"
    r"\bHSA_OVERRIDE_GFX_VERSION\b|\brocBLAS\b|\bMIOpen\b|\brccl\b|-ROCm\b|\bROCm device lib|"
    r"\bhip(?:blas|blaslt|sparse|fft|rand|solver)\w*|\bHIP error\b|\bAMD (?:GPU|Radeon|Instinct)s?\b|"
    r"\bNo HIP GPUs\b|\b(?:HIP|ROCR)_VISIBLE_DEVICES\b|\bhipify\w{0,20}|"
    # hipify (a build for ROCm translating CUDA sources: hipify_extension, hipify_python) and its summary
    r"\bTotal number of (?:unsupported CUDA function calls|replaced kernel launches)\b|"
    r"\bhip(?:GetLastError|GetDevice\w*|SetDevice|Malloc\w*|Memcpy\w*|LaunchKernel|DeviceSynchronize|ModuleLoad\w*)\b",
    re.IGNORECASE,
)
_CUDA = re.compile(
    r"\+cu\d{2,3}\b|\bCUDA used to build PyTorch: \d|\bCUDA_LAUNCH_BLOCKING\b|\bnvcc\b|\bnvidia-smi\b|"
    r"\bNVIDIA-SMI\b|\bsm_\d{2,3}a?\b|\bcompute capability\b|\blibcudart\b|\blibcuda\.so|\bcudaError\w*|"
    r"\bcuDNN\b|\bcublas\w*|\bCUDA driver version\b|\bGeForce\b|\bRTX ?\d{4}\b|\bTesla [VKTPA]\d+|\bA100\b|\bH100\b|"
    r"\bNVRM\b|\bnvidia-driver|nvrtc\b|\bCUDA_HOME\b|\bDriver Version: \d|\bcuda runtime error\b|"
    r"/usr/local/cuda|\blibcu\w+\.so|\blibnccl|\bNCCL (?:WARN|INFO|error)|\bunhandled cuda error|"
    r"\bCUDA[- ]capable|\bCUDA Version\b|\bnvidia_uvm\b|\bnvidia/\d{3}\.\d{2,3}(?:\.\d{2})?\b",
    re.IGNORECASE,
)
_CPU_BUILD = re.compile(r"\+cpu\b|\bCUDA used to build PyTorch: (?:None|N/A|Could not collect)")
_TORCH_CUDA = re.compile(r"\btorch[=\s-]*\d[\w.]*\+cu\d|\bCUDA used to build PyTorch: \d")
_TORCH_ROCM = re.compile(r"\btorch[=\s-]*\d[\w.]*\+rocm\d|\bROCM used to build PyTorch: \d")
_LINUX = re.compile(r"\bOS: (?:Ubuntu|Debian|CentOS|Red Hat|Rocky|Fedora|Arch|openSUSE)|\bLinux-\d|/home/\w|"
                    r"\bx86_64-linux-gnu\b|/usr/lib\b|\blinux_x86_64\b", re.IGNORECASE)
MAX_LINE = 4096
# Each pattern's literals (lower-case): every match holds one of them, so a line holding none is not searched
# (rocmcheck/triage/lines.py; tests/test_triage_platform.py checks them on real pastes).
_LITERALS = {
    "windows": (":\\", ":/", "winerror", "win_amd64", "windows", ".dll", ".exe", "microsoft", "win32"),
    "macos": ("macos", "darwin", "/users/", "/opt/homebrew", "apple", "mps ", "arm64-apple", "productname:",
              "/private/var/folders/", "macbook", "m1 ", "m2 ", "m3 ", "m4 "),
    "wsl": ("microsoft-standard", "wsl", "/dev/dxg"),
    "linux": ("os: ", "linux-", "/home/", "/usr/lib", "linux_x86_64"),
    "cpu": ("+cpu", "cuda used to build pytorch: "),
    "torch_cuda": ("+cu", "cuda used to build pytorch: "),
    "torch_rocm": ("+rocm", "rocm used to build pytorch: "),
    "rocm": ("rocm", "gfx", "hip", "amd-smi", "hsa_", "amdgpu", "rocblas", "miopen", "rccl", "amd ", "rocr_",
             "total number of "),
    "cuda": ("+cu", "cuda", "nvcc", "nvidia", "sm_", "compute capability", "cudnn", "cublas", "geforce", "rtx",
             "tesla ", "a100", "h100", "nvrm", "nvrtc", "driver version: ", "libcu", "libnccl", "nccl "),
}
_FIRST = (("windows", _WINDOWS), ("macos", _MACOS), ("wsl", _WSL), ("linux", _LINUX), ("cpu", _CPU_BUILD),
          ("torch_cuda", _TORCH_CUDA), ("torch_rocm", _TORCH_ROCM))
# On an ASCII line a pattern with re.ASCII matches what it does without (\w, \b, \d and case differ only past
# ASCII), and a case-insensitive one runs faster.
_ASCII = {p: re.compile(p.pattern, (p.flags & ~re.UNICODE) | re.ASCII) for p in (_ROCM, _CUDA, *dict(_FIRST).values())}


def _on(pattern: re.Pattern[str], line: str) -> re.Pattern[str]:
    return _ASCII[pattern] if line.isascii() else pattern


def shows_linux(lines: Iterable[str]) -> bool:
    """Whether the lines show a Linux machine (collect_env's OS line, a /home/ path, a Linux wheel or kernel), whatever
    its GPU stack: decide() names a Linux platform only with its vendor (or a CPU build)."""
    for line in lines:
        low = line.lower()
        if any(word in low for word in _LITERALS["linux"]):
            line = line[:MAX_LINE]
            if _on(_LINUX, line).search(line):
                return True
    return False


@dataclass(frozen=True)
class Platform:
    name: str | None  # one of PLATFORMS, None: the paste does not show it
    evidence: str  # the pasted text that decided it ("" when unknown)
    vendor: str | None = None  # "amd" | "nvidia": the GPU stack shown (also under WSL and Windows)

    @property
    def known(self) -> bool:
        return self.name is not None


def decide(lines: Iterable[str], torch_hip: str | None = None, torch_cuda: str | None = None,
           index: LineIndex | None = None) -> Platform:
    """The platform of the pasted lines (or of the lines of `index`, where the caller has one); torch's build as the
    readers read it (torch.version.hip / .cuda), when they did, decides the vendor. Each pattern is searched only in
    the lines that hold one of its literals."""
    if index is None:
        index = LineIndex(list(lines))
    lines = index.lines
    first: dict[str, str] = {}
    for name, pattern in _FIRST:
        for i in index.holding(_LITERALS[name]):
            line = lines[i][:MAX_LINE]
            m = _on(pattern, line).search(line)
            if m:
                first[name] = m.group(0).strip()
                break
    rocm = _words(_ROCM, lines, index.holding(_LITERALS["rocm"]))
    cuda = _words(_CUDA, lines, index.holding(_LITERALS["cuda"]))
    vendor, vendor_evidence = _vendor(first, rocm, cuda, torch_hip, torch_cuda)
    if "wsl" in first:
        return Platform("wsl", first["wsl"], vendor)
    if "windows" in first and "linux" not in first:
        return Platform("windows", first["windows"], vendor)
    if "macos" in first and "linux" not in first:
        return Platform("macos", first["macos"], None)
    if vendor == "amd":
        return Platform("rocm-linux", vendor_evidence, vendor)
    if vendor == "nvidia":
        return Platform("cuda-linux", vendor_evidence, vendor)
    if "cpu" in first:
        return Platform("cpu", first["cpu"], None)
    return Platform(None, "", None)


# A loader that cannot find a library names what the failing module was built against, not what the machine has
# (a CUDA wheel on an AMD machine asks for libnvrtc.so.12): such a line is no evidence of the machine's vendor.
_LIBRARY_NOT_FOUND = re.compile(r"cannot open shared object file|error while loading shared libraries|"
                                r"Could not load library|Failed to dlopen|Could not find module", re.IGNORECASE)
# A shell saying a command is missing ("sh: 1: /usr/local/cuda/bin/nvcc: not found", "bash: nvcc: command not
# found"): the words of that line name what is absent, which is no evidence of that vendor's stack (hipcc tries nvcc
# first and prints this on every AMD machine).
_SHELL_NOT_FOUND = re.compile(r"^\s*(?:(?:/bin/|/usr/bin/)?(?:sh|bash|dash|zsh)(?::\s*(?:line\s*)?\d+)?:\s*)?"
                              r"[\w./+-]{1,200}: (?:command )?not found\s*$")


def _words(pattern: re.Pattern[str], lines: list[str], which: list[int]) -> set[str]:
    """The distinct matches (lower-cased) of the pattern in those lines, but for the lines that say what is absent
    (a loader's missing library, a shell's missing command)."""
    out: set[str] = set()
    for i in which:
        line = lines[i][:MAX_LINE]
        if _SHELL_NOT_FOUND.match(line) or _LIBRARY_NOT_FOUND.search(line):
            continue
        out.update(m.group(0).lower() for m in _on(pattern, line).finditer(line))
    return out


def _vendor(first: dict[str, str], rocm: set[str], cuda: set[str], torch_hip: str | None,
            torch_cuda: str | None) -> tuple[str | None, str]:
    if torch_hip:
        return "amd", f"torch.version.hip {torch_hip}"
    if torch_cuda:
        return "nvidia", f"torch.version.cuda {torch_cuda}"
    if "torch_rocm" in first and "torch_cuda" not in first:
        return "amd", first["torch_rocm"]
    if "torch_cuda" in first and "torch_rocm" not in first:
        return "nvidia", first["torch_cuda"]
    if len(rocm) > len(cuda):
        return "amd", sorted(rocm)[0]
    if len(cuda) > len(rocm):
        return "nvidia", sorted(cuda)[0]
    return None, ""


# The platforms of a doctor check that no catalogue cause names (a check id's first part).
_CHECK_PLATFORMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nvidia.", ("cuda-linux", "wsl", "windows")),
    ("rocm.", ("rocm-linux",)), ("driver.", ("rocm-linux",)), ("devices.", ("rocm-linux",)),
    ("gpu.rocminfo", ("rocm-linux",)), ("env.hsa", ("rocm-linux", "wsl")), ("env.hip", ("rocm-linux",)),
    ("env.pytorch_rocm_arch", ("rocm-linux",)), ("env.tunableop", ("rocm-linux",)),
    ("env.scratch_reclaim", ("rocm-linux",)), ("gpu.partition", ("rocm-linux",)),
    ("host.", GPU_LINUX), ("health.", GPU_LINUX), ("os.", ("rocm-linux", "wsl")), ("wsl.", ("wsl",)),
    ("container.", GPU_LINUX + ("wsl",)),
)


def check_platforms(check_id: str) -> tuple[str, ...]:
    for prefix, platforms in _CHECK_PLATFORMS:
        if check_id.startswith(prefix):
            return platforms
    return PLATFORMS


# Fix texts that hold on one platform family only: a second guard beside the causes' own `platforms`, for a fix made
# from a template whose words depend on what was pasted.
_ROCM_FIX = re.compile(r"whl/rocm|rocm\d|HSA_OVERRIDE_GFX_VERSION|/dev/kfd|amdgpu|rocminfo|rocm-smi|amd-smi|hipcc|"
                       r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|PYTORCH_ROCM_ARCH|/opt/rocm", re.IGNORECASE)
_CUDA_FIX = re.compile(r"whl/cu\d|\+cu\d|nvidia-smi|NVIDIA driver|nvcc|CUDA_VISIBLE_DEVICES|cuda-toolkit|libcuda|"
                       r"\bnvidia-[\w-]+-cu\d+|\bCUDA(?: [\d.]+)? [Tt]oolkit\b|cuda-keyring|nvidia-docker|"
                       r"nvidia-container|NVIDIA [Cc]ontainer [Tt]oolkit|--gpus\b|\bnvidia\b",
                       re.IGNORECASE)
_LINUX_FIX = re.compile(r"\bapt(-get)?\s|\bdnf\s|\byum\s|modprobe|dkms|usermod|/dev/|/etc/|ldconfig|\bsudo\s",
                        re.IGNORECASE)
_HOST_DRIVER_FIX = re.compile(r"modprobe|dkms|nouveau|linux-headers|amdgpu-install", re.IGNORECASE)
_FOREIGN = {
    "cuda-linux": (_ROCM_FIX,),
    "rocm-linux": (_CUDA_FIX,),
    "wsl": (_HOST_DRIVER_FIX,),
    "windows": (_ROCM_FIX, _LINUX_FIX),
    "macos": (_ROCM_FIX, _CUDA_FIX, _LINUX_FIX),
}


def foreign(text: str, platform: str | None) -> bool:
    """The fix text holds only on another platform than this one (False when the platform is unknown)."""
    return bool(platform) and any(p.search(text) for p in _FOREIGN.get(platform or "", ()))


ASK_PLATFORM = ("python -c 'import torch, platform; print(platform.platform(), torch.__version__, torch.version.cuda, "
                "torch.version.hip)'")
