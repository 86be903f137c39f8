"""Unknown is not absent: what a set of facts knows, and the exception a judgement raises when it needs a fact
that was not collected.

`Facts.known` maps each fact group (a field of Facts: "env", "files", "commands", ...) to either ALL (every key the
live collector looks at was looked at: a key missing from the group is truly absent, e.g. a tool not installed, a
file that does not exist, a variable that is unset) or the list of the keys that are known (a partial source: a
paste, a bundle from another tool). A group missing from `known` is not known at all.

The checks read facts only through CheckContext's accessors (rocmcheck/checks/context.py), which raise NotKnown
for a fact that is not known; `run_checks` turns it into a skip that names the fact. Triage (a paste) builds its
Facts with lists of what the paste shows and sets the phrase to "not in the paste".
"""

from __future__ import annotations

from typing import Any, Mapping, Union

from rocmcheck.safe.text import KEY_ECHO_CHARS, excerpt

ALL = "all"
NOT_KNOWN_PHRASE = "not known"

# The groups of Facts that hold facts (its other fields say how the collection went: schema, collected_at,
# deadline_hit, recorded_results).
FACT_GROUPS = ("platform", "os_info", "env", "files", "present", "devices", "user", "limits", "rocm_layout",
               "commands", "packages", "torch_requires", "probes", "probe_runs", "node_health", "launch",
               "extensions")

Known = dict[str, Union[list[str], str]]


class NotKnown(Exception):
    """A judgement needs a fact that was not collected. `what` names it in words a person understands
    ("rocminfo output", "/dev/shm size", "the installed packages")."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class NotCollected(LookupError):
    """A check asked for a fact the collector never records (an environment variable outside ENV_NAMES /
    ENV_PREFIXES): a bug in the check, never a fact about the machine. It is not NotKnown: it crashes the check,
    so a test finds it."""


def everything() -> Known:
    """What a live collection of every group knows (and what Facts made in code without `known` claim)."""
    return {group: ALL for group in FACT_GROUPS}


def knows(known: Mapping[str, Any], group: str, key: str | None = None) -> bool:
    """Whether the group (or one key of it) is known."""
    state = known.get(group)
    if state == ALL:
        return True
    if key is None or not isinstance(state, list):
        return False
    return key in state


def knows_all(known: Mapping[str, Any], group: str) -> bool:
    """Whether every key of the group is known, so a key missing from it is absent."""
    return known.get(group) == ALL


def known_problem(value: Any) -> str | None:
    """Why a bundle's `known` is not a map of group -> "all" | [key, ...]; None when it is."""
    if not isinstance(value, dict):
        return "known should be an object"
    for group, state in value.items():
        if state == ALL:
            continue
        if not isinstance(state, list) or not all(isinstance(k, str) for k in state):
            return f"known.{excerpt(group, KEY_ECHO_CHARS)} should be \"all\" or a list of strings"
    return None


def known_of_bundle(facts: Mapping[str, Any]) -> Known:
    """The `known` of a bundle's facts: as written, or for a bundle without it (an older rocmcheck) every group
    present in its facts is ALL and the groups missing from it are not known."""
    stated = facts.get("known")
    if stated is not None and known_problem(stated) is None:
        return {group: (ALL if state == ALL else list(state)) for group, state in stated.items()}
    return {group: ALL for group in FACT_GROUPS if group in facts}


# ---- words for what is not known -----------------------------------------------------------------------------------

GROUP_WORDS = {
    "platform": "the operating system and kernel",
    "os_info": "the Linux distribution",
    "env": "the environment variables",
    "files": "the system files (/proc, /sys, /etc)",
    "present": "which system paths exist",
    "devices": "the GPU device nodes (/dev/kfd, /dev/dri)",
    "user": "the user and its groups",
    "limits": "the process limits (/dev/shm, memlock)",
    "rocm_layout": "the ROCm install layout (/opt/rocm, ROCM_PATH)",
    "commands": "the GPU tools' output",
    "packages": "the installed packages",
    "torch_requires": "torch's requirements (its Triton pin)",
    "probes": "the Python stack (torch, flash-attn, DeepSpeed, the vendor bindings)",
    "probe_runs": "how the Python stack's probes ended",
    "node_health": "the node's health records (sysfs, uptime)",
    "launch": "the launcher's ranks",
    "extensions": "the GPU code in the installed libraries",
}

KEY_WORDS = {
    ("platform", "system"): "the operating system",
    ("platform", "kernel"): "the kernel release",
    ("files", "/proc/cmdline"): "the kernel command line (/proc/cmdline)",
    ("files", "/proc/sys/kernel/numa_balancing"): "NUMA balancing (/proc/sys/kernel/numa_balancing)",
    ("files", "/proc/self/status"): "the process status (/proc/self/status: seccomp)",
    ("files", "/proc/1/cgroup"): "/proc/1/cgroup",
    ("files", "/sys/module/amdgpu/version"): "the amdgpu driver version (/sys/module/amdgpu/version)",
    ("limits", "shm_bytes"): "/dev/shm size",
    ("limits", "memlock_soft"): "the locked-memory limit (ulimit -l)",
    ("limits", "mem_total_bytes"): "the host memory size",
    ("limits", "cpu_count"): "the CPU count",
    ("user", "uid"): "the user id",
    ("user", "groups"): "the user's groups",
    ("user", "group_ids"): "which groups exist (render, video)",
    ("rocm_layout", "roots"): "the ROCm install layout (/opt/rocm, ROCM_PATH)",
    ("commands", "rocminfo"): "rocminfo output",
    ("commands", "hipconfig"): "hipconfig output",
    ("commands", "amd-smi-static"): "amd-smi static output",
    ("commands", "amd-smi-version"): "amd-smi version output",
    ("commands", "rocm-smi"): "rocm-smi output",
    ("commands", "rocm-smi-json"): "rocm-smi --json output",
    ("commands", "nvidia-smi"): "nvidia-smi output",
    ("commands", "nvidia-smi-query"): "nvidia-smi --query-gpu output",
    ("commands", "nvidia-smi-health"): "nvidia-smi -q output",
    ("commands", "kernel-log-journalctl"): "the kernel log (journalctl -k)",
    ("commands", "kernel-log-dmesg"): "the kernel log (dmesg)",
    ("commands", "mokutil-sb-state"): "mokutil --sb-state output (Secure Boot)",
    ("commands", "dkms-status"): "dkms status output",
    ("commands", "amd-smi-process"): "amd-smi process output",
    ("commands", "nvidia-smi-apps"): "nvidia-smi --query-compute-apps output",
    ("commands", "amd-smi-xgmi-links"): "amd-smi xgmi --link-status output",
    ("commands", "amd-smi-cper"): "amd-smi ras --cper output",
    ("commands", "amd-smi-firmware"): "amd-smi firmware output",
    ("probes", "torch"): "torch's import (version, build, GPUs)",
    ("probes", "flash_attn"): "flash-attn's import",
    ("probes", "deepspeed"): "DeepSpeed's import and ops",
    ("probes", "nvml"): "the NVML binding's GPUs",
    ("probes", "amdsmi"): "the amdsmi binding's GPUs",
    ("node_health", "uptime_s"): "the uptime",
    ("node_health", "pci_gpus"): "the GPUs' PCIe and RAS state (sysfs)",
    ("node_health", "cpufreq_governors"): "the CPU frequency governors",
    ("node_health", "tunableop_files"): "the TunableOp results files",
    ("node_health", "modprobe_amdgpu"): "the modprobe.d files that mention amdgpu",
    ("node_health", "rocm_repos"): "the package repository files that name ROCm",
    ("node_health", "amdgpu_params"): "amdgpu's module parameters",
    ("node_health", "pcie_acs"): "the ACS settings of the PCIe bridges above the GPUs",
    ("node_health", "infiniband"): "the RDMA devices and their GID tables (/sys/class/infiniband)",
}


def describe(group: str, key: str | None = None) -> str:
    """The words for a group, or one key of it, as a skip names them ("not known: /dev/shm size")."""
    if key is None:
        return GROUP_WORDS.get(group, group)
    if (group, key) in KEY_WORDS:
        return KEY_WORDS[(group, key)]
    if group == "env":
        return f"environment variable {key}"
    if group == "packages":
        return f"the installed version of {key}"
    if group == "present":
        return f"whether {key} exists"
    if group == "probe_runs":
        return f"how the {key} probe ended"
    return key
