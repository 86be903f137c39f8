"""Every fix rocmcheck prints, and the one type it has. A check, a probe, smoke-train, lint, plan, compare and
monitor all build their fixes here, so a fact (which wheel index, which docker flags, what counts as IOMMU
pass-through) is written once, and no value from the machine can turn a fix into another command.

A `Fix` is one of three kinds:
- **shell**: ONE line a person can paste: the command, then `  # why` as a shell comment. Built from a template
  written in the code, whose `{fields}` are filled with values quoted for the shell (`shlex.quote`, newlines
  collapsed), so a host name, a version or a path from a bundle or a tool is always one word of data. The line
  is refused unless its quotes balance, it holds no control character and every command in it is a real one
  (`COMMANDS`). The tests run `bash -n` over every shell fix any test builds (tests/conftest.py).
- **edit**: a change to make in a named file (a DeepSpeed key, a YAML value): printed under its own heading.
- **note**: advice no command can carry out ("upgrade the NVIDIA driver"): printed as prose, never under the
  lines to paste.

Imports nothing heavy (no torch, no rich).
"""

from __future__ import annotations

import enum
import os
import re
import shlex
import string
from dataclasses import dataclass
from typing import Any

from rocmcheck.versions import series

# Commands a shell fix may run. A fix starting with any other word is prose that slipped into a command
# (`mkdir -p DIR and check it is writable`), which the builder refuses.
COMMANDS = frozenset("""
    accelerate amd-smi apt apt-get awk cat cd chmod chown conda cp cpupower deepspeed df dmesg dnf docker dpkg echo
    env eval export free getent git grep groups head hipconfig ibv_devinfo id journalctl kill ldd llamafactory-cli
    ln ls lsmod lspci lsb_release mkdir modinfo modprobe mount mv nc newgrp ninja numactl nvcc nvidia-smi pip pip3
    printf ps python python3 readelf reboot rm rocm-smi rocmcheck rocminfo scontrol sed setpci sinfo sort srun stat
    sudo sysctl systemctl tail tee test torchrun true ulimit uname unset update-grub usermod wc xargs yum zypper
    ds_report cuobjdump roc-obj-ls amdgpu-install mokutil
""".split())
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = {"&&", "||", ";", "|", "(", ")", "&", "!"}
# The test suite names a file here: every shell fix built in this process (and its children) is appended to
# it, so one `bash -n` at the end covers every fix any test made.
FIX_LOG_ENV = "ROCMCHECK_FIX_LOG"


class FixKind(str, enum.Enum):
    SHELL = "shell"
    EDIT = "edit"
    NOTE = "note"


class BadFix(ValueError):
    """A fix template that would not paste as one real command: a bug in rocmcheck's own code."""


def one_line(text: Any) -> str:
    """Any value as one line of text: control characters dropped, runs of whitespace (newlines too) one space."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())


def quote(value: Any) -> str:
    """A value as one shell word: `node3; touch x` -> `'node3; touch x'`."""
    return shlex.quote(one_line(value))


@dataclass(frozen=True)
class Fix:
    """One fix. Build it with shell(), edit() or note(); never by hand."""

    kind: FixKind
    text: str  # shell: the command line; edit: the change to make; note: the advice
    why: str = ""  # shell: the comment after the command; edit/note: the reason, in words
    file: str = ""  # edit: the file to change

    def line(self) -> str:
        """The fix as it prints: the pasteable line for a shell fix, else its words."""
        if self.kind is FixKind.SHELL:
            return f"{self.text}  # {self.why}" if self.why else self.text
        text = f"{self.file}: {self.text}" if self.kind is FixKind.EDIT else self.text
        return f"{text} ({self.why})" if self.why else text

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind.value, "text": self.text, "why": self.why, "file": self.file}

    @classmethod
    def from_dict(cls, d: Any) -> "Fix | None":
        """A recorded fix (a bundle, a child's report) back into a Fix, checked as if it were built here. A shell
        fix that no longer passes (a newline, unbalanced quotes, an unknown command: a damaged or hostile
        record) comes back as a note, so it is never printed among the lines to paste. Older bundles hold the
        fix as one string: `command  # why`, or `# note`."""
        if d is None or d == "":
            return None
        if isinstance(d, str):
            command, _, why = d.partition("  # ")
            if command.startswith("#"):
                return note(d.lstrip("# "))
            return _recorded_shell(command, why) or note(d)
        if not isinstance(d, dict):
            return note(str(d))
        kind, text, why, file = (str(d.get(k) or "") for k in ("kind", "text", "why", "file"))
        if kind == FixKind.SHELL.value:
            return _recorded_shell(text, why) or note(f"{text} ({why})" if why else text)
        if kind == FixKind.EDIT.value and file:
            return edit(file, text, why)
        return note(f"{text} ({why})" if why else text)


def _check_shell(line: str) -> None:
    if not line:
        raise BadFix("an empty shell fix")
    if _CONTROL.search(line):
        raise BadFix(f"a control character or newline in a shell fix: {line!r}")
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as exc:
        raise BadFix(f"a shell fix that does not parse ({exc}): {line!r}") from None
    expect_command = True
    for token in tokens:
        if token in _OPERATORS:
            expect_command = True
            continue
        if not expect_command:
            continue
        if _ASSIGNMENT.match(token):  # VAR=value before the command
            continue
        word = token
        if word not in COMMANDS and not word.startswith(("/", "./", "~/")):
            raise BadFix(f"a shell fix must start each command with a real command, not {word!r}: {line!r}")
        expect_command = word == "sudo"


def _log(fix: Fix) -> None:
    path = os.environ.get(FIX_LOG_ENV)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(fix.text + "\n")
    except OSError:
        pass


def _recorded_shell(command: str, why: str) -> Fix | None:
    try:
        _check_shell(command)
    except BadFix:
        return None
    return Fix(FixKind.SHELL, command, one_line(why))


class _Quoted(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, _Literal):
            return str(value)
        return quote(format(value, format_spec) if format_spec else value)


def shell(template: str, why: str = "", **values: Any) -> Fix:
    """A shell fix from a template written in the code: `shell("pip install torch=={version}", version=v)`. Every
    field is quoted for the shell; `{{` and `}}` are literal braces. BadFix for a template that is not one real
    command line."""
    try:
        line = _Quoted().vformat(template, (), values)
    except (KeyError, IndexError, ValueError) as exc:
        raise BadFix(f"shell fix template {template!r}: {exc}") from None
    _check_shell(line)
    fix = Fix(FixKind.SHELL, line, one_line(why))
    _log(fix)
    return fix


def edit(file: Any, change: str, why: str = "") -> Fix:
    """A change to make in a named file: `edit("ds.json", 'rename "stage3_parition" to "stage3_partition"')`."""
    return Fix(FixKind.EDIT, one_line(change), one_line(why), one_line(file))


def note(text: str) -> Fix:
    """Advice in words, never pasted: `note("upgrade the NVIDIA driver to 570 or newer")`."""
    return Fix(FixKind.NOTE, one_line(text))


def then(*parts: Fix) -> Fix:
    """Shell fixes run one after the other (`a && b`), under the first one's comment."""
    shells = [p for p in parts if p.kind is FixKind.SHELL]
    if len(shells) != len(parts) or not shells:
        raise BadFix("then() joins shell fixes only")
    line = " && ".join(p.text for p in shells)
    _check_shell(line)
    return Fix(FixKind.SHELL, line, shells[0].why)


def with_why(fix: Fix, why: str) -> Fix:
    """The same fix with another reason."""
    return Fix(fix.kind, fix.text, one_line(why), fix.file)


def as_recorded(fix: Fix | None, where: str = "") -> Fix | None:
    """A fix read back from a file or a paste someone else may have written (a bundle from a shared folder, a
    pasted `doctor --summary`): its command line is data, however real its words (`python -c '...'` passes as a
    shell line), so it becomes a note holding the line as recorded (after `where: ` when given), never one of
    the lines to paste. Edits and notes stay as they are."""
    if fix is None or fix.kind is not FixKind.SHELL:
        return fix
    line = fix.line()  # one line already: from_dict refused a control character in it
    return Fix(FixKind.NOTE, f"{where}: {line}" if where else line)


def step(command: str | None, note_text: str = "") -> Fix:
    """A shell fix from a command line that holds no data (`rocmcheck doctor`), or a note when there is none."""
    if not command:
        return note(note_text)
    return shell(command.replace("{", "{{").replace("}", "}}"), note_text)


# PyTorch's wheel indexes (https://pytorch.org/get-started/locally/). The ROCm series follows the installed ROCm
# when it is known; else the newest series with stable wheels when this table was written.
TORCH_INDEX = "https://download.pytorch.org/whl"
DEFAULT_ROCM_SERIES = "6.4"
DEFAULT_CUDA_INDEX = "cu128"  # CUDA 12.8 wheels: the first with sm_100/sm_120 kernels

# The flags ROCm's Docker guide and AMD's training containers use; memlock unlimited because CPU offload and RDMA
# pin host memory (host.memlock judges it).
DOCKER_ROCM_FLAGS = ("--device=/dev/kfd --device=/dev/dri --group-add video --group-add render "
                     "--ipc=host --shm-size 16G --security-opt seccomp=unconfined --ulimit memlock=-1:-1")
DOCKER_ROCM_IMAGE = "rocm/pytorch:latest"

# Kernel command-line tokens that put the IOMMU in pass-through: RCCL warns 'Missing "iommu=pt"' without one
# (https://github.com/ROCm/rccl/issues/1129); amd_iommu=pt is the AMD-specific spelling of the same setting.
IOMMU_PT_TOKENS = ("iommu=pt", "amd_iommu=pt")


def compile_bytecode(site_dir: str, writable: bool) -> Fix:
    """Write the compiled bytecode of a package folder once, where pip would have (compileall writes it whatever
    PYTHONDONTWRITEBYTECODE says). A folder this user cannot write is for whoever builds the environment: no fix
    points Python's bytecode at a folder of its own (another user who can write there would run code as this one)."""
    if writable:
        return shell("python -m compileall -q -j 0 {site}", "once: every later import of torch reads the bytecode",
                     site=site_dir)
    return note(f"the folder is read-only here: whoever builds this environment writes the bytecode once, "
                f"`python -m compileall -q -j 0 {site_dir}` (in an image: a RUN line after the pip install)")


def iommu_passthrough(cmdline: str) -> bool:
    return any(tok in IOMMU_PT_TOKENS for tok in cmdline.split())


def rocm_series(version: str | None) -> str:
    """"6.2.3" (or " 6.2.3") -> "6.2"; unknown -> DEFAULT_ROCM_SERIES."""
    return series(version) or DEFAULT_ROCM_SERIES


def torch_index_url(vendor: str, rocm_version: str | None = None) -> str:
    if vendor == "amd":
        return f"{TORCH_INDEX}/rocm{rocm_series(rocm_version)}"
    if vendor == "nvidia":
        return f"{TORCH_INDEX}/{DEFAULT_CUDA_INDEX}"
    return f"{TORCH_INDEX}/cpu"


def torch_install(vendor: str, rocm_version: str | None = None, *, reinstall: bool = False, why: str = "") -> Fix:
    """The pip line for a torch that matches this machine. `reinstall`: a torch is already there, and pip would
    answer "already satisfied" without --force-reinstall. Never a bare `pip install torch` (on Linux that is the
    CUDA wheel, wrong on a ROCm machine)."""
    if vendor not in ("amd", "nvidia"):
        why = why or "no GPU stack found here: the CPU build; install the GPU driver/ROCm first for a GPU build"
    template = "pip install --force-reinstall torch --index-url {index}" if reinstall else \
        "pip install torch --index-url {index}"
    return shell(template, why, index=torch_index_url(vendor, rocm_version))


def torch_wheel_fix(vendor: str, arch: str, rocm_version: str | None = None) -> Fix:
    """A torch that lacks kernels for `arch`: reinstall one that has them."""
    what = arch or ("your gfx target" if vendor == "amd" else "your sm_ arch")
    return torch_install(vendor, rocm_version, reinstall=True,
                         why=f"any wheel whose torch.cuda.get_arch_list() contains {what}")


def docker_run(why: str = "") -> Fix:
    return shell(f"docker run -it {DOCKER_ROCM_FLAGS} {DOCKER_ROCM_IMAGE}",
                 why or "restart the container with these flags (your image in place of rocm/pytorch)")


GROUPS_FIX = shell('sudo usermod -aG render,video "$USER"', "then log out and back in (or: newgrp render)")
NUMA_FIX = shell("sudo sysctl kernel.numa_balancing=0", "AMD MI300X tuning guide; persist it in /etc/sysctl.d/")
IOMMU_FIX = shell("sudo sed -i 's/^GRUB_CMDLINE_LINUX=\"/&iommu=pt /' /etc/default/grub && sudo update-grub "
                  "&& sudo reboot", "adds iommu=pt to the kernel command line, https://github.com/ROCm/rccl/issues/1129")
SHM_FIX = shell("sudo mount -o remount,size=16G /dev/shm")
MEMLOCK_FIX = shell("echo '* - memlock unlimited' | sudo tee -a /etc/security/limits.conf",
                    "then log in again; for this shell only: ulimit -l unlimited")
DEEPSPEED_REINSTALL = shell("pip uninstall -y deepspeed && DS_BUILD_OPS=0 pip install --no-cache-dir "
                            "--no-build-isolation deepspeed")
# A crash is a bug in rocmcheck: the fix is to report it, with the inputs that made it.
BUG_FIX = shell("rocmcheck doctor --out rocmcheck-bundle.json", "a rocmcheck bug: please report it with that bundle")


def unset(*names: str, why: str = "") -> Fix:
    """Env var names are kept exactly as given (they are case-sensitive)."""
    return shell("unset " + " ".join("{n%d}" % i for i in range(len(names))), why,
                 **{f"n{i}": name for i, name in enumerate(names)})


def nccl_transport_unset(*names: str) -> Fix:
    """A leftover NCCL_P2P_DISABLE / NCCL_SHM_DISABLE / NCCL_P2P_LEVEL (env.nccl_transport, probe.collective_sweep)."""
    return unset(*names, why="and remove it from ~/.bashrc, the job script or the container's ENV: it is a "
                             "workaround for a collective hang, not a setting to keep (iommu=pt and NUMA balancing "
                             "off fix the hang)")


def flash_attn_rebuild(archs: list[str] | tuple[str, ...] = ()) -> Fix:
    """Rebuild flash-attn against the installed torch. build-env sizes MAX_JOBS from this machine's cores and free
    memory and sets the arch variables, so the fix runs it instead of guessing a job count."""
    arch = "".join(f" --arch {quote(a)}" for a in archs)
    return shell('pip uninstall -y flash-attn && eval "$(rocmcheck build-env --target flash-attn{arch})" && '
                 "pip install --no-build-isolation --no-cache-dir flash-attn",
                 "rebuild against the installed torch", arch=_Literal(arch))


class _Literal(str):
    """Text already quoted by the caller (a run of quoted words): put into a template as it is."""


def smi_processes(vendor: str, why: str = "") -> Fix:
    if vendor == "amd":
        return shell("amd-smi process", why)
    return shell("nvidia-smi --query-compute-apps=pid,used_memory --format=csv", why)


def collective_hang_fix(vendor: str, cmdline: str | None, numa: str | None) -> tuple[list[str], Fix]:
    """(evidence, one fix) for a collective that hung. On ROCm the known causes are an IOMMU not in pass-through
    and NUMA auto-balancing (AMD MI300X system tuning guide). cmdline / numa: /proc/cmdline and
    /proc/sys/kernel/numa_balancing as collected, None when not known."""
    evidence: list[str] = []
    debug = shell("NCCL_DEBUG=INFO rocmcheck probe collective",
                  f"{'RCCL' if vendor == 'amd' else 'NCCL'}'s log names the transport that stalls; "
                  "NCCL_P2P_DISABLE=1 is the slow workaround")
    if vendor != "amd":
        return evidence, debug
    no_pt = cmdline is not None and not iommu_passthrough(cmdline)
    if no_pt:
        evidence.append("/proc/cmdline has no iommu=pt (RCCL collectives can hang without it)")
    if (numa or "").strip() == "1":
        evidence.append("/proc/sys/kernel/numa_balancing is 1: NUMA auto-balancing is on")
    if no_pt:
        return evidence, with_why(IOMMU_FIX, "until the reboot: export NCCL_P2P_DISABLE=1 (slower)")
    if (numa or "").strip() == "1":
        return evidence, NUMA_FIX
    return evidence, debug
