"""One block of a paste -> what its tool's reader makes of it. `read_block(block)` picks the reader by the
block's kind (and, for the tools with several output formats, by what the block holds); the GPU tools' outputs
go to the readers in rocminfo.py, smi.py, nvidia_smi.py, hipconfig.py and kernel_log.py. Never raises.

| kind | reader | returns |
|---|---|---|
| collect_env | collect_env.parse_collect_env | CollectEnv |
| ds_report | ds_report.parse_ds_report | DsReport |
| pip_list / pip_freeze / conda_list | packages.parse_pip_list / parse_pip_freeze / parse_conda_list | Packages |
| pip_install | packages.parse_pip_install | PipInstall |
| accelerate_env / transformers_env / llamafactory_env | env_reports.parse_env_report | EnvReport |
| rocminfo | rocminfo.parse_rocminfo | RocminfoReport |
| rocm_smi | smi.parse_rocm_smi (+ _productname, _meminfo, _json), merged | SmiReport |
| amd_smi | smi.parse_amd_smi_version (+ _static_json, _static_text), merged | SmiReport |
| nvidia_smi | nvidia_smi.parse_nvidia_smi_table, or parse_nvidia_smi_csv with the query's fields | SmiReport |
| rocm_smi / amd_smi / nvidia_smi topology | links.parse_rocm_smi_topo / _amd_smi_topology / _nvidia_topo | Topology |
| hipconfig | hipconfig.parse_hipconfig | HipConfig |
| kernel_log | kernel_log.parse_kernel_log | list[Finding] |
| uname, os_release, lsb_release, nvcc, dkms | system_info.parse_* | Uname, OsRelease, LsbRelease, Nvcc, DkmsStatus |
| docker_run | docker_run.parse_docker_run | DockerRun |
| python_session | python_session.parse_python_session | PythonSession |
| traceback | traceback.parse_traceback | Traceback |
| nccl_log / nccl_tests | nccl_log.parse_nccl_log / parse_nccl_tests | NcclLog / NcclTests |
| hip_log | hip_log.parse_hip_log | HipLog |
| rocmcheck_summary | summary.parse_summary | Summary |
| text | (none) | None |
"""

from __future__ import annotations

import re
from typing import Any, Callable

from rocmcheck.checks.context import ParsedStore
from rocmcheck.facts.parsers.hipconfig import parse_hipconfig
from rocmcheck.facts.parsers.kernel_log import parse_kernel_log
from rocmcheck.facts.parsers.links import parse_amd_smi_topology, parse_nvidia_topo, parse_rocm_smi_topo
from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_table
from rocmcheck.facts.parsers.rocminfo import parse_rocminfo
from rocmcheck.facts.parsers.smi import (
    merge_smi,
    parse_amd_smi_static_json,
    parse_amd_smi_static_text,
    parse_amd_smi_version,
    parse_rocm_smi,
    parse_rocm_smi_json,
    parse_rocm_smi_meminfo,
    parse_rocm_smi_productname,
)
from rocmcheck.triage.readers.collect_env import parse_collect_env
from rocmcheck.triage.readers.docker_run import parse_docker_run
from rocmcheck.triage.readers.ds_report import parse_ds_report
from rocmcheck.triage.readers.env_reports import parse_env_report
from rocmcheck.triage.readers.hip_log import parse_hip_log
from rocmcheck.triage.readers.nccl_log import parse_nccl_log, parse_nccl_tests
from rocmcheck.triage.readers.packages import parse_conda_list, parse_pip_freeze, parse_pip_install, parse_pip_list
from rocmcheck.triage.readers.paste import Block
from rocmcheck.triage.readers.python_session import parse_python_session
from rocmcheck.triage.readers.summary import parse_summary
from rocmcheck.triage.readers.system_info import (
    parse_dkms_status,
    parse_lsb_release,
    parse_nvcc,
    parse_os_release,
    parse_uname,
)
from rocmcheck.triage.readers.traceback import parse_traceback

# The topology tools' own lines: `amd-smi topology`'s table titles, `nvidia-smi topo -m`'s header, `rocm-smi
# --showtopo`'s block titles.
_AMD_TOPOLOGY = re.compile(r"^\s*LINK TYPE TABLE:\s*$", re.MULTILINE)
_NVIDIA_TOPOLOGY = re.compile(r"^\s*GPU0(?:\s+(?:GPU|NIC|mlx)\w*)*\s+CPU Affinity", re.MULTILINE)
_ROCM_SMI_TOPOLOGY = re.compile(r"^=+ (?:Weight|Hops|Link Type|Numa Nodes) between two GPUs =+", re.MULTILINE)
_QUERY = re.compile(r"--query-(?:gpu|compute-apps)[= ]([\w.,]+)")
_CSV_HEADER = re.compile(r"^\s*([a-z_][\w.]*(?:\s*\[[^\]]*\])?(?:\s*,\s*[a-z_][\w.]*(?:\s*\[[^\]]*\])?)+)\s*$",
                         re.MULTILINE)


def _once(store: ParsedStore | None, parse: Callable[[str], Any], text: str) -> Any:
    """parse(text), kept in the run's store (rocmcheck.checks.context.ParsedStore): the doctor's checks, judging
    the pasted tool output, ask the same parser for the same text and get this parse."""
    if store is None:
        return parse(text)
    slot = (parse, text)
    if slot not in store:
        store[slot] = parse(text)
    return store[slot]


def _rocm_smi(block: Block, store: ParsedStore | None = None) -> Any:
    text = block.text
    if _ROCM_SMI_TOPOLOGY.search(text):
        return parse_rocm_smi_topo(text)
    if text.lstrip().startswith("{"):
        return _once(store, parse_rocm_smi_json, text)
    return merge_smi(_once(store, parse_rocm_smi, text), parse_rocm_smi_productname(text),
                     parse_rocm_smi_meminfo(text))


def _amd_smi(block: Block, store: ParsedStore | None = None) -> Any:
    text = block.text
    if _AMD_TOPOLOGY.search(text):
        return parse_amd_smi_topology(text)
    return merge_smi(parse_amd_smi_static_json(text), parse_amd_smi_static_text(text),
                     _once(store, parse_amd_smi_version, text))


def _nvidia_smi(block: Block, store: ParsedStore | None = None) -> Any:
    """The default table, or `--query-gpu` CSV read with the fields of its command or of its header row."""
    text = block.text
    if _NVIDIA_TOPOLOGY.search(text):
        return parse_nvidia_topo(text)
    if "NVIDIA-SMI" in text or "|" in text:
        return _once(store, parse_nvidia_smi_table, text)
    m = _QUERY.search(block.command or "")
    if m:
        return parse_nvidia_smi_csv(text, m.group(1).split(","))
    header = _CSV_HEADER.search(text)
    if header:
        fields = [re.sub(r"\s*\[[^\]]*\]\s*$", "", f).strip() for f in header.group(1).split(",")]
        return parse_nvidia_smi_csv(text, fields)
    return _once(store, parse_nvidia_smi_table, text)


# Each reader: (block, the run's store of parsed tool outputs, or none) -> what it makes of the block.
READERS: dict[str, Callable[..., Any]] = {
    "collect_env": lambda b, s=None: parse_collect_env(b.text),
    "ds_report": lambda b, s=None: parse_ds_report(b.text),
    "pip_list": lambda b, s=None: parse_pip_list(b.text),
    "pip_freeze": lambda b, s=None: parse_pip_freeze(b.text),
    "conda_list": lambda b, s=None: parse_conda_list(b.text),
    "pip_install": lambda b, s=None: parse_pip_install(b.text),
    "accelerate_env": lambda b, s=None: parse_env_report(b.text),
    "transformers_env": lambda b, s=None: parse_env_report(b.text),
    "llamafactory_env": lambda b, s=None: parse_env_report(b.text),
    "rocminfo": lambda b, s=None: _once(s, parse_rocminfo, b.text),
    "rocm_smi": _rocm_smi,
    "amd_smi": _amd_smi,
    "nvidia_smi": _nvidia_smi,
    "hipconfig": lambda b, s=None: _once(s, parse_hipconfig, b.text),
    "nvcc": lambda b, s=None: parse_nvcc(b.text),
    "uname": lambda b, s=None: parse_uname(b.text),
    "os_release": lambda b, s=None: parse_os_release(b.text),
    "lsb_release": lambda b, s=None: parse_lsb_release(b.text),
    "dkms": lambda b, s=None: parse_dkms_status(b.text),
    "docker_run": lambda b, s=None: parse_docker_run(b.text),
    "kernel_log": lambda b, s=None: _once(s, parse_kernel_log, b.text),
    "python_session": lambda b, s=None: parse_python_session(b.text),
    "traceback": lambda b, s=None: parse_traceback(b.text),
    "nccl_log": lambda b, s=None: parse_nccl_log(b.text),
    "nccl_tests": lambda b, s=None: parse_nccl_tests(b.text),
    "hip_log": lambda b, s=None: parse_hip_log(b.text),
    "rocmcheck_summary": lambda b, s=None: parse_summary(b.text),
}


def read_block(block: Block, store: ParsedStore | None = None) -> Any:
    """What the block's reader makes of it; None for text and for a kind with no reader. Never raises: a
    reader that faults on some block gives None for it. `store`: the run's parsed tool outputs, shared with the
    checks that judge the pasted facts (each parse made once per run)."""
    reader = READERS.get(block.kind)
    if reader is None:
        return None
    try:
        return reader(block, store)
    except Exception:  # noqa: BLE001 - one faulty reader must not lose the rest of the paste
        return None
