"""`ds_report` (also `python -m deepspeed.env_report`) -> DsReport: every op with its installed / compatible
status, the warnings printed between them, and the "DeepSpeed general environment info" lines.

Written against tests/fixtures/pastes/ds_report/ (a ROCm 6.0 Singularity container with deepspeed 0.14.0, where
"torch hip version ... 6.0.32830-d62f6a171" and "nvcc version ... None"; a CUDA 12.8 container with deepspeed
0.17.2 where linker errors are printed between two op rows; an unfenced MI200 excerpt cut inside the op table;
and deepspeed 0.6.2's older "nvcc version .....  [FAIL] cannot find CUDA_HOME ..." and "deepspeed wheel compiled
w. ...... torch 1.10, cuda 0.0, hip 5.1" forms) and tests/fixtures/public/ds_report/ (an 8x MI300X excerpt).

A ds_report that crashes importing deepspeed (its script's first line is `from deepspeed.env_report import
cli_main`, which runs deepspeed/__init__.py) prints a traceback and no report: it is read as "deepspeed fails to
import" with the traceback's last exception line, and nothing else (tests/fixtures/pastes/traceback/ds_report_crash-
at-import-deepspeed_torch-OSError-libcublas_DeepSpeed-3386_excerpt.txt, ..._triton-3.2.0-CPU-node_DeepSpeed-7028_
excerpt.txt). Never raises.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import known, read_lines
from rocmcheck.triage.readers.traceback import parse_traceback
from rocmcheck.units import UNIT_BYTES

_OP = re.compile(r"^([A-Za-z_][\w]*)\s+\.+\s*\[(\w+)\]\s*\.+\s*\[(\w+)\]")
_NINJA = re.compile(r"^ninja\s+\.{2,}\s*\[(\w+)\]")
_ENV = re.compile(r"^([a-z][\w ()/.]*?)\s\.{3,}\s?(.*)$")
_ACCELERATOR = re.compile(r"Setting (?:ds_)?accelerator to (\w+)", re.IGNORECASE)
_WARNING = re.compile(r"^\s*\[WARNING\]\s*(.*)$")
_SIZE = re.compile(r"^([\d.]+)\s*([KMGT]?B)\b", re.IGNORECASE)
_STATUS = {"YES": True, "OKAY": True, "NO": False, "FAIL": False}
# ds_report's own frame in a traceback: the console script (".../bin/ds_report", line 3: `from deepspeed.env_report
# import cli_main`), or `python -m deepspeed.env_report`.
_CRASH = re.compile(r'File "[^"]*[/\\]ds_report", line \d+|from deepspeed\.env_report import cli_main'
                    r'|File "[^"]*deepspeed[/\\]env_report\.py", line \d+')


@dataclass
class DsOp:
    name: str
    installed: bool | None  # "[YES]" built into the wheel; "[NO]" JIT-compiled when first used
    compatible: bool | None  # "[OKAY]" its build dependencies are there; "[NO]" it cannot be built here
    installed_text: str = ""
    compatible_text: str = ""


@dataclass
class DsReport:
    ops: dict[str, DsOp] = field(default_factory=dict)
    ninja_ok: bool | None = None
    warnings: list[str] = field(default_factory=list)  # the " [WARNING]  ..." lines, their text only
    other_lines: list[str] = field(default_factory=list)  # lines inside the op table that are not ops (linker errors)
    accelerator: str | None = None  # "cuda" from "Setting ds_accelerator to cuda (auto detect)" ("cuda" on ROCm too)
    torch_install_path: str | None = None
    torch_version: str | None = None
    deepspeed_install_path: str | None = None
    deepspeed_version: str | None = None  # "0.14.0" (first field of "deepspeed info")
    deepspeed_info: str | None = None  # "0.14.0, unknown, unknown" as printed
    torch_cuda_version: str | None = None  # None when printed "None" (not a CUDA build)
    torch_hip_version: str | None = None  # "6.0.32830-d62f6a171"
    nvcc_version: str | None = None  # None for "None" and for "[FAIL] cannot find CUDA_HOME ..."
    nvcc_text: str | None = None  # the value as printed
    compiled_with: dict[str, str] = field(default_factory=dict)  # "torch 2.7, cuda 0.0" -> {"torch": "2.7", ...}
    shm_size_text: str | None = None  # "15.25 GB"
    shm_size_bytes: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # every "name ..... value" line of the environment section
    sections: list[str] = field(default_factory=list)  # "ops", "environment"
    import_failed: bool = False  # ds_report crashed importing deepspeed: no report, and no fact but this one
    import_error: str | None = None  # the crash's last exception line ("OSError: ..."); None when the text is cut
    import_failed_in: str | None = None  # the package of the frame that raised ("torch": `import torch` failed)

    @property
    def found(self) -> bool:
        return bool(self.sections) or self.import_failed


def parse_ds_report(text: Any) -> DsReport:
    """Never raises; what the text does not show stays None / empty.

    Written against tests/fixtures/pastes/ds_report/ds_report_rocm6.0_torch2.3.1_deepspeed0.14.0_Singularity-LUMI-
    container_complete.txt, ds_report_cuda12.8_torch2.7.0_deepspeed0.17.2_cotainr-container_ld-error-interleaved_
    complete.txt, ds_report_MI200_unfenced_DeepSpeed-5100_excerpt.txt and env-info-section_rocm5.1_torch1.10_
    deepspeed0.6.2_before-after_DeepSpeed-pr1906.txt."""
    report = DsReport()
    if is_ds_report_crash(text):
        tb = parse_traceback(text)
        error = f"{tb.exception_type}: {tb.message}" if tb.exception_type and tb.message else tb.exception_type
        frame = tb.failing_frame
        return DsReport(import_failed=True, import_error=error, import_failed_in=frame.library if frame else None)
    in_table = False
    for raw in read_lines(text):
        line = raw.strip()
        if not line:
            continue
        m = _ACCELERATOR.search(line)
        if m and report.accelerator is None:
            report.accelerator = m.group(1).lower()
            continue
        if line.startswith("DeepSpeed C++/CUDA extension op report") or line.startswith("op name "):
            _mark(report, "ops")
            in_table = line.startswith("op name ")
            continue
        if line.startswith("DeepSpeed general environment info"):
            _mark(report, "environment")
            in_table = False
            continue
        m = _NINJA.match(line)
        if m:
            report.ninja_ok = _STATUS.get(m.group(1).upper())
            continue
        m = _OP.match(line)
        if m:
            _mark(report, "ops")
            in_table = True
            name, inst, comp = m.group(1), m.group(2).upper(), m.group(3).upper()
            if len(report.ops) < 500:
                report.ops[name] = DsOp(name, _STATUS.get(inst), _STATUS.get(comp), inst, comp)
            continue
        m = _WARNING.match(line)
        if m:
            if len(report.warnings) < 200:
                report.warnings.append(m.group(1).strip())
            continue
        m = _ENV.match(line)
        if m and not line.startswith("-"):
            _mark(report, "environment")
            in_table = False
            _env(report, m.group(1).strip(), m.group(2).strip())
            continue
        if in_table and not line.startswith("-") and len(report.other_lines) < 200:
            report.other_lines.append(line[:500])
    return report


def is_ds_report_crash(text: Any) -> bool:
    """The text is ds_report's traceback from importing deepspeed (its report never printed)."""
    lines = read_lines(text)
    return any("Traceback (most recent call last)" in line for line in lines) and \
        any(_CRASH.search(line) for line in lines)


def _mark(report: DsReport, section: str) -> None:
    if section not in report.sections:
        report.sections.append(section)


def _path(value: str) -> str | None:
    """"['/opt/conda/lib/python3.11/site-packages/torch']" -> the path."""
    v = value.strip()
    if v.startswith("["):
        try:
            parsed = ast.literal_eval(v)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, list) and parsed and isinstance(parsed[0], str):
            return parsed[0]
        v = v.strip("[]").split(",")[0].strip().strip("'\"")
    return known(v)


def _env(report: DsReport, name: str, value: str) -> None:
    if len(report.env) < 100:
        report.env.setdefault(name, value)
    if name == "torch install path":
        report.torch_install_path = _path(value)
    elif name == "torch version":
        report.torch_version = known(value)
    elif name == "deepspeed install path":
        report.deepspeed_install_path = _path(value)
    elif name == "deepspeed info":
        report.deepspeed_info = value or None
        report.deepspeed_version = known(value.split(",")[0]) if value else None
    elif name == "torch cuda version":
        report.torch_cuda_version = known(value)
    elif name == "torch hip version":
        report.torch_hip_version = known(value)
    elif name == "nvcc version":
        report.nvcc_text = value or None
        report.nvcc_version = None if "[FAIL]" in value else known(value)
    elif name == "deepspeed wheel compiled w.":
        for part in value.split(","):
            words = part.split()
            if len(words) == 2:
                report.compiled_with[words[0].lower()] = words[1]
    elif name == "shared memory (/dev/shm) size":
        report.shm_size_text = known(value)
        m = _SIZE.match(value)
        if m:
            try:
                report.shm_size_bytes = int(float(m.group(1)) * UNIT_BYTES[m.group(2).upper()])
            except (ValueError, KeyError, OverflowError):
                report.shm_size_bytes = None
    elif name == "accelerator" and report.accelerator is None:
        report.accelerator = known(value.lower())
