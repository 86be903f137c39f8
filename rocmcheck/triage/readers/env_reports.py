"""`accelerate env`, `transformers env` (`transformers-cli env`) and `llamafactory-cli env` -> EnvReport.

All three print "- Key: value" lines, written against tests/fixtures/pastes/accelerate_env/,
transformers_env/ and llamafactory_env/: accelerate 0.15 ("- `Accelerate` version:", "PyTorch version (GPU?):
1.14.0a0+410ce96 (True)", the default config indented by 8 spaces), 0.25 on ROCm ("GPU type: AMD Instinct
MI210", "PyTorch XPU available") and 1.10 ("PyTorch version: 2.8.0+cu128" and "PyTorch accelerator: CUDA",
the config indented by a TAB); transformers 4.31 on Windows (TensorFlow log lines before the header) and 4.38
(the whole paste indented inside <details>); llamafactory 0.9.1 ("PyTorch version: 2.3.0+cu121 (GPU)") and 0.9.4
("GPU number", "GPU memory", and a paste with no GPU line at all). Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.triage.readers._read import as_bool, known, normalize_name, read_lines

# `((?:.*\S)?)\s*$`: the value without its trailing spaces in one pass (a lazy `(.*?)\s*$` was quadratic in a
# run of spaces).
_ITEM = re.compile(r"^(\s*)-\s+(.+?):(?:\s+((?:.*\S)?))?\s*$")
_TORCH = re.compile(r"^(\S+)(?:\s+\((True|False|GPU|CPU|NA)\))?\s*$")
_VERSIONED = re.compile(r"^`?(.+?)`?\s+version(?:\s+\([^)]*\))?$", re.IGNORECASE)


@dataclass
class EnvReport:
    tool: str | None = None  # "accelerate" | "transformers" | "llamafactory"
    fields: dict[str, str] = field(default_factory=dict)  # "Platform" -> "Linux-5.15.0-...", keys without backticks
    versions: dict[str, str] = field(default_factory=dict)  # PEP 503 name -> version: "transformers" -> "4.45.0"
    config: dict[str, str] = field(default_factory=dict)  # accelerate's "default config" items
    platform: str | None = None
    python_version: str | None = None
    torch_version: str | None = None  # "2.1.0+rocm5.6"
    torch_gpu: bool | None = None  # "(True)" / "(GPU)" after the torch version; None when not printed
    accelerator: str | None = None  # accelerate >= 1.x "PyTorch accelerator: CUDA"
    gpu_type: str | None = None  # "AMD Instinct MI210", "NVIDIA H100 NVL"
    gpu_count: int | None = None  # llamafactory "GPU number"
    gpu_memory: str | None = None  # llamafactory "GPU memory: 10.57GB"
    system_ram: str | None = None  # accelerate "System RAM: 503.71 GB"

    @property
    def found(self) -> bool:
        return bool(self.fields)


def parse_env_report(text: Any) -> EnvReport:
    """Any of the three; `tool` says which (from its header line, else from the keys it printed). Written against
    tests/fixtures/pastes/accelerate_env/accelerate0.15.0_torch1.14.0a0-NGC-22.12_root-prompt_README.txt (and the
    0.25 and 1.10 pastes beside it), transformers_env/transformers-cli-env_4.38.2_torch2.2.1+cu121_in-details-
    indented_jax-warning_diffusers-pr7403.txt and llamafactory_env/llamafactory0.9.4.dev0_torch2.7.1+cu126_
    RTX2080Ti_GPU-number-memory_LlamaFactory-8598.txt (and the others in those folders)."""
    report = EnvReport()
    config_indent: int | None = None
    for raw in read_lines(text):
        if not raw.strip():
            continue
        m = _ITEM.match(raw.replace("\t", "        "))
        if not m:
            if raw.strip() == "-":
                continue
            config_indent = None
            continue
        indent, key, value = len(m.group(1)), m.group(2).strip(), (m.group(3) or "").strip()
        if config_indent is not None and indent > config_indent:
            if len(report.config) < 200:
                report.config[key] = value
            continue
        config_indent = None
        plain = key.replace("`", "").strip()
        if plain.lower() in ("accelerate default config", "accelerate config"):
            if value and value.lower() != "not found":
                report.fields[plain] = value
            else:
                config_indent = indent
                report.fields.setdefault(plain, value)
            continue
        if len(report.fields) < 200:
            report.fields.setdefault(plain, value)
        _field(report, key, plain, value)
    if report.tool is None:
        report.tool = _tool_from_keys(report)
    return report


def _field(report: EnvReport, key: str, plain: str, value: str) -> None:
    low = plain.lower()
    if report.tool is None and key.startswith("`") and low.endswith(" version"):
        tool = key.strip("`").split("`")[0].strip().lower()
        if tool in ("accelerate", "transformers", "llamafactory"):
            report.tool = tool
    if low == "platform":
        report.platform = known(value)
    elif low == "python version":
        report.python_version = known(value)
    elif low.startswith("pytorch version"):
        m = _TORCH.match(value)
        if m:
            report.torch_version = known(m.group(1))
            flag = m.group(2)
            report.torch_gpu = True if flag == "GPU" else False if flag == "CPU" else as_bool(flag)
        if report.torch_version:
            report.versions.setdefault("torch", report.torch_version)
    elif low == "pytorch accelerator":
        report.accelerator = known(value)
    elif low == "gpu type":
        report.gpu_type = known(value)
    elif low == "gpu number":
        m = re.match(r"\d+", value)
        report.gpu_count = int(m.group(0)) if m and len(m.group(0)) < 6 else None
    elif low == "gpu memory":
        report.gpu_memory = known(value)
    elif low == "system ram":
        report.system_ram = known(value)
    else:
        m = _VERSIONED.match(plain)
        if m:
            version = known(value.split(" (")[0])
            if version and version.lower() != "not installed":
                report.versions.setdefault(normalize_name(m.group(1)), version)


def _tool_from_keys(report: EnvReport) -> str | None:
    keys = {k.lower() for k in report.fields}
    if keys & {"llamafactory version", "peft version", "trl version", "datasets version"}:
        return "llamafactory"
    if keys & {"huggingface_hub version", "safetensors version", "using gpu in script?"}:
        return "transformers"
    if keys & {"accelerate version", "accelerate default config", "numpy version", "pytorch accelerator"}:
        return "accelerate"
    return None
