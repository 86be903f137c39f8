"""Package listings -> Packages (name -> version), and pip's install log -> PipInstall.

Written against tests/fixtures/pastes/pip/ and tests/fixtures/pastes/conda_list/: `pip list` (the two-column
table, and the three-column one with "Editable project location"), `pip freeze` (with a person's note after a
line, `name @ file:///...` lines), `conda list` (its "# packages in environment at" header, the 3- and 4-column
rows, an empty channel column on Linux, the `nvidia` channel on Windows), and pip's install output in
tests/fixtures/pastes/pip_install/ ("ERROR: Could not find a version that satisfies the requirement torch (from
versions: none)", "Successfully installed ..."). Versions are kept as printed, local labels included
("2.4.0+rocm6.1"). Names are compared as pip does (PEP 503: "PyYAML" is "pyyaml"). TheRock's per-arch torch
device wheels ("amd-torch-device-gfx942  2.12.0+rocm7.14.0") are read as torch's build and the archs it carries
kernels for (Packages.torch_version, .torch_device_archs). Never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rocmcheck.facts.parsers.versions import torch_device_wheels, torch_version_of
from rocmcheck.triage.readers._read import normalize_name, read_lines

MAX_PACKAGES = 10_000
_VERSION = r"[0-9][\w.!+*-]*"
_LIST_ROW = re.compile(rf"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+({_VERSION})(?:\s+(\S.*?))?\s*$")
_FREEZE_ROW = re.compile(rf"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*({_VERSION})")
_FREEZE_URL = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s+@\s+(\S+)")
_CONDA_ROW = re.compile(rf"^([A-Za-z0-9_][A-Za-z0-9._-]*)\s+({_VERSION})\s+(\S+)(?:\s+(\S+))?\s*$")
_CONDA_ENV = re.compile(r"^# packages in environment at (.+?):?\s*$")


@dataclass
class Packages:
    tool: str  # "pip_list" | "pip_freeze" | "conda_list"
    versions: dict[str, str] = field(default_factory=dict)  # PEP 503 name -> version as printed
    names: dict[str, str] = field(default_factory=dict)  # PEP 503 name -> the name as printed (every package listed)
    details: dict[str, dict[str, str]] = field(default_factory=dict)  # conda build/channel, pip list location, URL
    environment: str | None = None  # conda's "# packages in environment at /path:"

    def version(self, name: str) -> str | None:
        return self.versions.get(normalize_name(name))

    @property
    def torch_version(self) -> str | None:
        """torch's build: its own row, else the version of TheRock's device wheels ("amd-torch-device-gfx942")."""
        return torch_version_of(self.versions)

    @property
    def torch_device_archs(self) -> list[str]:
        """The archs (or arch families) whose TheRock torch device wheels are installed: ["gfx90a", "gfx942"]."""
        return sorted(torch_device_wheels(self.versions))

    @property
    def found(self) -> bool:
        return bool(self.versions)

    def _add(self, name: str, version: str, **detail: str) -> None:
        """A package; with no version known (a `name @ URL` line whose URL names none), only its name and details."""
        key = normalize_name(name)
        if key in self.names or len(self.names) >= MAX_PACKAGES:
            return
        if version:
            self.versions[key] = version
        self.names[key] = name
        kept = {k: v for k, v in detail.items() if v}
        if kept:
            self.details[key] = kept


def parse_pip_list(text: Any) -> Packages:
    """`pip list`: "Package  Version  [Editable project location]" over a row of dashes, then one row per
    package. Rows before the header are read too (a paste cut at its top). Written against
    tests/fixtures/pastes/pip_list/pip-list_torch-2.8.0+rocm6.4_comfyui_Radeon680M_ROCm-5225.txt and
    pip-list_Editable-project-location-column_root-prompt_LlamaFactory-3425_excerpt.txt."""
    packages = Packages(tool="pip_list")
    for raw in read_lines(text):
        line = raw.strip()
        if not line or line.startswith(("Package ", "---", "WARNING", "[notice]", "DEPRECATION")):
            continue
        m = _LIST_ROW.match(line)
        if m:
            packages._add(m.group(1), m.group(2), location=m.group(3) or "")
    return packages


def parse_pip_freeze(text: Any) -> Packages:
    """`pip freeze` (and `pip list --format=freeze`): "name==version" lines, "name @ URL" lines (the version only
    when the URL names a wheel or an archive; the URL is kept), and a person's note after a line. Written against
    tests/fixtures/pastes/pip_freeze/pip-freeze_torch-2.4.0+rocm6.1_pytorch-triton-rocm-3.0.0_user-annotation-in-line_
    ROCm-3132.txt and pip-freeze_NGC-container_file-URL-and-git-URL-lines_accelerate-2773_excerpt.txt."""
    packages = Packages(tool="pip_freeze")
    for raw in read_lines(text):
        line = raw.strip()
        m = _FREEZE_ROW.match(line)
        if m:
            packages._add(m.group(1), m.group(2))
            continue
        m = _FREEZE_URL.match(line)
        if m:
            version = re.search(r"-(\d[\w.+!]*?)(?:-py\d|-cp\d|\.tar|\.zip|\.whl|$)", m.group(2))
            packages._add(m.group(1), version.group(1) if version else "", url=m.group(2))
    return packages


def parse_conda_list(text: Any) -> Packages:
    """`conda list`: "# Name  Version  Build  Channel" rows; the channel column is empty for packages from the
    default channel, and "pypi" for what pip installed. Written against tests/fixtures/pastes/conda_list/
    conda-list_linux_cudatoolkit-10.1_in-details_empty-channel-column_pytorch-32369_excerpt.txt and
    conda-list_Windows_nvidia-channel-cuda-12.1-packages_conda-14054_excerpt.txt."""
    packages = Packages(tool="conda_list")
    for raw in read_lines(text):
        line = raw.strip()
        m = _CONDA_ENV.match(line)
        if m:
            packages.environment = packages.environment or m.group(1).strip()
            continue
        if not line or line.startswith("#"):
            continue
        m = _CONDA_ROW.match(line)
        if m:
            packages._add(m.group(1), m.group(2), build=m.group(3), channel=m.group(4) or "")
    return packages


def parse_packages(text: Any) -> Packages:
    """Whichever of the three listings the text is, told by its header or, without one, by its rows."""
    lines = read_lines(text)[:200]
    joined = "\n".join(lines)
    if "# packages in environment at" in joined or re.search(r"^#\s*Name\s+Version\s+Build", joined, re.MULTILINE):
        return parse_conda_list(text)
    if re.search(r"^\s*Package\s+Version", joined, re.MULTILINE):
        return parse_pip_list(text)
    freeze = sum(1 for line in lines if _FREEZE_ROW.match(line.strip()) or _FREEZE_URL.match(line.strip()))
    conda = sum(1 for line in lines if _CONDA_ROW.match(line.strip()) and not _FREEZE_ROW.match(line.strip()))
    if freeze >= conda:
        return parse_pip_freeze(text)
    listed = parse_pip_list(text)
    return parse_conda_list(text) if conda > len(listed.versions) / 2 and conda > freeze else listed


# ---- pip install ---------------------------------------------------------------------------------------------

_INDEX = re.compile(r"^Looking in (?:indexes|links):\s*(.+)$")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+)(?: \(from versions: (.*)\))?")
_NO_DISTRIBUTION = re.compile(r"No matching distribution found for (\S+)")
_INSTALLED = re.compile(r"^Successfully installed (.+)$")
_FAILED_BUILD = re.compile(r"(?:Failed to build|Failed building wheel for|Failed to build installable wheels for "
                           r"some pyproject\.toml based projects)\s*\(?([\w.,\s-]+?)\)?\s*$")
_ERROR = re.compile(r"^(?:ERROR|error):\s*(.+)$")


@dataclass
class PipInstall:
    indexes: list[str] = field(default_factory=list)  # "https://rocm.nightlies.amd.com/v2/gfx120X-all/"
    installed: dict[str, str] = field(default_factory=dict)  # "Successfully installed a-1.0 b-2.0" -> {"a": "1.0"}
    not_found: list[str] = field(default_factory=list)  # requirements pip found no version of ("torch")
    available: dict[str, str] = field(default_factory=dict)  # requirement -> "(from versions: ...)" as printed
    failed_builds: list[str] = field(default_factory=list)  # "flash_attn"
    errors: list[str] = field(default_factory=list)  # the "ERROR: ..." / "error: ..." lines, their text

    @property
    def found(self) -> bool:
        return bool(self.indexes or self.installed or self.not_found or self.failed_builds or self.errors)


def parse_pip_install(text: Any) -> PipInstall:
    """Never raises. Written against tests/fixtures/pastes/corpus/26-aqarooni02-Comfyui-AMD-Windows-Install-Script-1
    (no torch for Python 3.14 on the index), corpus/12-ROCm-flash-attention-80 and
    corpus/25-deepspeedai-DeepSpeed-2080."""
    result = PipInstall()
    for raw in read_lines(text):
        line = raw.strip()
        if not line:
            continue
        m = _INDEX.match(line)
        if m:
            for url in re.split(r",\s*", m.group(1)):
                if url and url not in result.indexes and len(result.indexes) < 20:
                    result.indexes.append(url.strip())
            continue
        m = _INSTALLED.match(line)
        if m:
            for item in m.group(1).split():
                name, _, version = item.rpartition("-")
                if name and version and len(result.installed) < MAX_PACKAGES:
                    result.installed[normalize_name(name)] = version
            continue
        m = _NO_VERSION.search(line)
        if m:
            _once(result.not_found, m.group(1))
            if m.group(2) is not None:
                result.available[m.group(1)] = m.group(2)
        m2 = _NO_DISTRIBUTION.search(line)
        if m2:
            _once(result.not_found, m2.group(1))
        m3 = _FAILED_BUILD.search(line)
        if m3:
            for name in re.split(r"[,\s]+", m3.group(1).strip()):
                if name:
                    _once(result.failed_builds, name)
        m4 = _ERROR.match(line)
        if m4 and len(result.errors) < 100:
            result.errors.append(m4.group(1)[:500])
    return result


def _once(items: list[str], value: str) -> None:
    if value not in items and len(items) < 100:
        items.append(value)
