"""What people pasted -> partial Facts: each fact a reader found, with the pasted line that shows it, and `known`
saying which facts those are (a fact nobody pasted is not known, never absent: rocmcheck/facts/known.py).

One machine is assumed behind all the pastes of one triage; when two pastes show the same fact, the first one
read wins. Which reader gives which fact:

- collect_env: the torch probe (version, debug build, hip / cuda, CUDA available), Python, kernel, OS, GPU names
  and archs, the packages it lists;
- ds_report: the deepspeed probe (version, accelerator, its ops, ninja), torch's version and hip / cuda, /dev/shm;
- pip list / pip freeze / conda list: every package rocmcheck looks at (these list everything installed: a package
  not listed is not installed), unless the listing is a fragment of a few lines (then only what it lists);
- accelerate / transformers / llamafactory env: torch's version, the packages, Python, kernel, the GPU model;
- rocminfo, rocm-smi, amd-smi, nvidia-smi, hipconfig: `commands[...]` with the pasted text as stdout, read by the
  doctor's own parsers (a rocminfo fragment gives the GPU archs it names, nothing more);
- a kernel log: `commands["kernel-log-dmesg"]`;
- uname, os-release, lsb_release: platform (kernel, system, machine), os_info;
- docker run: what the container was started with (/.dockerenv, /dev/kfd, /dev/shm size, its -e variables);
- a Python session: the torch probe (version, build, CUDA available, device count, arch list, devices), Python,
  the variables set before `python`;
- an NCCL log: the NCCL_* variables it says were set;
- an nccl-tests / rccl-tests run: whether it finished (a sign, rocmcheck/triage/signs.py, when it did not);
- a rocmcheck summary: everything it shows, and its verdicts;
- `ls -l` of the GPU device nodes (/dev/kfd, /dev/dri/*, /dev/dxg, /dev/nvidia*): each node exists, its mode and
  group, and whether this user can open it when the paste says who the user is (`id`, `groups`, or a `$` prompt
  on a node only root may open); `id` / `groups`: the user's uid and groups;
- the topology tools (`amd-smi topology`, `nvidia-smi topo -m`, `rocm-smi --showtopo`): the link of each GPU pair;
- any line: `export NAME=value`, `NAME=value command`: the variables rocmcheck records (ENV_NAMES / ENV_PREFIXES).

Besides the facts, a reader's finding that is evidence by itself though no single line says it is a sign
(rocmcheck/triage/signs.py): an nccl-tests run with no summary, a `docker run` that passes no GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from rocmcheck.checks.context import ParsedStore
from rocmcheck.facts.collect import PACKAGES, Facts, in_env_domain
from rocmcheck.facts.known import ALL
from rocmcheck.facts.parsers.links import Topology
from rocmcheck.facts.parsers.versions import is_rocm_torch, parse_torch_rocm_suffix, torch_version_of
from rocmcheck.facts.redact import redact_value
from rocmcheck.knowledge import all_archs, arch_of_product, base_gfx
from rocmcheck.result import CheckResult
from rocmcheck.runner import CommandResult
from rocmcheck.triage.readers._read import normalize_name
from rocmcheck.triage.readers.ds_report import is_ds_report_crash, parse_ds_report
from rocmcheck.triage.readers.paste import Block, Paste, split_paste
from rocmcheck.triage.readers.paste_read import read_block
from rocmcheck.triage.readers.shell import split_prompt, unmark
from rocmcheck.triage.readers.system_info import DeviceNode, parse_device_listing, parse_id
from rocmcheck.triage.signs import SIGNS
from rocmcheck.units import GIB, KIB, MIB

# A quoted line longer than this is cut (a one-line JSON dump); the cut is marked with QUOTE_CUT.
MAX_QUOTE_CHARS = 400
QUOTE_CUT = " …"
# Docker and podman give a container this /dev/shm unless --shm-size or --ipc=host says otherwise
# (https://docs.docker.com/reference/cli/docker/container/run/#shm-size: "If you omit the size entirely, the
# system uses 64m").
DOCKER_DEFAULT_SHM = 64 * MIB
# The kernel-log reader the doctor tries first; a pasted log stands for both (`commands["kernel-log-dmesg"]`).
KERNEL_LOG_KEYS = ("kernel-log-journalctl", "kernel-log-dmesg")
MAX_GPUS = 1024
MAX_SIGNS = 200
# A package listing this short is a fragment someone cut (`pip freeze | grep torch`), not everything installed: a
# package it does not list is not known. A full `pip list` of a Python environment with torch holds dozens.
MIN_WHOLE_PACKAGE_LIST = 15
MAX_DEVICE_NODES = 256
# A GPU reaches a container through one of these (docker run's options; `-v /dev/...` binds device nodes too).
NVIDIA_RUNTIMES = ("nvidia", "nvidia-container-runtime")
# The tool behind each commands key (its argv[0] in the doctor's record).
_TOOLS = {"rocm-smi-json": "rocm-smi", "amd-smi-static": "amd-smi", "amd-smi-version": "amd-smi",
          "nvidia-smi-health": "nvidia-smi", "nvidia-smi-query": "nvidia-smi", "kernel-log-dmesg": "dmesg",
          "kernel-log-journalctl": "journalctl"}


@dataclass(frozen=True)
class Quote:
    """One line of a paste as it was pasted (redacted): which paste, which line, its text."""

    source: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "text": self.text}


@dataclass
class PastedGpu:
    vendor: str | None  # "amd" | "nvidia" | None when the paste does not say
    name: str | None
    arch: str | None  # "gfx942", "sm_90"
    memory_bytes: int | None = None
    quote: Quote | None = None
    origin: str = ""  # the kind of block that named it
    index: int | None = None  # the index the tool printed for it ("GPU: 3", "GPU[3]"); None when none was printed
    partition: str | None = None  # compute partition ("SPX", "CPX") when the block shows it
    memory_partition: str | None = None  # "NPS1", "NPS4" when the block shows it
    compute_units: int | None = None  # amd-smi static's NUM_COMPUTE_UNITS


@dataclass
class PasteInput:
    """One paste: where it came from, its text (redacted), its lines and its blocks."""

    name: str
    text: str
    paste: Paste
    lines: list[str] = field(default_factory=list)

    def quote(self, block: Block, needle: str | None = None, pattern: re.Pattern[str] | None = None) -> Quote:
        """The pasted line of `block` that holds `needle` (or matches `pattern`); else the block's first line."""
        first, last = max(1, block.first_line), min(len(self.lines), max(block.last_line, block.first_line))
        for number in range(first, last + 1):
            text = self.lines[number - 1]
            if (needle and needle in text) or (pattern is not None and pattern.search(text)):
                return self.make_quote(number)
        for number in range(first, last + 1):
            if self.lines[number - 1].strip():
                return self.make_quote(number)
        return Quote(self.name, first, block.text.splitlines()[0][:MAX_QUOTE_CHARS] if block.text else "")

    def make_quote(self, number: int) -> Quote:
        text = self.lines[number - 1].strip()
        if len(text) > MAX_QUOTE_CHARS:
            text = text[:MAX_QUOTE_CHARS] + QUOTE_CUT
        return Quote(self.name, number, text)


@dataclass
class Pasted:
    """Every paste of one triage, and the partial Facts they add up to."""

    inputs: list[PasteInput]
    facts: Facts
    probe_known: dict[str, set[str]] = field(default_factory=dict)  # probe -> the keys of its answer pasted
    nested_known: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (probe, key) -> keys pasted
    where: dict[str, Quote] = field(default_factory=dict)  # "group/key" -> the line that shows it
    gpus: list[PastedGpu] = field(default_factory=list)
    recorded: list[CheckResult] = field(default_factory=list)  # verdicts a rocmcheck summary carries
    read: dict[int, Any] = field(default_factory=dict)  # id(block) -> what its reader made of it
    parsed: ParsedStore = field(default_factory=dict)  # the run's parsed tool outputs, shared with the checks
    rocm: Any = None  # a rocmcheck summary's ROCm install (a RocmLocation)
    container: bool | None = None  # a rocmcheck summary's word on running in a container
    signs: list[tuple[str, Quote]] = field(default_factory=list)  # (name of rocmcheck/triage/signs.py, its line)
    topologies: list[tuple[Quote, Topology]] = field(default_factory=list)  # the topology tools' matrices

    def blocks(self) -> list[tuple[PasteInput, Block]]:
        return [(inp, block) for inp in self.inputs for block in inp.paste]


def read_pastes(texts: list[tuple[str, str]]) -> Pasted:
    """(name, text) of each paste -> Pasted. The text is redacted first: no secret reaches a fact or a quote."""
    inputs = []
    for name, text in texts:
        clean = redact_value(text)
        inputs.append(PasteInput(name, clean, split_paste(clean), clean.split("\n")))
    builder = _Builder(Pasted(inputs, Facts(known={})))
    for inp in inputs:
        for block in inp.paste:
            builder.read(inp, block)
    return builder.finish()


class _Builder:
    def __init__(self, pasted: Pasted) -> None:
        self.p = pasted
        self.f = pasted.facts
        self.nodes: list[tuple[DeviceNode, Quote, bool | None]] = []  # `ls -l` lines: judged when all is read
        self.archs_of_names: dict[str | None, str | None] = {}  # _arch_of_name's answers in this run
        self.platform: tuple[str | None] | None = None  # (the platform's name,) once _platform decided it

    # ---- recording one fact ----------------------------------------------------------------------------------
    def fact(self, group: str, key: str, value: Any, quote: Quote | None) -> bool:
        """Set group[key] unless an earlier paste did; mark it known. False when an earlier one did."""
        known = self.f.known.get(group)
        if known == ALL or (isinstance(known, list) and key in known):
            return False
        getattr(self.f, group)[key] = value
        self.f.known.setdefault(group, []).append(key)  # type: ignore[union-attr]
        if quote is not None:
            self.p.where.setdefault(f"{group}/{key}", quote)
        return True

    def sign(self, name: str, quote: Quote) -> None:
        """A reader's finding that is evidence by itself (rocmcheck/triage/signs.py), with the line that shows it."""
        if name not in SIGNS:
            raise ValueError(f"{name} is not a sign of rocmcheck/triage/signs.py")
        if len(self.p.signs) < MAX_SIGNS and (name, quote) not in self.p.signs:
            self.p.signs.append((name, quote))

    def known_absent(self, group: str, keys: list[str]) -> None:
        """Keys a source looked at and did not find (a summary lists every variable set): known, absent."""
        known = self.f.known.setdefault(group, [])
        if isinstance(known, list):
            known.extend(k for k in keys if k not in known)

    def whole(self, group: str, values: dict[str, Any], quote: Quote | None) -> None:
        """A source that looked at every key of the group (pip list: every package rocmcheck looks at)."""
        if self.f.known.get(group) == ALL:
            return
        merged = {**values, **getattr(self.f, group)}  # what an earlier paste showed stays
        setattr(self.f, group, merged)
        self.f.known[group] = ALL
        if quote is not None:
            self.p.where.setdefault(f"{group}/*", quote)

    def probe(self, probe: str, key: str, value: Any, quote: Quote | None) -> None:
        answer = self.f.probes.setdefault(probe, {})
        if answer is None:  # an earlier paste (a rocmcheck summary) says the probe gave no answer
            return
        keys = self.p.probe_known.setdefault(probe, set())
        if key in keys:
            return
        answer[key] = value
        keys.add(key)
        known = self.f.known.setdefault("probes", [])
        if isinstance(known, list) and probe not in known:
            known.append(probe)
        if quote is not None:
            self.p.where.setdefault(f"probes/{probe}.{key}", quote)

    def imported(self, probe: str, quote: Quote | None) -> None:
        """The paste shows the package imported (collect_env, ds_report, a Python session ran it)."""
        for key, value in (("installed", True), ("error", None), ("import_error", None)):
            self.probe(probe, key, value, quote)

    def command(self, key: str, text: str, quote: Quote) -> None:
        """The tool's output as if the doctor had run it. A paste does not show the exit status: 0 lets the
        doctor's parsers judge the text (an error the tool printed is read from it)."""
        self.fact("commands", key, CommandResult(argv=[_TOOLS.get(key, key)], returncode=0, stdout=text), quote)

    def env(self, name: str, value: str, quote: Quote | None) -> None:
        if in_env_domain(name):
            self.fact("env", name, value, quote)

    def gpu(self, origin: str, vendor: str | None, name: str | None, arch: str | None, quote: Quote | None,
            memory: int | None = None, **shown: Any) -> None:
        """A GPU a block names; `origin` is the block's kind (the context takes the GPUs of the best one); `shown`:
        what else the block prints of it (PastedGpu's index, partition, memory_partition, compute_units)."""
        if not arch and name not in self.archs_of_names:  # every product of every arch is tried: once per name
            self.archs_of_names[name] = _arch_of_name(name)
        arch = base_gfx(arch) if arch else self.archs_of_names[name]
        vendor = vendor or _vendor_of(name, arch)
        if len(self.p.gpus) < MAX_GPUS:
            self.p.gpus.append(PastedGpu(vendor, name, arch, memory, quote, origin, **shown))

    # ---- one block ---------------------------------------------------------------------------------------------
    def read(self, inp: PasteInput, block: Block) -> None:
        self._env_lines(inp, block)
        self._shell_outputs(inp, block)
        result = read_block(block, self.p.parsed)
        if result is None:
            return
        self.p.read[id(block)] = result
        reader = _READERS.get(block.kind)
        if block.kind == "traceback" and is_ds_report_crash(block.text):  # ds_report's crash importing deepspeed
            reader, result = _Builder.ds_report, parse_ds_report(block.text)
        if reader is None:
            return
        try:
            reader(self, inp, block, result)
        except Exception:  # noqa: BLE001 - one odd block must not lose the rest of the paste
            return

    def finish(self) -> Pasted:
        self._device_nodes()
        self._cuda_library_major()
        self._gpu_newer_than_toolkit()
        self._amd_arch_not_supported()
        self._line_sign("wsl.kernel_too_old", _wsl_kernel_line)
        self._line_sign("nvidia_smi.idle_memory_held", _idle_memory_line)
        self._line_sign("gpu_index.beyond_visible", _device_index_line)
        self._line_sign("build.cuda_path_under_rocm", _cuda_build_line)
        self._line_sign("nvidia_driver.older_than_cuda", _driver_older_line)
        self._other_vendor_library()
        self._package_without_build()
        return self.p

    def _platform(self, lines: list[str]) -> str | None:
        """The platform the pastes show, decided as match.py decides it (torch's build as read included), once."""
        if self.platform is None:
            from rocmcheck.triage.platform import decide

            torch = self.p.facts.probes.get("torch") or {}
            self.platform = (decide(lines, torch.get("hip"), torch.get("cuda")).name,)
        return self.platform[0]

    def _package_without_build(self) -> None:
        """A package with no build for the Windows or macOS machine the pastes show, named failing (a sign)."""
        from rocmcheck.triage.system_shapes import package_without_build

        lines = [line for inp in self.p.inputs for line in inp.lines]
        found = package_without_build(lines, self._platform(lines))
        if found is not None:
            self._line_sign("package.no_build_for_os", lambda lines: next((x for x in lines if x.strip() == found.line),
                                                                          None))
            return
        self._os_refusal(lines)

    def _os_refusal(self, lines: list[str]) -> None:
        """A package saying it does not run on this system (a sign), where the pastes do not show a Linux machine."""
        from rocmcheck.triage.platform import shows_linux
        from rocmcheck.triage.system_shapes import os_refusal

        if self._platform(lines) in ("rocm-linux", "cuda-linux", "wsl", "cpu") or shows_linux(lines):
            return
        found = os_refusal(lines)
        if found is not None:
            self._line_sign("package.refuses_os", lambda lines: next((x for x in lines if x.strip() == found.line),
                                                                     None))

    def _other_vendor_library(self) -> None:
        """A missing library of the other GPU vendor's stack than the platform the pastes show (a sign). Decided only
        where a library is missing."""
        from rocmcheck.triage.shapes import missing_libraries, other_vendor_library

        lines = [line for inp in self.p.inputs for line in inp.lines]
        libraries = missing_libraries(lines)
        if not libraries:
            return
        lib = next((lib for lib in libraries if other_vendor_library(lib, self._platform(lines))), None)
        if lib is not None:
            self._line_sign("library.other_vendor", lambda lines: next((x for x in lines if lib in x), None))

    def _line_sign(self, name: str, find: Callable[[list[str]], str | None]) -> None:
        """The sign `name` where `find`, given every pasted line, returns the line that shows it."""
        found = find([line for inp in self.p.inputs for line in inp.lines])
        if found is None:
            return
        for inp in self.p.inputs:
            for number, line in enumerate(inp.lines, 1):
                if line == found:
                    self.sign(name, inp.make_quote(number))
                    return

    def _amd_arch_not_supported(self) -> None:
        """The machine's AMD GPU arch, named, that no ROCm release ships code for (a sign)."""
        from rocmcheck.triage.shapes import amd_arch_not_supported

        found = amd_arch_not_supported(line for inp in self.p.inputs for line in inp.lines)
        if found is None:
            return
        for inp in self.p.inputs:
            for number, line in enumerate(inp.lines, 1):
                if line == found[1]:
                    self.sign("amd_gpu.arch_not_supported", inp.make_quote(number))
                    return

    def _gpu_newer_than_toolkit(self) -> None:
        """An NVIDIA GPU named, and every CUDA toolkit shown older than its arch's first one (a sign)."""
        from rocmcheck.triage.shapes import gpu_newer_than_toolkit

        lines = [line for inp in self.p.inputs for line in inp.lines]
        found = gpu_newer_than_toolkit(lines)
        if found is None:
            return
        for inp in self.p.inputs:
            for number, line in enumerate(inp.lines, 1):
                if found[0] in line:
                    self.sign("nvidia_gpu.newer_than_toolkit", inp.make_quote(number))
                    return

    def _cuda_library_major(self) -> None:
        """A missing CUDA runtime library of another CUDA major than every CUDA the pastes show (a sign)."""
        from rocmcheck.triage.shapes import library_for_other_cuda

        lines = [line for inp in self.p.inputs for line in inp.lines]
        found = library_for_other_cuda(lines)
        if found is None:
            return
        for inp in self.p.inputs:
            for number, line in enumerate(inp.lines, 1):
                if found[0] in line:
                    self.sign("cuda_library.other_major", inp.make_quote(number))
                    return

    # ---- readers ------------------------------------------------------------------------------------------------
    def collect_env(self, inp: PasteInput, block: Block, ce: Any) -> None:
        q = inp.quote
        if ce.torch_version:
            self.imported("torch", q(block, "PyTorch version"))
            self.probe("torch", "version", ce.torch_version, q(block, "PyTorch version"))
        if ce.debug_build is not None:
            self.probe("torch", "debug", ce.debug_build, q(block, "Is debug build"))
        if "ROCM used to build PyTorch" in ce.fields:
            self.probe("torch", "hip", ce.rocm_build, q(block, "ROCM used to build PyTorch"))
        if "CUDA used to build PyTorch" in ce.fields:
            self.probe("torch", "cuda", ce.cuda_build, q(block, "CUDA used to build PyTorch"))
        if ce.cuda_available is not None:
            self.probe("torch", "cuda_available", ce.cuda_available, q(block, "Is CUDA available"))
        self._torch_label(ce.torch_version, q(block, "PyTorch version"))
        if ce.python_version:
            self.fact("platform", "python", ce.python_version, q(block, "Python version"))
        if ce.python_platform:
            self._python_platform(ce.python_platform, q(block, "Python platform"))
        if ce.os:
            self._os_name(ce.os, q(block, "OS:"))
        self._packages({**ce.conda_packages, **ce.pip_packages}, inp, block)
        for text in ce.gpus:
            m = _GFX_IN.search(text)
            self.gpu(block.kind, None, _GPU_NAME.sub("", text).strip() or None, m.group(0) if m else None,
                     q(block, text))

    def ds_report(self, inp: PasteInput, block: Block, r: Any) -> None:
        q = inp.quote
        if r.import_failed:  # no report was printed: deepspeed is there and fails to import, and nothing else is shown
            self.probe("deepspeed", "installed", True, inp.quote(block))
            self.probe("deepspeed", "import_error", r.import_error or "ds_report crashed importing deepspeed "
                       "(the traceback's last line is not in the paste)", inp.quote(block))
            if r.import_failed_in == "torch" and r.import_error:  # deepspeed's `import torch` is what raised
                self.probe("torch", "import_error", r.import_error, inp.quote(block))
            return
        self.imported("deepspeed", q(block, "deepspeed info") if r.deepspeed_info else inp.quote(block))
        if r.deepspeed_version:
            self.probe("deepspeed", "version", r.deepspeed_version, q(block, "deepspeed info"))
            self.fact("packages", "deepspeed", r.deepspeed_version, q(block, "deepspeed info"))
        if r.accelerator:
            self.probe("deepspeed", "accelerator", r.accelerator, q(block, "ds_accelerator"))
        if r.ops:
            ops = {name: {"known": True, "compatible": op.compatible, "installed": op.installed}
                   for name, op in r.ops.items()}
            self.probe("deepspeed", "ops", ops, q(block, "op name"))
            if "environment" not in r.sections:  # the table was cut: an op not in it is not known
                self.p.nested_known[("deepspeed", "ops")] = set(ops)
        if r.ninja_ok is not None:
            self.probe("deepspeed", "jit", {"ninja": r.ninja_ok}, q(block, "ninja"))
            self.p.nested_known[("deepspeed", "jit")] = {"ninja"}
        if r.compiled_with.get("torch"):
            self.probe("deepspeed", "torch_info", {"version": r.compiled_with["torch"]},
                       q(block, "deepspeed wheel compiled w."))
            self.p.nested_known[("deepspeed", "torch_info")] = {"version"}
        if r.torch_version:
            self.imported("torch", q(block, "torch version"))
            self.probe("torch", "version", r.torch_version, q(block, "torch version"))
            self.fact("packages", "torch", r.torch_version, q(block, "torch version"))
        if "torch hip version" in r.env:
            self.probe("torch", "hip", r.torch_hip_version, q(block, "torch hip version"))
        if "torch cuda version" in r.env:
            self.probe("torch", "cuda", r.torch_cuda_version, q(block, "torch cuda version"))
        if r.shm_size_bytes is not None:
            self.fact("limits", "shm_bytes", r.shm_size_bytes, q(block, "/dev/shm"))

    def package_list(self, inp: PasteInput, block: Block, pk: Any) -> None:
        if not pk.versions:
            return
        versions = {name: _version_of(pk.versions, name) for name in PACKAGES}
        if len(pk.versions) >= MIN_WHOLE_PACKAGE_LIST:
            self.whole("packages", versions, inp.quote(block))
        else:
            for name, version in versions.items():
                if version:
                    self.fact("packages", name, version, inp.quote(block, pattern=_package_line(name)))
        for name, version in versions.items():
            if version:
                self.p.where.setdefault(f"packages/{name}", inp.quote(block, pattern=_package_line(name)))

    def env_report(self, inp: PasteInput, block: Block, er: Any) -> None:
        q = inp.quote
        if er.torch_version:
            self.imported("torch", q(block, er.torch_version))
            self.probe("torch", "version", er.torch_version, q(block, er.torch_version))
            self._torch_label(er.torch_version, q(block, er.torch_version))
        if er.torch_gpu is not None:
            self.probe("torch", "cuda_available", er.torch_gpu, q(block, er.torch_version or "PyTorch"))
        if er.python_version:
            self.fact("platform", "python", er.python_version, q(block, "Python version"))
        if er.platform:
            self._python_platform(er.platform, q(block, "Platform"))
        self._packages(er.versions, inp, block)
        if er.gpu_type:
            self.gpu(block.kind, None, er.gpu_type, None, q(block, er.gpu_type))

    def rocminfo(self, inp: PasteInput, block: Block, report: Any) -> None:
        # rocminfo's own output: agents with their names, or one of its errors. Lines from the middle of an agent
        # (an agent with no name) or through grep are a fragment: the GPU archs they name, nothing more.
        whole = (not report.fragment and any(a.name and a.device_type for a in report.agents)) or \
            bool(report.error and report.error_kind != "other")
        if not whole:  # pasted from the middle of an agent, or through grep: its GPU lines only
            for arch in dict.fromkeys(_GFX_NAME.findall(block.text)):
                self.gpu(block.kind, "amd", None, arch, inp.quote(block, arch))
            return
        needle = report.error or (report.gpus[0].name if report.gpus else None)
        self.command("rocminfo", block.text, inp.quote(block, needle))

    def rocm_smi(self, inp: PasteInput, block: Block, report: Any) -> None:
        if self._topology(inp, block, report):
            return
        key = "rocm-smi-json" if block.text.lstrip().startswith("{") else "rocm-smi"
        if report.gpus or report.error:
            self.command(key, block.text, inp.quote(block, report.error))
            self._smi_gpus(inp, block, report)

    def amd_smi(self, inp: PasteInput, block: Block, report: Any) -> None:
        if self._topology(inp, block, report):
            return
        text = block.text
        if text.lstrip().startswith(("{", "[")):
            self.command("amd-smi-static", text, inp.quote(block))
        elif "AMDSMI Tool" in text or "ROCm version" in text:
            self.command("amd-smi-version", text, inp.quote(block, "AMDSMI Tool"))
        self._smi_gpus(inp, block, report)

    def nvidia_smi(self, inp: PasteInput, block: Block, report: Any) -> None:
        if self._topology(inp, block, report):
            return
        text = block.text
        if "NVSMI LOG" in text:
            self.command("nvidia-smi-health", text, inp.quote(block, "NVSMI LOG"))
        elif "NVIDIA-SMI" in text or "|" in text or (report.error and not report.gpus):
            # The table, or nvidia-smi's own failure ("Failed to initialize NVML: ...") with no table after it.
            self.command("nvidia-smi", text, inp.quote(block, report.error or "NVIDIA-SMI"))
        else:
            self._smi_gpus(inp, block, report, "nvidia")

    def hipconfig(self, inp: PasteInput, block: Block, hc: Any) -> None:
        self.command("hipconfig", block.text, inp.quote(block, "HIP version"))

    def kernel_log(self, inp: PasteInput, block: Block, findings: Any) -> None:
        self.fact("commands", KERNEL_LOG_KEYS[0], None, None)  # a pasted log stands for both readers
        self.command(KERNEL_LOG_KEYS[1], block.text, inp.quote(block))

    def uname(self, inp: PasteInput, block: Block, u: Any) -> None:
        q = inp.quote(block, u.release)
        if u.release:
            self.fact("platform", "kernel", u.release, q)
        if u.kernel:
            self.fact("platform", "system", u.kernel, q)
        if u.machine:
            self.fact("platform", "machine", u.machine, q)

    def os_release(self, inp: PasteInput, block: Block, o: Any) -> None:
        q = inp.quote(block, "PRETTY_NAME") if o.pretty_name else inp.quote(block)
        self._os(o.id, o.version_id, o.pretty_name or o.name, o.version_codename, " ".join(o.id_like), q)

    def lsb_release(self, inp: PasteInput, block: Block, lsb: Any) -> None:
        self._os((lsb.distributor_id or "").lower() or None, lsb.release, lsb.description, lsb.codename, None,
                 inp.quote(block, "Description"))

    def docker_run(self, inp: PasteInput, block: Block, d: Any) -> None:
        if not d.found:
            return
        q = inp.quote(block, pattern=_DOCKER_RUN)
        if not _passes_a_gpu(d):
            self.sign("docker_run.no_gpu", q)
        marker = "/run/.containerenv" if d.runtime == "podman" else "/.dockerenv"
        self.fact("present", marker, True, q)
        kfd = d.privileged or any(dev.split(":", 1)[0] == "/dev/kfd" for dev in d.devices)
        self.fact("devices", "/dev/kfd", {"exists": kfd}, inp.quote(block, "/dev/kfd") if kfd else q)
        self.p.nested_known[("devices", "/dev/kfd")] = {"exists"}
        if d.shm_size:
            size = _bytes_of(d.shm_size)
            if size is not None:
                self.fact("limits", "shm_bytes", size, inp.quote(block, "shm-size"))
        elif d.ipc != "host":
            self.fact("limits", "shm_bytes", DOCKER_DEFAULT_SHM, q)
        for name, value in d.env.items():
            if value:
                self.env(name, value, inp.quote(block, name))
        if d.user is not None:
            uid = 0 if d.user.split(":", 1)[0] in ("0", "root") else _int(d.user.split(":", 1)[0])
            if uid is not None:
                self.fact("user", "uid", uid, inp.quote(block, "--user") if "--user" in block.text else q)

    def python_session(self, inp: PasteInput, block: Block, s: Any) -> None:
        q = inp.quote
        if s.torch_version:
            self.imported("torch", q(block, s.torch_version))
            self.probe("torch", "version", s.torch_version, q(block, s.torch_version))
            self._torch_label(s.torch_version, q(block, s.torch_version))
        if s.cuda_available is not None:
            self.probe("torch", "cuda_available", s.cuda_available, q(block, "is_available"))
        if s.device_count is not None:
            self.probe("torch", "device_count", s.device_count, q(block, "device_count"))
        if s.hip_printed:
            self.probe("torch", "hip", s.hip_version, q(block, "version.hip"))
        if s.cuda_printed:
            self.probe("torch", "cuda", s.cuda_version, q(block, "version.cuda"))
        if any("get_arch_list" in expr for run in s.runs for expr in run.values):
            self.probe("torch", "arch_list", list(s.arch_list), q(block, "get_arch_list"))
        if s.device_names or s.gcn_arch:
            names = s.device_names or [None]
            self.probe("torch", "devices", [{"name": n, "gcn_arch": s.gcn_arch} for n in names],
                       q(block, s.gcn_arch or names[0]))
            for n in names:
                self.gpu(block.kind, None, n, s.gcn_arch, q(block, s.gcn_arch or n))
        if s.python_version:
            self.fact("platform", "python", s.python_version, q(block, s.python_version))
        failing = [run for run in s.runs if run.exception is not None and run.env]
        chosen = failing[0] if failing else next((run for run in s.runs if run.env), None)
        if chosen is not None:
            for name, value in chosen.env.items():
                self.env(name, value, q(block, f"{name}={value}"))

    def nccl_tests(self, inp: PasteInput, block: Block, tests: Any) -> None:
        """A run that printed its devices or its table and then neither its summary nor an error stopped inside a
        collective (or the paste stops there): the last line shown is where."""
        if tests.found and not tests.complete and not tests.errors and (tests.devices or tests.rows
                                                                         or tests.threads is not None):
            last = next((n for n in range(min(len(inp.lines), block.last_line), block.first_line - 1, -1)
                         if inp.lines[n - 1].strip() and not inp.lines[n - 1].strip().startswith("`")), None)
            if last is not None:
                self.sign("nccl_tests.unfinished", inp.make_quote(last))

    def nccl_log(self, inp: PasteInput, block: Block, log: Any) -> None:
        for name, value in log.env.items():
            if not value.startswith("ignored"):
                self.env(name, value, inp.quote(block, name))

    def summary(self, inp: PasteInput, block: Block, s: Any) -> None:
        from rocmcheck.triage.summary import facts_of_summary

        facts_of_summary(self, inp, block, s)

    # ---- helpers --------------------------------------------------------------------------------------------
    def _torch_label(self, version: str | None, quote: Quote) -> None:
        """The build a torch version's local label names: +rocm6.2 (a ROCm build), +cu121 (CUDA), +cpu."""
        label = (version or "").partition("+")[2].lower()
        rocm = parse_torch_rocm_suffix(version)
        if rocm:
            self.probe("torch", "hip", rocm, quote)
            self.probe("torch", "cuda", None, quote)
        elif label.startswith("cu") and label[2:].isdigit() and len(label) >= 5:
            self.probe("torch", "cuda", f"{label[2:-1]}.{label[-1]}", quote)
            self.probe("torch", "hip", None, quote)
        elif label == "cpu":
            self.probe("torch", "cuda", None, quote)
            self.probe("torch", "hip", None, quote)
        elif is_rocm_torch(version):  # TheRock's "+rocmsdk20260116": a ROCm build whose label names no ROCm version
            self.probe("torch", "cuda", None, quote)

    def _python_platform(self, text: str, quote: Quote) -> None:
        """"Linux-5.15.0-84-generic-x86_64-with-glibc2.35" -> system, kernel, machine."""
        m = _PLATFORM.match(text.strip())
        if m:
            self.fact("platform", "system", m.group(1), quote)
            self.fact("platform", "kernel", m.group(2), quote)
            self.fact("platform", "machine", m.group(3), quote)

    def _os_name(self, text: str, quote: Quote) -> None:
        """collect_env's "OS: Ubuntu 22.04.3 LTS (x86_64)" -> id, version, name (the distributions ROCm lists)."""
        name = re.sub(r"\s*\((?:x86_64|aarch64|arm64|ppc64le|s390x)\)\s*$", "", text.strip())
        low = name.lower()
        dist = next((i for words, i in _DISTRO_NAMES if low.startswith(words)), None)
        m = re.search(r"\b(\d+(?:\.\d+)*)\b", name)
        if dist is None:
            if low.startswith(("microsoft windows", "macos", "mac osx", "mac os x")):
                self.fact("platform", "system", "Windows" if low.startswith("microsoft") else "Darwin", quote)
            return
        self.fact("platform", "system", "Linux", quote)
        self._os(dist, m.group(1) if m else None, name, None, None, quote)

    def _os(self, dist: str | None, version: str | None, name: str | None, codename: str | None,
            like: str | None, quote: Quote) -> None:
        if dist:
            self.fact("os_info", "id", dist, quote)
        if version:
            self.fact("os_info", "version", version, quote)
        if name:
            self.fact("os_info", "name", name, quote)
        if codename:
            self.fact("os_info", "codename", codename, quote)
        if like:
            self.fact("os_info", "like", like, quote)
        if dist:
            self.fact("platform", "system", "Linux", quote)

    def _packages(self, versions: dict[str, str], inp: PasteInput, block: Block) -> None:
        for name in PACKAGES:
            version = _version_of(versions, name)
            if version:
                self.fact("packages", name, version, inp.quote(block, pattern=_package_line(name)))

    def _smi_gpus(self, inp: PasteInput, block: Block, report: Any, vendor: str | None = None) -> None:
        for g in report.gpus:
            name = g.product_name
            self.gpu(block.kind, vendor or ("amd" if g.gfx else None), name, g.gfx, inp.quote(block, name or g.gfx),
                     g.vram_total_bytes, index=g.index, partition=g.partition, memory_partition=g.memory_partition,
                     compute_units=g.compute_units)

    def _topology(self, inp: PasteInput, block: Block, result: Any) -> bool:
        """A topology tool's matrix (the smi tools print it): kept with its first line; True when it is one."""
        if not isinstance(result, Topology):
            return False
        if result.gpus and len(self.p.topologies) < MAX_SIGNS:
            self.p.topologies.append((inp.quote(block), result))
        return True

    def _shell_outputs(self, inp: PasteInput, block: Block) -> None:
        """`id` / `groups` and `ls -l` of the GPU device nodes, in any block that is not a tool's own output: what
        triage asks people to paste (the asks of devices.kfd, container.flags, torch.sees_gpus)."""
        if block.kind in _TOOL_OUTPUTS:
            return
        ids = parse_id(block.text, block.command)
        if ids.found:
            q = inp.quote(block, ids.line)
            if ids.uid is not None:
                self.fact("user", "uid", ids.uid, q)
            if ids.user:
                self.fact("user", "name", ids.user, q)
            if ids.groups is not None:
                self.fact("user", "groups", sorted(set(ids.groups)), q)
        nodes = parse_device_listing(block.text)
        if nodes:
            root = _prompt_is_root(inp, block)
            for node in nodes:
                if len(self.nodes) < MAX_DEVICE_NODES:
                    self.nodes.append((node, inp.quote(block, node.line), root))

    def _device_nodes(self) -> None:
        """Each listed device node: it exists, its mode and group; read-write for this user when the pastes say who
        the user is (every block read first: `id` often comes after the listing it explains)."""
        user = self.f.user
        known_user = self.f.known.get("user")
        shown = set(known_user) if isinstance(known_user, list) else set()
        for node, quote, root in self.nodes:
            record: dict[str, Any] = {"exists": True, "mode": node.mode, "group": node.group}
            ok = node.access(user=user.get("name") if "name" in shown else None,
                             uid=user.get("uid") if "uid" in shown else None,
                             groups=user.get("groups") if "groups" in shown else None, root=root)
            if ok is not None:
                record["readable"] = record["writable"] = ok
            if self.fact("devices", node.path, record, quote):
                self.p.nested_known[("devices", node.path)] = set(record)
            if ok is False and (node.path == "/dev/kfd" or node.path.startswith("/dev/dri/renderD")):
                self.sign("devices.no_access", quote)

    def _env_lines(self, inp: PasteInput, block: Block) -> None:
        """`export NAME=value` anywhere; `NAME=value` words before a command, or a line of assignments."""
        if block.kind in ("rocminfo", "rocm_smi", "amd_smi", "nvidia_smi", "os_release", "kernel_log", "pip_list",
                          "pip_freeze", "conda_list", "ds_report", "collect_env"):
            return
        for line in block.text.splitlines()[:_MAX_ENV_LINES]:
            if "=" not in line:
                continue
            for m in _EXPORT.finditer(line):
                self.env(m.group(1), _unquote(m.group(2)), inp.quote(block, m.group(0).strip()))
            for segment in re.split(r";|&&|\|\|", _INLINE_CODE.sub(r"\1", line)):
                m = _PREFIX_ASSIGNMENTS.match(segment)
                if m:
                    for a in _ASSIGNMENT.finditer(m.group(1)):
                        self.env(a.group(1), _unquote(a.group(2)), inp.quote(block, a.group(0).strip()))


_READERS: dict[str, Callable[[_Builder, PasteInput, Block, Any], None]] = {
    "collect_env": _Builder.collect_env,
    "ds_report": _Builder.ds_report,
    "pip_list": _Builder.package_list,
    "pip_freeze": _Builder.package_list,
    "conda_list": _Builder.package_list,
    "accelerate_env": _Builder.env_report,
    "transformers_env": _Builder.env_report,
    "llamafactory_env": _Builder.env_report,
    "rocminfo": _Builder.rocminfo,
    "rocm_smi": _Builder.rocm_smi,
    "amd_smi": _Builder.amd_smi,
    "nvidia_smi": _Builder.nvidia_smi,
    "hipconfig": _Builder.hipconfig,
    "kernel_log": _Builder.kernel_log,
    "uname": _Builder.uname,
    "os_release": _Builder.os_release,
    "lsb_release": _Builder.lsb_release,
    "docker_run": _Builder.docker_run,
    "python_session": _Builder.python_session,
    "nccl_log": _Builder.nccl_log,
    "nccl_tests": _Builder.nccl_tests,
    "rocmcheck_summary": _Builder.summary,
}

# Blocks that are a tool's own output: no `id` or `ls -l` line is read in them.
_TOOL_OUTPUTS = ("rocminfo", "rocm_smi", "amd_smi", "nvidia_smi", "hipconfig", "collect_env", "ds_report", "pip_list",
                 "pip_freeze", "conda_list", "os_release", "kernel_log", "nccl_log", "nccl_tests", "hip_log",
                 "rocmcheck_summary")
_MAX_ENV_LINES = 20_000
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s;`'\"&|]*)"
_EXPORT = re.compile(rf"(?:^|(?<=[\s;`(]))export\s+({_NAME})={_VALUE}")
_ASSIGNMENT = re.compile(rf"({_NAME})={_VALUE}")
# A segment that starts with assignments: `A=1 B=2 python x.py`, or assignments alone.
_PREFIX_ASSIGNMENTS = re.compile(rf"^\s*(?:\S*[$#>]\s+)?((?:{_NAME}={_VALUE}\s*)+)(?:$|\S)")
_INLINE_CODE = re.compile(r"`([^`\n]*)`")
_GFX_IN = re.compile(r"gfx[0-9a-f]{3,4}", re.IGNORECASE)
_GFX_NAME = re.compile(r"\bgfx[0-9a-f]{3,4}\b")
_GPU_NAME = re.compile(r"^GPU \d+:\s*|\s*\(gfx[^)]*\)\s*$")
_PLATFORM = re.compile(r"^(Linux)-(\d+\.\d+[\w.+~-]*?)-(x86_64|aarch64|arm64|ppc64le|s390x|riscv64)(?:-|$)")
_DOCKER_RUN = re.compile(r"(?:docker|podman)\s+(?:container\s+)?run\b")
_DISTRO_NAMES = (("ubuntu", "ubuntu"), ("debian", "debian"), ("red hat enterprise linux", "rhel"),
                 ("rhel", "rhel"), ("centos", "centos"), ("rocky", "rocky"), ("almalinux", "almalinux"),
                 ("oracle linux", "ol"), ("fedora", "fedora"), ("opensuse", "opensuse-leap"),
                 ("sles", "sles"), ("suse linux enterprise", "sles"), ("arch linux", "arch"),
                 ("linux mint", "linuxmint"))
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": 1024 * GIB}


def _passes_a_gpu(d: Any) -> bool:
    """The `docker run` gives the container a GPU some way: a --device, --gpus, an NVIDIA runtime (or
    nvidia-docker, or NVIDIA_VISIBLE_DEVICES for a daemon whose default runtime is NVIDIA's), --privileged, or a
    bind of /dev or a node under it."""
    runtime = (d.runtime_option or "").lower()
    return bool(d.devices or d.gpus or d.privileged or d.runtime == "nvidia-docker" or runtime in NVIDIA_RUNTIMES
                or "NVIDIA_VISIBLE_DEVICES" in d.env
                or any(v.split(":", 1)[0].rstrip("/") == "/dev" or v.startswith("/dev/") for v in d.volumes))


def _prompt_is_root(inp: PasteInput, block: Block) -> bool | None:
    """Whether the shell that printed the block was root's, by the prompt of its command line (`# ` root, `$ `
    any other user, by the shells' default prompts); None when the paste shows no prompt for it."""
    if not block.command:
        return None
    for number in range(block.first_line - 1, max(0, block.first_line - 4), -1):
        split = split_prompt(unmark(inp.lines[number - 1])) if number <= len(inp.lines) else None
        if split is not None and split[1].strip() == block.command.strip():
            prompt = split[0].rstrip()
            return True if prompt.endswith("#") else False if prompt.endswith("$") else None
    return None


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) < 12 else None


def _bytes_of(text: str) -> int | None:
    """Docker's --shm-size: "16G", "8g", "1024m", a number of bytes."""
    m = _SIZE.match(text.strip().strip("\"'"))
    if not m or len(m.group(1)) > 15:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _version_of(versions: dict[str, str], name: str) -> str | None:
    """A package's version in a listing; torch's also from TheRock's device wheels ("amd-torch-device-gfx942")."""
    found = versions.get(normalize_name(name)) or versions.get(name)
    return found or (torch_version_of(versions) if normalize_name(name) == "torch" else None)


def _package_line(name: str) -> re.Pattern[str]:
    spelled = re.escape(normalize_name(name)).replace("\\-", "[-_.]")
    return re.compile(rf"(?i)(?:^|[\s\[\]`|])(?:\[\w+\]\s+)?{spelled}(?:[\s=<>~@,:]|$)")


def _vendor_of(name: str | None, arch: str | None) -> str | None:
    if arch:
        return "amd" if arch.startswith("gfx") else "nvidia" if arch.startswith("sm_") else None
    low = (name or "").lower()
    if any(w in low for w in ("nvidia", "geforce", "tesla", "quadro")):
        return "nvidia"
    if any(w in low for w in ("amd", "radeon", "instinct")):
        return "amd"
    return None


def _arch_of_name(name: str | None) -> str | None:
    """The arch whose product list names this GPU, when exactly one does ("AMD Instinct MI300X" -> gfx942)."""
    if not name:
        return None
    found = arch_of_product(name)
    if found:
        return found
    matches = {a.name for a in all_archs().values() if a.match_product(name)}
    return matches.pop() if len(matches) == 1 else None


def _wsl_kernel_line(lines: list[str]) -> str | None:
    from rocmcheck.triage.shapes import wsl_kernel_too_old

    found = wsl_kernel_too_old(lines)
    return found[1] if found else None


def _driver_older_line(lines: list[str]) -> str | None:
    """The line that shows the driver, where the pastes show it older than the CUDA they show is needed."""
    from rocmcheck.triage.versions import driver_and_cuda

    found = driver_and_cuda(lines)
    if not found.too_old:
        return None
    shown = found.shown or found.driver_cuda or ""
    return next((line for line in lines if shown and shown in line), None)


def _idle_memory_line(lines: list[str]) -> str | None:
    from rocmcheck.triage.shapes import idle_gpu_memory_held

    return idle_gpu_memory_held(lines)


def _device_index_line(lines: list[str]) -> str | None:
    from rocmcheck.triage.shapes import device_index_beyond_visible

    found = device_index_beyond_visible(lines)
    return found.line if found else None


def _cuda_build_line(lines: list[str]) -> str | None:
    from rocmcheck.triage.shapes import cuda_build_under_rocm_torch

    return cuda_build_under_rocm_torch(lines)
