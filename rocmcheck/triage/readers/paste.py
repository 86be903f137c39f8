"""What a person pasted into an issue thread -> blocks, each named by the tool that printed it.

`split_paste(text)` reads the paste once, line by line, and returns a `Paste` (a list of `Block`). Real pastes
are messy, and every rule below comes from one of the pastes under tests/fixtures/pastes/ (README.md there):

- markdown: fences (``` and ~~~, with or without a language, sometimes never closed, sometimes with the first
  output line on the fence line), `<details>`/`<summary>` lines, quoted replies (`> `), headings (an issue
  template's `### Versions`), whole lines in inline code (`` `ROCk module is loaded` ``) or in bold;
- shells: prompts (`$ `, `# `, `(venv) user@host:~$ `, `Singularity> `), bare command lines ("rocm-smi",
  "**`amd-smi version`**", "Result of rocm-smi :"), the command before each output (kept as `Block.command`);
- terminals: ANSI colour codes (real ESC bytes and the caret text `^[[0m`, and the `[0m` left when the ESC byte
  was lost), CRLF and CR-overwritten progress lines;
- content: several outputs in one fence (told apart by each tool's own signature lines, never by the fence's
  language tag), a Python warning or a DeepSpeed log line printed before a tool's output (kept with that output),
  lines wrapped or elided (`...`, `(...)`) inside an output (kept in it), prose between outputs ("text").

Which tool printed a block is decided by its signature lines (SIGNATURES) -- the lines only that tool prints --
and, for output with no signature line (`uname -r`), by the command before it. A Python session (`python -c`,
`>>>`) keeps everything its program printed, tracebacks and HIP log lines included, and names them in
`Block.embedded`.

Bounded: the paste is read once (time linear in its size); a line longer than MAX_LINE_CHARS is cut, a block
keeps its first and last MAX_BLOCK_HEAD_CHARS / MAX_BLOCK_TAIL_CHARS, the whole result at most MAX_KEPT_CHARS and
MAX_BLOCKS blocks; what was not kept is counted (`Block.dropped_lines`, `Paste.dropped_lines`,
`Paste.truncated`). Never raises.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from rocmcheck.facts.parsers._text import strip_ansi, to_text
from rocmcheck.triage.readers.shell import Command, bare_command, parse_command, split_prompt, unmark

KINDS = (
    "collect_env", "ds_report", "pip_list", "pip_freeze", "conda_list", "pip_install",
    "accelerate_env", "transformers_env", "llamafactory_env",
    "rocminfo", "rocm_smi", "amd_smi", "nvidia_smi", "hipconfig", "nvcc",
    "uname", "os_release", "lsb_release", "dkms", "docker_run", "kernel_log",
    "python_session", "traceback", "nccl_log", "nccl_tests", "hip_log", "rocmcheck_summary", "text",
)

# Bounds. A line of a real paste is rarely over a few KB (a `rocm-smi --json` dump on one line is the longest
# seen, tens of KB); a block is rarely over a few hundred KB (a full `rocminfo` of 8 GPUs is ~60 KB).
MAX_LINE_CHARS = 65_536
MAX_BLOCK_HEAD_CHARS = 262_144
MAX_BLOCK_TAIL_CHARS = 262_144
MAX_KEPT_CHARS = 4 * 1024 * 1024
MAX_BLOCKS = 1000
# Signature lines are at the start of a line: only this much of each line is matched against them.
_MATCH_CHARS = 512
# Lines of prose or noise tolerated inside one output (a wrapped line, an elision) before the output is ended.
_GAP_LINES = 2
_MAX_PENDING = 256
_MAX_BLANK_RUN = 64


@dataclass
class Block:
    """One output (or one stretch of prose) of a paste."""

    kind: str  # one of KINDS
    text: str  # the lines as the tool printed them: markdown, quote marks, prompts and colour codes removed
    first_line: int  # 1-based line number of the block's first line in the paste
    last_line: int
    command: str | None = None  # the command line that printed it, prompt removed, when the paste shows it
    fenced: bool = False  # it was inside a markdown code fence
    embedded: tuple[str, ...] = ()  # other kinds printed inside it (a traceback inside a Python session)
    dropped_lines: int = 0  # lines of this block not kept (MAX_BLOCK_HEAD_CHARS / MAX_BLOCK_TAIL_CHARS)


class Paste(list):
    """The blocks of a paste, in order (a list of Block), and what the bounds left out."""

    def __init__(self, blocks: Any = ()) -> None:
        super().__init__(blocks)
        self.lines = 0  # lines read
        self.dropped_lines = 0  # lines not kept anywhere (over MAX_KEPT_CHARS or MAX_BLOCKS, or cut from a block)
        self.cut_lines = 0  # lines longer than MAX_LINE_CHARS, cut to it
        self.truncated = False  # something of the paste is not in the blocks

    def of_kind(self, kind: str) -> list[Block]:
        return [b for b in self if b.kind == kind]

    def kinds(self) -> list[str]:
        return [b.kind for b in self]


# ---- signatures ----------------------------------------------------------------------------------------------
# Each pattern is matched at the start of the stripped line. The order is the priority when two could match.

_TRACEBACK_ERRORS = (
    r"Traceback \(most recent call last\):|File \"[^\"]*\", line \d+"
    r"|(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)(?:\[[^\]]*\])?:(?:\s|$)"
    r"|Error occurred when executing \S|During handling of the above exception|The above exception was the direct"
    r"|terminate called after throwing|Segmentation fault|Aborted \(core dumped\)|Fatal Python error:"
    r"|Memory access fault by GPU|HIP error: |CUDA error: |hipError\w+: |\"hipError\w+: |(?:HIP|CUDA) out of memory"
    r"|RuntimeError\b|FAILED (?:\[[^\]]*\] )?\S+::\S+ - |Failed to fetch queues snapshot|GPU core dump failed|-+> ?\d+ "
    r"|error: '?hipError\w+"
    r"|\w+(?:Error|Exception)\s+Traceback \(most recent call last\)"
)
# (kind, pattern). Besides the kinds, a few labels that are decided by what surrounds the line: "hsa_error" (the HSA
# runtime's error: rocminfo's own line inside rocminfo, an error log elsewhere), "nccl_message" (NCCL's words inside a
# torch exception or alone), "env_list" (a "- key: value" list whose tool is told by its keys), "warning" and
# "preamble" (printed before an output and kept with it), "rule" (a line of ===== or -----), "elision" ("...").
SIGNATURES: list[tuple[str, str]] = [
    ("rocmcheck_summary", r"== rocmcheck summary \d+ \(rocmcheck [^)]*\) ==$"),
    ("collect_env",
     r"Collecting environment information\.\.\.|PyTorch version: \S|Is debug build: |(?:CUDA|ROCM|XPU) used to build "
     r"PyTorch:|Is CUDA available: |CUDA runtime version: |CUDA_MODULE_LOADING set to:|GPU models and configuration:"
     r"|Nvidia driver version: |cuDNN version: |HIP runtime version: |MIOpen runtime version: |Is XNNPACK available:"
     r"|Is XPU available: |Caching allocator config: |Versions of relevant libraries:|\[(?:pip3?|conda)\] \S"
     r"|Python platform: |Libc version: |vLLM Version: |vLLM Build Flags:|Neuron SDK Version: "),
    ("ds_report",
     r"DeepSpeed C\+\+/CUDA extension op report|DeepSpeed general environment info:|op name \.+ installed \.+ "
     r"compatible|NOTE: Ops not installed will be just-in-time|JIT compiled ops requires ninja"
     r"|\w+ \.{2,} \[(?:YES|NO|OKAY|FAIL)\]|(?:torch install path|torch version|deepspeed install path"
     r"|deepspeed info|torch cuda version|torch hip version|nvcc version|deepspeed wheel compiled w\."
     r"|shared memory \(/dev/shm\) size|accelerator) \.{3,}"),
    ("traceback", _TRACEBACK_ERRORS),
    ("nccl_message", r"Error while creating shared memory segment"),
    ("hsa_error", r"HSA Error: "),
    ("pip_list", r"Package\s+Version(?:\s+\S.*)?$"),
    ("conda_list", r"# packages in environment at |#\s*Name\s+Version\s+Build(?:\s+Channel)?\s*$"),
    ("pip_install",
     r"Collecting \S|Requirement already satisfied: |Downloading \S+|Using cached \S|Installing collected packages: "
     r"|Successfully installed \S|Successfully uninstalled \S|Found existing installation: |Attempting uninstall: "
     r"|Building wheels? for |Looking in (?:indexes|links): |Obtaining \S|Preparing metadata|Getting requirements to "
     r"build|Installing build dependencies|Running setup\.py |ERROR: (?:Could not find a version|No matching "
     r"distribution|Failed building wheel|Failed to build|pip's dependency resolver|Command errored out|Could not "
     r"install|Cannot install|ResolutionImpossible|Exception:|ERROR: Failed)|Failed to build \S|error: subprocess-"
     r"exited-with-error|\u00d7 |\u2570\u2500> |note: This error originates from a subprocess|error: metadata-"
     r"generation-failed|error: legacy-install-failure|Stored in directory: |Created wheel for |DEPRECATION: "),
    ("accelerate_env", r"- `Accelerate` version: |- `accelerate` (?:bash|config) location"),
    ("transformers_env", r"- `transformers` version: "),
    ("llamafactory_env", r"- `llamafactory` version: "),
    ("rocminfo",
     r"ROCk module (?:version \S+ )?is (?:NOT )?loaded|HSA System Attributes|HSA Agents|Agent \d+$|\*\*\* Done \*\*\*"
     r"|Unable to open /dev/kfd|hsa api call failure|Call returned (?:HSA_STATUS_|\d+)|WSL environment detected\."
     r"|Runtime Ext Version:|System Timestamp Freq\.:|Sig\. Max Wait Duration:|System Endianness:|Mwaitx:"
     r"|DMAbuf Support:|(?:Marketing Name|Vendor Name|Device Type|Compute Unit|Wavefront Size|Workgroup Max Size"
     r"|Max Waves Per CU|Max Work-item Per CU|Grid Max Size|Max fbarriers/Workgrp|Packet Processor uCode:"
     r"|SDMA engine uCode:|IOMMU Support:|Fast F16 Operation|Chip ID|Cacheline Size|Max Clock Freq\. \(MHz\)|BDFID"
     r"|Internal Node ID|Coherent Host Access|Queue Min Size|Queue Max Size|Max Queue Number|Float Round Mode"
     r"|Accessible by all|Alloc Alignment|Alloc Recommended Granule|Runtime Alloc Allowed|Pool Info|ISA Info"
     r"|Cache Info|Memory Properties):|Segment:\s+(?:GLOBAL|GROUP); FLAGS:|Name:\s+(?:gfx[0-9a-f]+\s*$|amdgcn-amd-)"),
    ("rocm_smi",
     r"=*\s*ROCm System Management Interface|=*\s*End of ROCm SMI Log|=+\s*Concise Info|Concise Info\s*$"
     r"|GPU\[\d+\]\s*:|WARNING: No AMD GPUs specified|Device\s+\[Model : Revision\]|Device\s+Node\s+IDs"
     r"|GPU\s+Temp\b|ERROR:root:Driver not initialized|={4,} [A-Z][\w /().%-]* ={4,}$"),
    ("amd_smi",
     r"AMDSMI Tool: |\|\s*AMD-SMI \S+|GPU: \d+\s*$|CPU: \d+\s*$|ERROR: Unable to detect any GPU devices, check amdgpu"
     r"|Fail to open libdrm_amdgpu|ERROR:root:Drivers not loaded|GPU\s+(?:POWER|XCP)\s+\S"
     # `amd-smi partition`: its tables' titles and header rows
     r"|(?:CURRENT_PARTITION|MEMORY_PARTITION|ACCELERATOR_PARTITION_PROFILES|ACCELERATOR_PARTITION_RESOURCES):\s*$"
     r"|GPU_ID\s+(?:MEMORY|PROFILE_INDEX)\s"
     # `amd-smi topology`: its tables, each headed "<NAME> TABLE:"
     r"|(?:ACCESS|WEIGHT|HOPS|LINK TYPE|NUMA BW|CACHE COHER[AE]NCY|ATOMICS|DMA|BI-DIRECTIONAL)"
     r" TABLE:\s*$"),
    ("nvidia_smi",
     r"\|?\s*NVIDIA-SMI \d|=+NVSMI LOG=+|NVIDIA-SMI has failed|No devices were found|Failed to initialize NVML"
     r"|Attached GPUs\s+:|GPU0(?:\s+(?:GPU|NIC|mlx)\w*)*\s+CPU Affinity"
     r"|(?:index|name|memory\.\w+|pci\.\w+|driver_version|uuid|compute_cap|pcie\.\w+(?:\.\w+)*|clocks\w*\.\w+)"
     r"(?:\s*\[[^\]]*\])?(?:\s*,\s*[\w.]+(?:\s*\[[^\]]*\])?)+\s*$"),
    ("hipconfig",
     r"HIP version\s*:|==\s?hipconfig|==\s?hip-clang|==\s?hcc\s*$|===? Environment Variables|== Linux Kernel"
     r"|(?:HIP_PATH|HIP_PLATFORM|HIP_COMPILER|HIP_RUNTIME|HIP_CLANG_PATH|CPP_CONFIG|HSA_PATH|HCC_HOME|ROCM_PATH)\s*:"
     r"|hip-clang-(?:cxx|ld)flags\s*:|HCC-(?:cxx|ld)flags\s*:"),
    ("nvcc", r"nvcc: NVIDIA \(R\) Cuda compiler driver|Cuda compilation tools, release \d"),
    ("uname",
     r"Linux \S+ \d+\.\d+[\w.+~-]* #\S+.*\b(?:x86_64|aarch64|arm64|armv\d+l|ppc64le|ppc64|s390x|riscv64|loongarch64"
     r"|mips64|i686)\b"
     r"|Linux version \d+\.\d+\S* \(|Darwin \S+ \d+\.\d+\.\d+ Darwin Kernel Version"),
    ("os_release",
     r"(?:PRETTY_NAME|VERSION_ID|VERSION_CODENAME|ID_LIKE|UBUNTU_CODENAME|HOME_URL|SUPPORT_URL|BUG_REPORT_URL"
     r"|PRIVACY_POLICY_URL|PLATFORM_ID|CPE_NAME|ANSI_COLOR|DOCUMENTATION_URL|REDHAT_SUPPORT_PRODUCT(?:_VERSION)?"
     r"|REDHAT_BUGZILLA_PRODUCT(?:_VERSION)?|DISTRIB_ID|DISTRIB_RELEASE|DISTRIB_CODENAME|DISTRIB_DESCRIPTION)="),
    ("lsb_release", r"Distributor ID:\s|LSB Version:\s|No LSB modules are available\."),
    ("dkms",
     r"Error! Could not locate dkms\.conf|[\w-]+[/,] ?[\w.~+-]+(?:, [\w.+~-]+){0,2}: (?:installed|added|built)\b"
     r"|Error! (?:Bad return status|The module/version combo|Your kernel headers)|Creating symlink /var/lib/dkms"
     r"|Building module:|DKMS: (?:install|build) completed"),
    ("docker_run", r"(?:sudo\s+)?(?:docker|podman|nvidia-docker)\s+(?:container\s+)?run\s|docker: Error response from "
                   r"daemon|docker: unknown server OS|docker: invalid reference format|Unable to find image '"),
    ("kernel_log",
     r"\[\s*\d+\.\d{3,}\](?:\[\s*[TC]\d+\])?\s|\[[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d+ \d\d:\d\d:\d\d \d{4}\]\s"
     r"|[A-Z][a-z]{2}\s+\d+ \d\d:\d\d:\d\d \S*\s*kernel:|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[\d.,]*(?:Z|[+-]\d\d:?\d\d)?\s+"
     r"(?:\S+\s+kernel:|\S+\s+amdgpu)|kern\s*:\s*\w+\s*:"
     # a process's crash line (the kernel's show_signal_msg / do_general_protection), with or without "kernel: "
     r"|(?:kernel: |traps: )?[\w.-]+\[\d+\]:? (?:segfault at [0-9a-f]+ ip |general protection fault ip:)"
     r"|kernel: amdgpu[: ]"),
    ("python_session",
     r">>>(?: |$)|In \[\d+\]: |Out\[\d+\]: |Python \d+\.\d+\.\d+\S* (?:\||\()|Type \"help\", \"copyright\""),
    ("nccl_tests",
     r"# nThread \d+ nGpus \d+|#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on|(?:rccl|nccl)-tests: Version"
     r"|# Using devices|#\s+size\s+count\s+type|# Avg bus bandwidth|# Out of bounds values"
     r"|#\s+out-of-place\s+in-place"),
    ("nccl_log",
     r"NCCL version \d|RCCL version \d|(?:NCCL )?INFO (?:NET|Bootstrap|Channel|Ring|Trees|Connected|comm|Using"
     r"|cudaDriverVersion|NCCL_)|NCCL_\w+ set by environment"),
    ("hip_log", r":\d:[\w.]+\s*:\s*\d+\s*:\s*\d+ us: "),
    ("env_list", r"- (?:Platform|Python version|PyTorch version(?: \(GPU\?\))?|`?\w+`? version|System RAM|GPU type"
                 r"|Numpy version): "),
    ("pip_freeze",
     r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s*(?:===?|~=)\s*[\w.!+*-]+\s*$"
     r"|[A-Za-z0-9][\w.-]* @ (?:file|https?|git\+)\S+\s*$|-e (?:git\+|/|\.)\S+"),
    ("warning", r"\S+\.py:\d+: \w*Warning:(?: |$)|<frozen \w+>:\d+: \w*Warning|warnings\.warn\(|warn\(\w+\("),
    ("preamble",
     r"\[\d{4}-\d\d-\d\d "
     r"[\d:,.]+\] \[(?:INFO|WARNING|DEBUG)\]|Copy-and-paste the text below in your GitHub issue|\d{4}-\d\d-\d\d "
     r"[\d:.]+: [IWE] tensorflow/|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}$"
     r"|Instructions for updating:"),
    ("rule", r"(?:[=*~+#_-]\s*){3,}$|\+[-=+]+\+\s*$"),
    ("elision", r"(?:\.\.\.|\[\.\.\.\]|\(\.\.\.\)|\u2026|\[\u2026\]|<snip>|\[snip\])\s*$"),
]
_ANCHOR = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in SIGNATURES))
# NCCL prints its level tag after a host:pid:tid [dev] prefix, so it is searched for anywhere in the line.
_NCCL_TAG = re.compile(r"\bNCCL (?:INFO|WARN|ERROR|TRACE|ABORT)\b")
# Signatures specific enough to be found after a label on the same line.
_INLINE_SIGNATURE = re.compile(r"(?P<nvcc>Cuda compilation tools, release \d)|(?P<nvidia_smi>NVIDIA-SMI \d+\.\d+\S*\s+"
                               r"Driver Version:)|(?P<amd_smi>AMDSMI Tool: \S)")
# Decorations that CI systems and launchers put before every line: GitHub Actions / CI timestamps, torchrun's
# "[rank0]:", Ray's "(Runner pid=868697)", BuildKit's "#12 10.47 ".
_LOG_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]\s|\[rank\d+\]:\s?"
    r"|\[default\d+\]:\s?|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s|#\d+ \d+\.\d+(?:\s|$))")
# BuildKit's elapsed-seconds column ("10.47 torch.__version__ = ..."): read as a prefix only on a run of such lines.
_BUILDKIT = re.compile(r"^\d+\.\d{2}(?:\s|$)")

# What, inside an output, continues it outside a code fence (where prose may follow the output). Matched against
# the stripped line; kinds in _ACCEPTS_INDENTED also take any indented line.
_KEY_VALUE = r"[A-Za-z(][\w .()/+#,%-]*?:+\s+\S"
# A topology matrix's row: a GPU's PCI address, then its cells (`amd-smi topology`).
_BDF_CELL = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7](?:\s|$)"
_MEMBERS = {
    "collect_env": rf"{_KEY_VALUE}|GPU \d+: |\[(?:pip3?|conda)\] |CPU:$|Collecting environment|\S+\.py:\d+: \w*Warning"
                   r"|/\S+$|warn(?:ings\.warn)?\(|CUDA Archs:|[\w ]+:$",
    "ds_report": r"-{5,}$|\[(?:WARNING|INFO)\]|\w+ \.{2,} |NOTE:|JIT compiled|op name|DeepSpeed|runtime if needed"
                 r"|meet the required",
    "pip_list": r"[A-Za-z0-9][\w.-]*\s+\S+(?:\s+\S.*)?$|-{3,}(?:\s+-{3,})+\s*$|WARNING: |\[notice\]",
    "pip_freeze": r"[A-Za-z0-9][\w.-]*(?:\[[^\]]*\])?\s*(?:===?|~=|@)\s*\S+|-e \S+",
    "conda_list": r"[A-Za-z0-9_][\w.-]*\s+\S+\s+\S+(?:\s+\S+)?\s*$|#",
    "pip_install": r"\u2502|\u2570|\u00d7|note: |error: |ERROR: |WARNING: |\[notice\]|[\u2501\u2588]|Installing \S"
                   r"|Successfully|Collecting|Downloading|Using cached|Requirement already|Looking in",
    "accelerate_env": r"- |-\s*$",
    "transformers_env": r"- |-\s*$",
    "llamafactory_env": r"- ",
    "env_list": r"- |-\s*$",
    "rocminfo": rf"{_KEY_VALUE}|[=*]{{3,}}|Agent \d+|HSA Error|N/A$|\S+ is (?:not )?member of|Failed to get user name"
                r"|mkdir: cannot create|[xyz]\s+\d+\(0x",
    "rocm_smi": rf"={{3,}}|GPU\[\d+\]|\d+\s+\S|Exception caught|ERROR: GPU\[|{_KEY_VALUE}|PID\s|Driver version:"
                r"|GPU\d+\s+\S",  # the last: a row of `rocm-smi --showtopo`'s matrices
    "amd_smi": rf"[|+]|GPU: \d+|CPU: \d+|{_KEY_VALUE}|[A-Z_ ]+:$|{_BDF_CELL}|Legend:$"
               r"|(?:GPU_ID|RESOURCE_INDEX)\s|\d+\s+(?:NPS\d|N/A|\d+)\s",  # `amd-smi partition`'s table rows
    "nvidia_smi": rf"[|+]|{_KEY_VALUE}|(?:GPU|NIC|mlx)\w*\s|Legend:|[^,]+(?:,[^,]+)+$|[A-Z][\w ]+$",
    "hipconfig": rf"{_KEY_VALUE}|==|[A-Za-z_]\w*=|(?:\S+ )?clang version|Target: |Thread model:"
                 r"|InstalledDir:|(?:AMD )?LLVM|Can't exec|Use of uninitialized value|HSA Error|Hostname"
                 r"|Configuration file:",
    "nvcc": r"Copyright \(c\)|Built on |Build cuda_|nvcc:|Cuda compilation",
    "uname": r"$^",
    "os_release": r"[A-Z][A-Z0-9_]*=",
    "lsb_release": r"(?:Description|Release|Codename|LSB Version|Distributor ID):",
    "dkms": r"File: \S+ does not exist|Error!|[\w-]+[/,] ?\S+: ",
    "docker_run": r"$^",
    "kernel_log": r"\[\s*\d+\.\d+\]|\[[A-Z][a-z]{2} |[A-Z][a-z]{2}\s+\d+ \d\d:|\d{4}-\d\d-\d\dT|kern\s*:|amdgpu"
                  r"|kernel: |audit\[\d+\]: |traps: ",
    "python_session": r"$^",
    "traceback": r"\^+$|~*\^+~*$|(?:HIP|CUDA) kernel errors might be|For debugging consider passing"
                 r"|Compile with .TORCH_USE_|Search for .(?:hip|cuda)Error|Device-side assertion|CUDA_LAUNCH_BLOCKING"
                 r"|frame #\d+|Exception raised from|C\+\+ CapturedTraceback|Last error:|nccl\w*Error"
                 r"|See documentation for Memory Management|If reserved but unallocated|what\(\):|\[end of output\]"
                 r"|note: |Memory status:|\||-*> ?\d+ |\d+ |[\w.]+$|.*\(type=[\w.]+\)$|Extra inputs are not permitted"
                 r"|Field required|For further information visit|File: \S+; line: \d+",
    "nccl_log": r"\S+:\d+:\d+ \[\d+\]|\[\d+\]\S+:\S+<\d+>|\[Async thread\]|NCCL|INFO |WARN ",
    "nccl_tests": r"#|\d+\s+\d+\s+\w+\s",
    "hip_log": r":\d:",
    "json": r".",
    # rocmcheck doctor --summary (rocmcheck/triage/readers/summary.py): its labels, its verdicts, its last line.
    "rocmcheck_summary": r"(?:os|kernel|python|rocm|gpu \d+|torch|packages|not installed|env|/dev/shm|container"
                         r"|(?:FAIL|WARN|CRASH) [a-z0-9_.]+|fix): |== end of rocmcheck summary ==$",
    "text": r"$^",
}
_MEMBER = {kind: re.compile(pattern) for kind, pattern in _MEMBERS.items()}
_ACCEPTS_INDENTED = {"collect_env", "ds_report", "pip_install", "accelerate_env", "transformers_env", "env_list",
                     "rocminfo", "rocm_smi", "amd_smi", "nvidia_smi", "hipconfig", "kernel_log", "traceback",
                     "nccl_tests", "hip_log", "json", "rocmcheck_summary"}
# Output that has no signature line of its own, read as the hinted tool's only after its command.
_HINTED = {
    "uname": re.compile(r"\d+\.\d+[\w.+~-]*$|x86_64$|aarch64$|Linux \S+ \d"),
    "nvidia_smi": re.compile(r"[^,]+(?:,[^,]+)+$"),
}
# A kind that keeps what its program prints, whatever it is, up to the next prompt.
_STICKY = {"python_session"}
# Kinds whose first signature line, seen again, starts a new output (`nvidia-smi -l`, two collect_env runs).
_RESTART = {
    "collect_env": re.compile(r"Collecting environment information|PyTorch version: "),
    "rocminfo": re.compile(r"ROCk module|HSA System Attributes"),
    "nvidia_smi": re.compile(r"\|?\s*NVIDIA-SMI \d|=+NVSMI LOG"),
    "ds_report": re.compile(r"DeepSpeed C\+\+/CUDA extension op report"),
    "rocm_smi": re.compile(r"=*\s*ROCm System Management Interface"),
    "pip_list": re.compile(r"Package\s+Version"),
    "uname": re.compile(r"Linux |Darwin "),
    "nvcc": re.compile(r"nvcc: NVIDIA"),
    "lsb_release": re.compile(r"Distributor ID:"),
}
# HSA runtime errors are rocminfo's (and hipconfig's probe's) own lines inside their output, a traceback's otherwise.
_HSA_ERROR_OWNERS = {"rocminfo", "hipconfig", "python_session"}
_ENV_KINDS = {"accelerate_env", "transformers_env", "llamafactory_env", "env_list"}
_NEVER = re.compile(r"$^")
# Lines a block of that kind may take back from the text just before it (an output pasted from its middle).
_RECLAIM_LINES = 50

# ---- markdown ---------------------------------------------------------------------------------------------------

# `((?:.*\S)?)\s*$`: the rest of the line without its trailing spaces in one pass (a lazy `(.*?)\s*$` tried `\s*$`
# again from each position of a run of spaces: quadratic in the line).
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*((?:.*\S)?)\s*$")
_HTML_LINE = re.compile(r"^\s*(?:</?details\b[^>]*>|<summary>.*?</summary>|</?summary>|</?pre>|</?code>)+\s*$",
                        re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}\s+\S")
_DEEP_HEADING = re.compile(r"^#{2,6}\s+\S")
# "[0m" / "[1;31m": a colour code whose ESC byte was dropped when terminal output was copied as text (a web form
# keeps the rest of the sequence).
_LOST_ESC = re.compile(r"(?<![\w\[\]])\[(?:\d{1,3};){0,4}\d{1,3}m")
_WORD = re.compile(r"[A-Za-z][a-z']*[,.;:!?)]?$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_QUOTE_MARK = re.compile(r"^ {0,3}> ?")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_CARD_KEY = re.compile(r'"card\d+"\s*:')
_AMD_SMI_KEY = re.compile(r'"(?:gpu|gpu_data|asic|market_name|vram|bdf|kfd_id|partition|target_graphics_version'
                          r'|unit)"\s*:')


def _is_prose(s: str) -> bool:
    """A sentence a person wrote: five words or more, most of them plain lower-case words."""
    words = s.split()
    if len(words) < 5:
        return False
    return sum(1 for w in words if _WORD.match(w)) >= 0.7 * len(words)


@dataclass
class _Line:
    number: int
    text: str  # what is kept in the block
    match: str  # what signatures are matched against (stripped, log prefix removed, bounded)
    fenced: bool


@dataclass
class _Open:
    kind: str
    first_line: int
    fenced: bool
    command: str | None = None
    head: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)  # the line number of each line in head
    head_chars: int = 0
    tail: deque = field(default_factory=deque)
    tail_chars: int = 0
    dropped: int = 0
    last_line: int = 0
    embedded: list[str] = field(default_factory=list)
    json_depth: int = 0
    keys: set = field(default_factory=set)  # what decides a provisional kind (json, env_list) when it closes
    restarts_seen: set = field(default_factory=set)  # first-line signatures already in this block
    continued: bool = False  # the last line ended with a backslash (a docker run split over lines)


class _Splitter:
    def __init__(self) -> None:
        self.paste = Paste()
        self.kept_chars = 0
        self.cur: _Open | None = None
        self.pending: list[tuple[_Line, str]] = []  # (line, "blank" | "neutral" | "warning" | "text")
        self.carry: list[_Line] = []  # neutral lines that open the next output (a warning printed before it)
        self.blank_run = 0
        self.fence: tuple[str, int, int, int] | None = None  # (char, length, indent, quote depth)
        self.hint: Command | None = None  # the command whose output comes next
        self.hint_kind: str | None = None
        self.buildkit_run = 0
        self.anchored: tuple[str | None, re.Match | None] = (None, None)  # the last line matched against _ANCHOR

    def anchor(self, s: str) -> re.Match | None:
        """_ANCHOR.match(s), the last line's answer kept: a line is matched before and after its markdown is
        removed, and most lines have none."""
        if self.anchored[0] != s:
            self.anchored = (s, _ANCHOR.match(s))
        return self.anchored[1]

    # ---- markdown and prompts -----------------------------------------------------------------------------

    def feed(self, number: int, raw: str) -> None:
        line = raw.rstrip("\r")
        if "\r" in line:  # a progress bar redrawn in place: the terminal shows the last redraw
            line = line.rsplit("\r", 1)[-1] or line
        if "\x1b" in line or "^[" in line or "\x9b" in line or _CONTROL.search(line, 0, 64):
            line = strip_ansi(line)
        if "[" in line and "m" in line:
            line = _LOST_ESC.sub("", line)
        quote = 0
        if self.fence is None or self.fence[3]:
            line, quote = _unquote(line, self.fence[3] if self.fence else None)
            if self.fence is not None and quote < self.fence[3]:
                self.fence = None  # a quoted fence ends where the quote does
                self.boundary()
        m = _FENCE.match(line) if "```" in line or "~~~" in line else None  # a fence holds one of them
        if m and self.fence is None and len(m.group(3)) > len(m.group(2)) and m.group(3).endswith(m.group(2)):
            self.boundary()  # "```docker run --gpus all ...```": a code span on one line, not a fence
            self.content(number, m.group(3)[: -len(m.group(2))].strip())
            self.boundary()
            return
        if m and (self.fence is None or self._closes(m)):
            self.boundary()
            if self.fence is None:
                info = m.group(3)
                self.fence = (m.group(2)[0], len(m.group(2)), len(m.group(1)), quote)
                if info and " " in info and not info.startswith("{"):  # "``` cd /opt/rocm/lib": output on its line
                    self.content(number, info)
            else:
                self.fence = None
            return
        if m and self.fence is not None and m.group(3) and re.fullmatch(r"[\w+#.-]+", m.group(3)):
            self.boundary()  # "```bash" inside an open fence: the earlier fence was never closed
            self.fence = (m.group(2)[0], len(m.group(2)), len(m.group(1)), quote)
            return
        if "<" in line and _HTML_LINE.match(line):
            if self.fence is not None and not self.fence[3] and line.strip().lower().startswith("</details"):
                self.fence = None
            self.boundary()
            return
        if self.fence is not None and self.fence[2]:
            indent = self.fence[2]
            line = line[indent:] if line[:indent].strip() == "" else line.lstrip()
        self.content(number, line)

    def _closes(self, m: re.Match) -> bool:
        char, length, _, _ = self.fence
        return m.group(2)[0] == char and len(m.group(2)) >= length and not m.group(3)

    def content(self, number: int, line: str) -> None:
        fenced = self.fence is not None
        if not fenced:
            line = _demark(line, self.anchor)
        stripped = line.strip()
        if not stripped:
            self.blank(number, fenced)
            return
        line, stripped = self._without_prefix(line, stripped, fenced)
        if not stripped:
            self.blank(number, fenced)
            return
        head = stripped[:_MATCH_CHARS]
        if stripped[0] == "#" and _HEADING.match(stripped) and not self.anchor(head) and not split_prompt(stripped):
            real = self.cur is not None and self.cur.kind != "text"
            if not fenced or (_DEEP_HEADING.match(stripped) and real and
                              not _is_member(self.cur.kind, _Line(number, line, head, fenced), head)):
                self.boundary()  # an issue template's heading, also where a fence was left open above it
                self.hint = self.hint_kind = None
                self.append_text(_Line(number, line, head, fenced))
                self.boundary()
                return
        if self.cur is not None and self.cur.kind == "docker_run" and self.cur.continued:
            self.append(_Line(number, line, head, fenced))
            return
        command = self.command_line(stripped)
        if command is not None:
            self.command(number, line, command, fenced)
            return
        self.classify(_Line(number, line, head, fenced))

    def _without_prefix(self, line: str, stripped: str, fenced: bool) -> tuple[str, str]:
        """Remove what a CI system or launcher put before the tool's own text, from the kept line too."""
        if stripped[:1] in "[(#0123456789" and stripped[:1]:
            m = _LOG_PREFIX.match(stripped)
            if m and m.end() < len(stripped):
                rest = stripped[m.end():]
                return rest, rest.strip()
            if fenced and _BUILDKIT.match(stripped):
                self.buildkit_run += 1
                if self.buildkit_run >= 2:
                    rest = stripped[_BUILDKIT.match(stripped).end():]
                    return rest, rest.strip()
                return line, stripped
        self.buildkit_run = 0
        return line, stripped

    def command_line(self, stripped: str) -> Command | None:
        if len(stripped) > 4096 or (self.cur is not None and self.cur.kind == "json"):
            return None
        split = split_prompt(stripped)
        if split is not None:
            command = parse_command(split[1])
            command.prompt = split[0]
            return command
        if stripped[:1] in "[{|+=:#-" or stripped.startswith(">>>"):
            return None
        command = bare_command(stripped)
        if command is not None and _PYTHON_ALONE.match(command.tool) and not command.args:
            return None  # a bare "python" line (or a path to it) is a cut sentence or output, not a REPL
        return command

    def command(self, number: int, line: str, command: Command, fenced: bool) -> None:
        kind = command.kind
        shown = _Line(number, line.strip(), line.strip(), fenced)
        if kind == "python_session" and self.cur is not None and self.cur.kind == "python_session":
            self.flush_pending()
            self.append(shown)
            return
        self.boundary()
        if kind == "docker_run":
            self.hint, self.hint_kind = command, kind
            self.open("docker_run", _Line(number, command.text, command.text, fenced))
            return
        if kind == "python_session":
            self.hint, self.hint_kind = command, kind
            self.open("python_session", shown)
            return
        # The command line is kept as text (with its prompt), its output block names it as its command.
        self.hint, self.hint_kind = None, None
        self.append_text(shown)
        self.cur.command = command.text
        self.boundary()
        self.hint, self.hint_kind = command, kind

    def _after_docker(self) -> None:
        """The container's own command decides what the lines after `docker run ... IMAGE CMD` are."""
        from rocmcheck.triage.readers.docker_run import parse_docker_run

        run = parse_docker_run("\n".join(self.cur.head))
        inner = parse_command(" ".join(run.command)) if run.command else None
        self.boundary()
        if inner is not None and inner.kind and inner.kind != "docker_run":
            self.hint, self.hint_kind = inner, inner.kind

    # ---- classification ---------------------------------------------------------------------------------------

    def classify(self, line: _Line) -> None:
        s = line.match
        cur = self.cur.kind if self.cur is not None else None
        real = cur is not None and cur != "text"
        m = self.anchor(s)
        anchor = m.lastgroup if m else None
        if anchor is None and "NCCL" in s and _NCCL_TAG.search(s):
            anchor = "nccl_log"
        if anchor is None and ("compilation tools" in s or "SMI" in s):
            m = _INLINE_SIGNATURE.search(s)  # "nvcc -V:Cuda compilation tools, ...": a label before the output
            anchor = m.lastgroup if m else None
        if anchor == "hsa_error":
            anchor = cur if cur in _HSA_ERROR_OWNERS else ("rocminfo" if self.hint_kind == "rocminfo" else "traceback")
        elif anchor == "nccl_message":  # NCCL's own words, inside a torch exception's message or alone
            anchor = "traceback" if cur == "traceback" else "nccl_log"
        if cur == "json":
            if self.cur.json_depth > 0 or line.fenced:
                self.member(line)
                return
            real = False
        if anchor is None and s[:1] in "{[" and not (real and line.fenced) and _json_start(s):
            self.start("json", line)
            return
        if cur in _STICKY and (anchor == "python_session" or line.fenced or not _is_prose(s)):
            if anchor in KINDS and anchor not in (cur, "text") and anchor not in self.cur.embedded:
                self.cur.embedded.append(anchor)
            self.member(line)
            return
        if anchor in ("preamble", "rule", "warning"):
            self.pend(line, "warning" if anchor == "warning" else "neutral")  # joins the output before or after it
            return
        if anchor == "elision":
            self.pend(line, "neutral" if real else "text")
            return
        if anchor == "env_list" and cur in _ENV_KINDS:
            anchor = cur
        if anchor == "pip_freeze" and real and cur != "pip_freeze" and (line.fenced or _is_member(cur, line, s)):
            anchor = None  # "key==value"-looking lines inside another tool's output
        if anchor is not None:
            if anchor == cur and not self._restarts(anchor, s):
                self.member(line)
            else:
                self.start(anchor, line)
            return
        # no signature of its own
        if real:
            if line.fenced or _is_member(cur, line, s):
                self.member(line)
            else:
                self.pend(line, "text")
            return
        hint = self.hint_kind
        if hint is not None and hint != "docker_run":
            hinted = _HINTED.get(hint)
            if line.fenced or (hinted is not None and hinted.match(s) and not _is_prose(s)):
                self.start(hint, line)
                return
        self.pend(line, "text")

    def _restarts(self, kind: str, s: str) -> bool:
        pattern = _RESTART.get(kind)
        m = pattern.match(s) if pattern is not None else None
        return bool(m) and m.group(0).strip() in self.cur.restarts_seen

    # ---- building blocks ----------------------------------------------------------------------------------------

    def blank(self, number: int, fenced: bool) -> None:
        self.blank_run += 1
        if self.blank_run <= _MAX_BLANK_RUN:
            self.pending.append((_Line(number, "", "", fenced), "blank"))
        if len(self.pending) > _MAX_PENDING:
            self.resolve(None)

    def pend(self, line: _Line, tag: str) -> None:
        self.blank_run = 0
        if tag == "text" and (self.cur is None or self.cur.kind == "text"):
            self.flush_pending_into_text()
            self.append_text(line)
            return
        self.pending.append((line, tag))
        if tag == "text" and sum(1 for _, t in self.pending if t == "text") > _GAP_LINES:
            self.resolve(None)
        elif len(self.pending) > _MAX_PENDING:
            self.resolve(None)

    def member(self, line: _Line) -> None:
        self.blank_run = 0
        self.flush_pending()
        self.append(line)

    def start(self, kind: str, line: _Line) -> None:
        self.blank_run = 0
        reclaimed = self._reclaim(kind, line)
        self.resolve(kind)
        self.carry = reclaimed + self.carry
        self.open(kind, line)

    def _reclaim(self, kind: str, line: _Line) -> list[_Line]:
        """The last lines of the text just before a new output that are that output's own lines (rocminfo pasted
        from the middle of an agent: its first key lines carry no signature)."""
        cur = self.cur
        if cur is None or cur.kind != "text" or cur.tail or not cur.head or cur.fenced != line.fenced or \
                any(tag not in ("blank",) for _, tag in self.pending) or kind in ("text", "json"):
            return []
        if not line.fenced and self.pending:
            return []
        taken: list[_Line] = []
        while cur.head and len(taken) < _RECLAIM_LINES and cur.head[-1].strip():
            text = cur.head[-1]
            candidate = _Line(cur.numbers[-1], text, text.strip()[:_MATCH_CHARS], line.fenced)
            if _is_prose(candidate.match) or not _is_member(kind, candidate, candidate.match):
                break
            cur.head.pop()
            cur.numbers.pop()
            cur.head_chars -= len(text) + 1
            taken.append(candidate)
        if not cur.head:
            self.cur = None  # the whole text block was the new output's
        elif taken:
            cur.last_line = cur.numbers[-1]
        return list(reversed(taken))

    def flush_pending(self) -> None:
        for pending, _ in self.pending:
            self.append(pending)
        self.pending = []

    def flush_pending_into_text(self) -> None:
        """Pending lines before a text line, with nothing real open: warnings are an error log of their own,
        the rest is text."""
        if self.cur is not None and self.cur.kind != "text":
            self.resolve(None)
            return
        pending, self.pending = self.pending, []
        self._loose(pending)

    def _loose(self, lines: list[tuple[_Line, str]]) -> None:
        """Lines no output took: a run of Python warnings is a traceback block (an error log), the rest text."""
        i = 0
        while i < len(lines):
            line, tag = lines[i]
            if tag == "warning":
                self.close()
                self.cur = _Open(kind="traceback", first_line=line.number, fenced=line.fenced)
                self._attach_hint("traceback")
                while i < len(lines) and (lines[i][1] == "warning" or lines[i][0].text[:1] in " \t"):
                    self.append(lines[i][0])
                    i += 1
                self.close()
                continue
            if tag != "blank" or (self.cur is not None and self.cur.kind == "text"):
                self.append_text(line)
            i += 1

    def resolve(self, next_kind: str | None) -> None:
        """Settle the pending lines: before a new output of `next_kind`, at a boundary (None), or when a gap of
        prose is too long to be part of the current output."""
        pending, self.pending = self.pending, []
        real = self.cur is not None and self.cur.kind != "text"
        texts = [i for i, (_, tag) in enumerate(pending) if tag == "text"]
        if not texts:
            if next_kind is not None:
                self.close()
                self.carry = [p for p, tag in pending if tag != "blank"]
            elif real:
                for p, _ in pending:
                    self.append(p)
                self.close()
            else:
                self._loose(pending)
                self.close()
            return
        first, last = texts[0], texts[-1]
        if real:
            for p, _ in pending[:first]:
                self.append(p)
            self.close()
            self._loose(pending[first:last + 1])
        else:
            self._loose(pending[:last + 1])
        tail = pending[last + 1:]
        if next_kind is not None:
            self.close()
            self.carry = [p for p, tag in tail if tag != "blank"]
        else:
            self._loose(tail)

    def open(self, kind: str, line: _Line) -> None:
        self.close()
        first, self.carry = self.carry, []
        start = first[0] if first else line
        self.cur = _Open(kind=kind, first_line=start.number, fenced=line.fenced)
        for p in first:
            self.append(p)
        self.append(line)
        self._attach_hint(kind)
        if kind == "docker_run":
            self.cur.continued = line.match.rstrip().endswith("\\")
            if not self.cur.continued:
                self._after_docker()

    def _attach_hint(self, kind: str) -> None:
        if self.hint is not None and (self.hint_kind is None or self.hint_kind == kind):
            self.cur.command = self.hint.text
            self.hint = self.hint_kind = None

    def append_text(self, line: _Line) -> None:
        if self.cur is None or self.cur.kind != "text":
            self.close()
            self.cur = _Open(kind="text", first_line=line.number, fenced=line.fenced)
            if self.hint is not None and self.hint_kind is None:
                self.cur.command = self.hint.text
                self.hint = None
        self.append(line)

    def append(self, line: _Line) -> None:
        cur = self.cur
        if cur is None:
            self.append_text(line)
            return
        cur.last_line = line.number
        if cur.kind == "json":
            _json_note(cur, line.text)
        elif cur.kind == "env_list" and line.match.startswith("- "):
            cur.keys.add(line.match[2:].split(":", 1)[0].strip("` ").lower())
        elif cur.kind == "docker_run":
            cur.continued = line.match.rstrip().endswith("\\")
        pattern = _RESTART.get(cur.kind)
        if pattern is not None and line.match:
            m = pattern.match(line.match)
            if m and len(cur.restarts_seen) < 16:
                cur.restarts_seen.add(m.group(0).strip())
        text = line.text
        size = len(text) + 1
        if cur.head_chars + size <= MAX_BLOCK_HEAD_CHARS and not cur.tail:
            cur.head.append(text)
            cur.numbers.append(line.number)
            cur.head_chars += size
        else:
            cur.tail.append(text)
            cur.tail_chars += size
            while cur.tail_chars > MAX_BLOCK_TAIL_CHARS and cur.tail:
                cur.tail_chars -= len(cur.tail.popleft()) + 1
                cur.dropped += 1
        if cur.kind == "docker_run" and not cur.continued and len(cur.head) > 1:
            self._after_docker()

    def close(self) -> None:
        cur, self.cur = self.cur, None
        if cur is None:
            return
        kind = _settle(cur)
        lines = cur.head + list(cur.tail)
        numbers = cur.numbers
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if not lines:
            return
        text = "\n".join(lines)
        paste = self.paste
        if len(paste) >= MAX_BLOCKS or self.kept_chars + len(text) > MAX_KEPT_CHARS:
            paste.truncated = True
            paste.dropped_lines += len(lines) + cur.dropped
            return
        self.kept_chars += len(text)
        if cur.dropped:
            paste.truncated = True
            paste.dropped_lines += cur.dropped
        first = next((n for n, t in zip(numbers, cur.head) if t.strip()), cur.first_line)
        paste.append(Block(kind=kind, text=text, first_line=first, last_line=max(cur.last_line, first),
                           command=cur.command, fenced=cur.fenced, embedded=tuple(cur.embedded),
                           dropped_lines=cur.dropped))

    def boundary(self) -> None:
        self.resolve(None)
        self.close()
        self.carry = []

    def finish(self) -> Paste:
        self.boundary()
        return self.paste


_PYTHON_ALONE = re.compile(r"^(?:python[\d.]*|py|ipython3?)$")


def _is_member(kind: str, line: _Line, s: str) -> bool:
    """`line` continues an output of `kind` (outside a fence, where prose may follow the output)."""
    if kind in _ACCEPTS_INDENTED and line.text[:1] in (" ", "\t") and s:
        return True
    return bool(_MEMBER.get(kind, _NEVER).match(s))


_LEADING_BOLD = re.compile(r"^(\s*)(\*\*|__)(?=\S)(.+?)(?<=\S)\2")


_LIST_CODE = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+`([^`]+)`\s*$")


def _demark(line: str, anchor: Callable[[str], re.Match | None] = _ANCHOR.match) -> str:
    """Outside a fence: the line without the inline-code marks or bold around it ("`ROCk module is loaded`",
    "**ImportError:** lib/...", "1. `docker run ...`"), which a person adds in prose but no tool prints."""
    stripped = line.strip()
    m = _LIST_CODE.match(stripped)
    if m:
        return m.group(1)
    if stripped in ("`", "``"):
        return ""  # the closing mark of inline code opened on an earlier line
    if not _ALNUM.search(stripped) or anchor(stripped[:_MATCH_CHARS]):
        return line  # "*******" and "*** Done ***" are rocminfo's own lines
    if stripped.startswith(("`", "**", "__")) or stripped.endswith("`"):
        text = unmark(line)
        if text != stripped:
            return text
        m = _LEADING_BOLD.match(line)
        if m:
            return m.group(1) + m.group(3) + line[m.end():]
    return line


def _unquote(line: str, depth: int | None) -> tuple[str, int]:
    """The line without its leading quote marks ("> ", "> > "), and how many there were. ">>> " is Python's
    prompt, not three quote marks. Inside a quoted fence only that fence's depth of marks is removed."""
    quote = 0
    rest = line
    while quote < (depth if depth is not None else 8):
        m = _QUOTE_MARK.match(rest) if ">" in rest[:4] else None  # a quote mark is in the first four characters
        if not m or rest.lstrip().startswith(">>>"):
            break
        rest = rest[m.end():]
        quote += 1
    return rest, quote


def _json_start(s: str) -> bool:
    return s in ("{", "[") or bool(re.match(r"^[\[{]\s*(?:\"|\{|\[|$)", s))


def _json_note(cur: _Open, text: str) -> None:
    in_string = False
    escaped = False
    for ch in text[:_MATCH_CHARS * 8]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            cur.json_depth += 1
        elif ch in "}]":
            cur.json_depth -= 1
    low = text[:_MATCH_CHARS * 8].lower()
    if _CARD_KEY.search(low):
        cur.keys.add("rocm_smi")
    # amd-smi's JSON: its own keys, or (since ROCm 6.1) its {"value": N, "unit": "MB"} objects
    if _AMD_SMI_KEY.search(low):
        cur.keys.add("amd_smi")


def _settle(cur: _Open) -> str:
    """The kind of a block that was provisional while it was read: JSON by its keys, a "- key: value" list by
    the keys of the tool that prints it."""
    if cur.kind == "json":
        if "rocm_smi" in cur.keys:
            return "rocm_smi"
        if "amd_smi" in cur.keys:
            return "amd_smi"
        return "text"
    if cur.kind == "env_list":
        keys = cur.keys
        if {"peft version", "trl version", "datasets version"} & keys or "llamafactory version" in keys:
            return "llamafactory_env"
        if {"huggingface_hub version", "safetensors version", "using gpu in script?"} & keys:
            return "transformers_env"
        if {"accelerate default config", "numpy version", "pytorch accelerator"} & keys:
            return "accelerate_env"
        return "text"
    return cur.kind


def _lines(text: str, paste: Paste) -> Iterator[tuple[int, str, int]]:
    """The paste's lines, each cut to MAX_LINE_CHARS, without building a list of them: (number, line, where the
    next line starts)."""
    pos, number, size = 0, 0, len(text)
    while pos < size:
        end = text.find("\n", pos)
        if end < 0:
            end = size
        number += 1
        if end - pos > MAX_LINE_CHARS:
            paste.cut_lines += 1
            paste.truncated = True
        yield number, text[pos:min(end, pos + MAX_LINE_CHARS)], end + 1
        pos = end + 1
    paste.lines = number


_LONG_LINE = re.compile(r"(?m)^[^\n]{%d}" % (MAX_LINE_CHARS + 1))  # tried at line starts only: linear


def split(text: Any) -> Paste:
    """split_paste without its last-resort guard (the tests call this, so that a fault shows). Once MAX_BLOCKS
    blocks are kept no later line can be, so the rest of the paste is only counted (its lines, the long ones), not
    read line by line."""
    splitter = _Splitter()
    raw = to_text(text)
    paste = splitter.paste
    for number, line, rest in _lines(raw, paste):
        splitter.feed(number, line)
        if len(paste) >= MAX_BLOCKS:
            later = _count_lines(raw, rest)
            paste.lines = number + later
            paste.dropped_lines += later
            paste.cut_lines += sum(1 for _ in _LONG_LINE.finditer(raw, rest))
            paste.truncated = True
            break
    return splitter.finish()


def _count_lines(text: str, start: int) -> int:
    """The lines of text[start:], as _lines counts them (a last newline ends a line, it starts none)."""
    if start >= len(text):
        return 0
    return text.count("\n", start) + (0 if text.endswith("\n") else 1)


def split_paste(text: Any) -> Paste:
    """The blocks of a paste (str, bytes or None), in order. Never raises: should a rule fault on some input,
    the paste is returned as one text block, marked truncated. Written against every paste under
    tests/fixtures/pastes/ (the 52 of corpus/ among them) and tests/fixtures/public/; tests/test_paste_split.py
    names the blocks each one gives."""
    try:
        return split(text)
    except Exception:  # noqa: BLE001 - a reader never raises
        paste = Paste([Block(kind="text", text=to_text(text)[:MAX_KEPT_CHARS], first_line=1, last_line=1)])
        paste.truncated = True
        return paste
