"""What `rocmcheck probe` reads about this machine, once, in the parent, before the GPU stage: the HostFacts the
judges read (the doctor passes what its own collection found instead). No torch here.

Every fact comes through the facts layer: the tools are found by rocmcheck.facts.tools.find_tool and run through
the one runner, their outputs read by the parsers in rocmcheck/facts/parsers (the same the doctor uses), the ROCm
release by rocmcheck.facts.rocm_location, the /proc files by the one bounded reader. A tool that is missing or
gives nothing leaves its fact not known (None)."""

from __future__ import annotations

import os
from typing import Callable, Mapping

from rocmcheck.facts.collect import NVIDIA_QUERY_FIELDS
from rocmcheck.facts.parsers.models import SmiReport
from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv
from rocmcheck.facts.parsers.smi import parse_amd_smi_static_json, parse_rocm_smi_json
from rocmcheck.facts.rocm_location import find_rocm
from rocmcheck.facts.tools import find_tool
from rocmcheck.probes.context import HostFacts
from rocmcheck.runner import run_command
from rocmcheck.safe.files import read_head

TOOL_TIMEOUT_S = 20.0  # the doctor's own limit for these tools (rocmcheck doctor --command-timeout)
PROC_READ_LIMIT = 64_000
CMDLINE = "/proc/cmdline"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"

# (tool, its arguments, the parser of its stdout): the queries the doctor's fact collection runs, most trusted
# first. The first that names a GPU wins.
SMI_QUERIES: tuple[tuple[str, tuple[str, ...], Callable[[str], SmiReport]], ...] = (
    ("amd-smi", ("static", "--json"), parse_amd_smi_static_json),
    ("rocm-smi", ("--showproductname", "--showmeminfo", "vram", "--json"), parse_rocm_smi_json),
    ("nvidia-smi", ("--query-gpu=" + ",".join(NVIDIA_QUERY_FIELDS), "--format=csv,noheader,nounits"),
     lambda text: parse_nvidia_smi_csv(text, NVIDIA_QUERY_FIELDS)),
)


def read_smi(env: Mapping[str, str] | None = None, timeout_s: float = TOOL_TIMEOUT_S) -> SmiReport | None:
    """The GPUs the first system tool here lists (amd-smi, rocm-smi, nvidia-smi), or None when none does."""
    env = os.environ if env is None else env
    for tool, args, parse in SMI_QUERIES:
        path = find_tool(tool, env)
        if path is None:
            continue
        result = run_command([path, *args], timeout=timeout_s, env=dict(env))
        report = parse(result.stdout) if result.ok else None
        if report is not None and report.gpus:
            return report
    return None


def read_host_facts(env: Mapping[str, str] | None = None, *, smi: bool = True,
                    timeout_s: float = TOOL_TIMEOUT_S, root: str = "/") -> HostFacts:
    """This machine's HostFacts. smi=False leaves the tools' GPU list not known (no probe that reads it runs)."""
    env = os.environ if env is None else env
    report = read_smi(env, timeout_s) if smi else None
    names = [g.product_name for g in report.gpus if g.product_name] if report else []
    memory = [g.vram_total_bytes for g in report.gpus if g.vram_total_bytes] if report else []
    location = find_rocm(env, root)
    return HostFacts(gpu_names=names or None, smi_memory_bytes=memory or None,
                     rocm_version=location.version if location is not None else None,
                     kernel_cmdline=read_head(os.path.join(root, CMDLINE.lstrip("/")), PROC_READ_LIMIT),
                     numa_balancing=read_head(os.path.join(root, NUMA_BALANCING.lstrip("/")), PROC_READ_LIMIT))
