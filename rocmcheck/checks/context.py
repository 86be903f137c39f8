"""What the checks see: the Facts, read through accessors that know what was collected (rocmcheck/facts/known.py),
plus views derived once (parsed tool outputs, the GPU list, the vendor, container detection).

Unknown is not absent: an accessor returns the value (None = absent) of a fact that is known, and raises
NotKnown(what) for one that is not; run_checks turns that into a skip naming the fact. A view that combines
several facts raises NotKnown only when none of its sources is known.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from rocmcheck.facts.collect import Facts, in_env_domain
from rocmcheck.facts.known import NOT_KNOWN_PHRASE, NotCollected, NotKnown, describe, knows, knows_all
from rocmcheck.facts.parsers.models import HipConfig, RocminfoReport, SmiGpu, SmiReport
from rocmcheck.facts.rocm_location import RocmLocation
from rocmcheck.facts.rocm_roots import ROOT_VARIABLES
from rocmcheck.knowledge import Arch, Product, arch_info, base_gfx, cuda_arch_from_capability
from rocmcheck.knowledge.site import SiteRules
from rocmcheck.result import CheckResult
from rocmcheck.runner import CommandResult

CONTAINER_CGROUP_MARKERS = ("docker", "kubepods", "containerd", "libpod", "lxc", "podman")
# The facts that must be known before "no GPU here" (vendor "none") may be said: the driver modules and /dev/kfd
# (with the GPU tools' outputs, which amd_gpus and nvidia_gpus need).
NONE_NEEDS = (("present", "/sys/module/amdgpu"), ("present", "/sys/module/nvidia"), ("devices", "/dev/kfd"))
VENDOR_WHAT = "which GPUs this machine has (no GPU tool output, device node or driver module known)"

T = TypeVar("T")


# Parsed tool outputs, keyed by (parser or name, text): a context's own store, or one a caller shares between the
# contexts of one run over the same facts (triage judges each check in a context of its own, so that each verdict's
# reads are its own; without a shared store a big rocminfo was parsed once per check that reads it). The views these
# parses make are read, never changed, by the checks. The store lives as long as the contexts that hold it.
ParsedStore = dict[tuple[Any, str], Any]


class known_view:  # noqa: N801 - used like cached_property
    """A cached_property whose NotKnown is cached too: a view is computed once, known or not."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        cache = obj.__dict__.setdefault("_views", {})
        if self.name not in cache:
            try:
                cache[self.name] = (True, self.func(obj))
            except NotKnown as exc:
                cache[self.name] = (False, exc.what)
        ok, value = cache[self.name]
        if ok:
            return value
        raise NotKnown(value)


def known_or_none(read: Callable[[], T]) -> T | None:
    """The value, or None when it is not known: for evidence and enrichments that no verdict rests on."""
    try:
        return read()
    except NotKnown:
        return None


@dataclass
class GpuView:
    """One GPU as rocmcheck understands it, whatever tool reported it."""

    vendor: str  # "amd" | "nvidia"
    index: int
    arch: str | None  # "gfx942" | "sm_90"
    name: str | None  # marketing / product name
    memory_bytes: int | None = None
    source: str = ""
    arch_entry: Arch | None = None
    product: Product | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckContext:
    facts: Facts
    expected_archs: tuple[str, ...] = ()
    site_rules: SiteRules | None = None  # the site's own rules (doctor --knowledge, knowledge/site.py)
    # How a skip names a fact that is not known: "not known: /dev/shm size"; triage sets "not in the paste".
    unknown_phrase: str = NOT_KNOWN_PHRASE
    parsed: ParsedStore = field(default_factory=dict, repr=False)  # see ParsedStore

    def parse_once(self, parse: Callable[[str], T], text: str, key: Any = None) -> T:
        """parse(text), computed once per store (`key` names the parser where `parse` is made anew each time)."""
        slot = (parse if key is None else key, text)
        if slot not in self.parsed:
            self.parsed[slot] = parse(text)
        return self.parsed[slot]

    # ---- the facts, as known ---------------------------------------------------------------------------------
    def knows(self, group: str, key: str | None = None) -> bool:
        return knows(self.facts.known, group, key)

    def _get(self, group: str, key: str) -> Any:
        if not self.knows(group, key):
            raise NotKnown(describe(group, key))
        return getattr(self.facts, group).get(key)

    def group(self, group: str) -> Any:
        """A whole group, when every key of it is known (so what it lacks is absent)."""
        if not knows_all(self.facts.known, group):
            raise NotKnown(describe(group))
        return getattr(self.facts, group)

    def env_var(self, name: str) -> str | None:
        """The variable's value, None when it is unset. A name the collector does not record is a bug in the
        caller (NotCollected), never "unset"."""
        if not in_env_domain(name):
            raise NotCollected(f"{name} is not among the variables the collector records (facts/collect.py "
                               "ENV_NAMES, ENV_PREFIXES): add it there before a check reads it")
        return self._get("env", name)

    def env_vars(self, names: tuple[str, ...] | list[str]) -> dict[str, str]:
        """{name: value} of those set, every one of them known."""
        values = {name: self.env_var(name) for name in names}
        return {k: v for k, v in values.items() if v is not None}

    def file(self, path: str) -> str | None:
        """The file's text, None when it does not exist (or could not be read)."""
        return self._get("files", path)

    def present(self, path: str) -> bool:
        return bool(self._get("present", path))

    def device(self, path: str) -> dict[str, Any]:
        """The device node's access record ({"exists": False} when there is no such node)."""
        return self._get("devices", path) or {"exists": False}

    def user_info(self, key: str) -> Any:
        return self._get("user", key)

    def limit(self, name: str) -> Any:
        return self._get("limits", name)

    def platform_info(self, key: str) -> Any:
        return self._get("platform", key)

    def os_field(self, key: str) -> Any:
        return self._get("os_info", key)

    def command(self, key: str) -> CommandResult | None:
        """The tool's recorded run, None when the tool is not installed (or was not run)."""
        return self._get("commands", key)

    def package(self, name: str) -> str | None:
        """The installed version of a distribution, None when it is not installed."""
        return self._get("packages", name)

    def torch_requires(self) -> list[str]:
        if not self.knows("torch_requires"):
            raise NotKnown(describe("torch_requires"))
        return self.facts.torch_requires

    def probe(self, name: str) -> dict[str, Any] | None:
        """A Python probe's answer, None when it gave none (probe_failure says why)."""
        return self._get("probes", name)

    def probe_run(self, name: str) -> CommandResult | None:
        return self._get("probe_runs", name)

    def health(self, key: str) -> Any:
        """A node-health record (facts/health.py): uptime_s, pci_gpus, cpufreq_governors, tunableop_files."""
        return self._get("node_health", key)

    def rocm_layout(self) -> dict[str, Any]:
        if not self.knows("rocm_layout", "roots"):
            raise NotKnown(describe("rocm_layout", "roots"))
        return self.facts.rocm_layout

    @property
    def collected_at(self) -> float:
        """When the facts were collected (Unix time; 0 when not recorded): for "how long ago" only."""
        return self.facts.collected_at

    def extensions(self) -> dict[str, Any]:
        if not self.knows("extensions"):
            raise NotKnown(describe("extensions"))
        return self.facts.extensions

    # ---- parsed tool outputs -------------------------------------------------------------------
    @known_view
    def rocminfo(self) -> RocminfoReport | None:
        from rocmcheck.facts.parsers.rocminfo import parse_rocminfo

        res = self.command("rocminfo")
        if res is None:
            return None
        return self.parse_once(parse_rocminfo, res.stdout + ("\n" + res.stderr if res.stderr else ""))

    @known_view
    def amd_smi(self) -> SmiReport | None:
        from rocmcheck.facts.parsers import smi

        reports: list[SmiReport | None] = []  # merge_smi: for each GPU, the first report that knows a field wins
        unknown: list[str] = []
        binding = known_or_none(lambda: self.probe("amdsmi")) or {}
        if binding.get("gpus"):  # the amdsmi Python binding first: no text to parse
            reports.append(SmiReport("amdsmi", [SmiGpu(g["index"], product_name=g.get("name") or None, gfx=g.get("gfx"),
                                                       vram_total_bytes=g.get("memory_total"))
                                                for g in binding["gpus"]]))
        for key, parse in (("amd-smi-static", smi.parse_amd_smi_static), ("amd-smi-version", smi.parse_amd_smi_version),
                           ("rocm-smi-json", smi.parse_rocm_smi_json), ("rocm-smi", smi.parse_rocm_smi)):
            res = self.from_source(lambda key=key: self.command(key), unknown)
            if res is not None and res.ok:
                reports.append(self.parse_once(parse, res.stdout))
        if unknown and not any(r.gpus for r in reports if r is not None):  # what lists nothing shows nothing
            raise NotKnown(unknown[0])
        reports = [r for r in reports if r is not None]
        return smi.merge_smi(*reports) if reports else None

    @known_view
    def nvidia_smi(self) -> SmiReport | None:
        """NVIDIA's GPUs, driver and CUDA version: the NVML binding first (no text to parse), then the csv query (it
        names the compute capability), the table, `nvidia-smi -q`; per GPU index the first that knows a field wins.
        NotKnown when nothing lists a GPU and one of nvidia-smi's outputs is not known (NVML's absence says nothing
        about the driver)."""
        from rocmcheck.facts.collect import NVIDIA_QUERY_FIELDS
        from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_q, parse_nvidia_smi_table
        from rocmcheck.facts.parsers.smi import merge_smi

        unknown: list[str] = []
        reports: list[SmiReport] = []
        nvml = known_or_none(lambda: self.probe("nvml")) or {}
        if nvml.get("gpus"):
            reports.append(SmiReport("nvml", [SmiGpu(g["index"], product_name=g.get("name") or None,
                                                     vram_total_bytes=g.get("memory_total"),
                                                     vram_used_bytes=g.get("memory_used"), uuid=g.get("uuid"),
                                                     compute_cap=g.get("compute_cap")) for g in nvml["gpus"]],
                                     driver_version=nvml.get("driver_version"), cuda_version=nvml.get("cuda_version")))
        for key, parse in (("nvidia-smi-query", lambda t: parse_nvidia_smi_csv(t, NVIDIA_QUERY_FIELDS)),
                           ("nvidia-smi", parse_nvidia_smi_table), ("nvidia-smi-health", parse_nvidia_smi_q)):
            res = self.from_source(lambda key=key: self.command(key), unknown)
            if res is not None and res.ok:
                # the csv reader is made anew for each view: its command's key names it in the store
                reports.append(self.parse_once(parse, res.stdout, key if key == "nvidia-smi-query" else None))
        if unknown and not any(r.gpus for r in reports):
            raise NotKnown(unknown[0])
        if not reports:
            return None
        merged = merge_smi(*reports)
        merged.tool = "nvml" if nvml.get("gpus") else "nvidia-smi"
        return merged

    @staticmethod
    def from_source(read: Callable[[], T], unknown: list[str]) -> T | None:
        """One source of a combined view: its value, or None with its name added to `unknown`."""
        try:
            return read()
        except NotKnown as exc:
            unknown.append(exc.what)
            return None

    @known_view
    def hipconfig(self) -> HipConfig | None:
        from rocmcheck.facts.parsers.hipconfig import parse_hipconfig

        res = self.command("hipconfig")
        if res is None or not res.ok:
            return None
        return self.parse_once(parse_hipconfig, res.stdout)

    @known_view
    def rocm(self) -> RocmLocation | None:
        """The ROCm a build here would use: rocm_location's rule over the recorded layout, the root variables
        (ROCM_PATH, ROCM_HOME) and hipconfig's root and version; each of them must be known."""
        from rocmcheck.facts.rocm_location import locate_rocm

        layout = self.rocm_layout()
        roots = self.env_vars(ROOT_VARIABLES)
        hip = self.hipconfig
        return locate_rocm(layout, roots, hip.rocm_path if hip else None, hip.hip_version if hip else None)

    # ---- Python stack (child-process probes) ---------------------------------------------------
    @property
    def torch(self) -> dict[str, Any] | None:
        return self.probe("torch")

    @property
    def torch_is_rocm(self) -> bool:
        return bool(self.torch and self.torch.get("hip"))

    @property
    def torch_is_cuda(self) -> bool:
        return bool(self.torch and self.torch.get("cuda") and not self.torch.get("hip"))

    def probe_died(self, name: str) -> bool:
        """The child hung or was killed while probing name (so the import itself is the problem)."""
        if self.probe(name) is not None:
            return False
        run = self.probe_run(name)
        return run is not None and (run.timed_out or (run.returncode is not None and run.returncode < 0))

    def probe_failure(self, name: str) -> str | None:
        """Why a Python probe gave no JSON (crash, hang), or None when it did."""
        if self.probe(name) is not None:
            return None
        run = self.probe_run(name)
        if run is None:
            runs = self.group("probe_runs")
            hung = [n for n, r in runs.items() if r.timed_out and n not in self.facts.probes]
            return f"was not reached: {hung[0]} hung first in the same child" if hung else "was not run"
        if run.timed_out:
            return f"hung: no answer within {run.timeout_s:g} s"
        if run.returncode is not None and run.returncode < 0:
            return f"crashed (signal {-run.returncode}) while importing; last stderr line: {_last_line(run.stderr)}"
        return f"gave no result (exit {run.returncode}); last stderr line: {_last_line(run.stderr)}"

    # ---- the machine ---------------------------------------------------------------------------
    @known_view
    def in_container(self) -> tuple[bool, list[str]]:
        """(inside a container?, the evidence). Any one sign says yes; "no" needs every sign known."""
        evidence: list[str] = []
        unknown: list[str] = []
        if self.from_source(lambda: self.present("/.dockerenv"), unknown):
            evidence.append("/.dockerenv exists")
        if self.from_source(lambda: self.present("/run/.containerenv"), unknown):
            evidence.append("/run/.containerenv exists (podman)")
        container = self.from_source(lambda: self.env_var("container"), unknown)
        if container:
            evidence.append(f"container={container}")
        cgroup = self.from_source(lambda: self.file("/proc/1/cgroup"), unknown) or ""
        hits = [m for m in CONTAINER_CGROUP_MARKERS if m in cgroup]
        if hits:
            evidence.append(f"/proc/1/cgroup mentions {', '.join(hits)}")
        if not evidence and unknown:
            raise NotKnown(f"whether this runs in a container ({unknown[0]})")
        return bool(evidence), evidence

    @known_view
    def amd_signs(self) -> list[str]:
        """Evidence that this is meant to be an AMD GPU machine (from the facts that are known)."""
        signs = []
        if known_or_none(lambda: self.present("/sys/module/amdgpu")):
            signs.append("amdgpu kernel module loaded")
        if (known_or_none(lambda: self.device("/dev/kfd")) or {}).get("exists"):
            signs.append("/dev/kfd exists")
        if known_or_none(lambda: self.command("rocminfo")) is not None:
            signs.append("rocminfo installed")
        rocm = known_or_none(lambda: self.rocm)
        if rocm is not None:
            signs.append(f"a ROCm install is present ({rocm.root}, {rocm.layout} layout)")
        if known_or_none(lambda: self.torch_is_rocm):
            signs.append("torch is a ROCm build")
        return signs

    @known_view
    def nvidia_signs(self) -> list[str]:
        signs = []
        if known_or_none(lambda: self.present("/sys/module/nvidia")) or \
                known_or_none(lambda: self.file("/proc/driver/nvidia/version")):
            signs.append("nvidia kernel module loaded")
        if any(known_or_none(lambda key=key: self.command(key)) is not None for key in ("nvidia-smi-query",
                                                                                        "nvidia-smi")):
            signs.append("nvidia-smi installed")
        if (known_or_none(lambda: self.probe("nvml")) or {}).get("gpus"):
            signs.append("NVML lists GPUs")
        if known_or_none(lambda: self.torch_is_cuda):
            signs.append("torch is a CUDA build")
        return signs

    @known_view
    def amd_gpus(self) -> list[GpuView]:
        """The AMD GPUs: rocminfo's agents (named and sized with amd-smi / rocm-smi where they say more); when
        rocminfo's output is not known, the GPUs amd-smi / rocm-smi list with their arch. Absent GPUs are only
        concluded from rocminfo."""
        smi = known_or_none(lambda: self.amd_smi)
        try:
            report = self.rocminfo
        except NotKnown:
            gpus = [view for g in (smi.gpus if smi else []) if (view := self._smi_gpu(g)).arch]
            if not gpus:
                raise NotKnown("rocminfo output") from None
            return gpus
        out: list[GpuView] = []
        if report is None:
            return out
        smi_gpus = {g.index: g for g in (smi.gpus if smi else [])}
        # rocminfo's agent and the smi tools' GPU are one GPU when their PCI addresses agree (rocminfo's BDFID packs
        # bus, device and function); by index only where either side shows no address: a fragment of either output
        # numbers its GPUs differently from the other.
        smi_by_bdf = {bdf: g for g in (smi.gpus if smi else []) if (bdf := _bdfid(g.pci_bus)) is not None}
        for i, agent in enumerate(report.gpus):
            entry = arch_info(agent.name)
            if smi_by_bdf and agent.bdfid:
                smi_gpu = smi_by_bdf.get(agent.bdfid & 0xFFFF)
            else:
                smi_gpu = smi_gpus.get(i)
            name = agent.marketing_name or (smi_gpu.product_name if smi_gpu else None)
            memory = agent.memory_bytes or (smi_gpu.vram_total_bytes if smi_gpu else None)
            # rocm-smi/amd-smi report the whole GPU's VRAM for every CPX/QPX partition; rocminfo reports the
            # partition's own share (https://github.com/ROCm/ROCm/issues/4750). Prefer smi only for whole GPUs.
            partitioned = bool(smi_gpu and smi_gpu.partition and smi_gpu.partition != "SPX")
            if smi_gpu and smi_gpu.vram_total_bytes and not partitioned:
                memory = smi_gpu.vram_total_bytes
            product = entry.match_product(name) if entry else None
            if product is None and entry and smi_gpu:
                product = entry.match_product(smi_gpu.product_name)
            out.append(GpuView("amd", i, base_gfx(agent.name), name, memory, "rocminfo", entry, product,
                               {"compute_units": agent.compute_units, "uuid": agent.uuid, "is_apu": agent.is_apu,
                                "partition": smi_gpu.partition if smi_gpu else None,
                                "memory_partition": smi_gpu.memory_partition if smi_gpu else None}))
        return out

    @staticmethod
    def _smi_gpu(g: SmiGpu) -> GpuView:
        """An AMD GPU from amd-smi / rocm-smi alone: its gfx target, else the arch its product name belongs to."""
        from rocmcheck.knowledge import product_arch

        entry = arch_info(g.gfx) if g.gfx else product_arch("amd", g.product_name)
        arch = base_gfx(g.gfx) if g.gfx else entry.name if entry else None
        product = entry.match_product(g.product_name) if entry else None
        return GpuView("amd", g.index, arch, g.product_name, g.vram_total_bytes, "amd-smi", entry, product,
                       {"compute_units": g.compute_units, "uuid": g.uuid, "is_apu": False, "partition": g.partition,
                        "memory_partition": g.memory_partition})

    @known_view
    def nvidia_gpus(self) -> list[GpuView]:
        out: list[GpuView] = []
        report = self.nvidia_smi
        if report is None:
            return out
        torch = known_or_none(lambda: self.torch) or {}
        torch_devices = (torch.get("devices") or []) if torch.get("cuda") and not torch.get("hip") else []
        for g in report.gpus:
            cap = g.compute_cap or ""
            if not cap and g.index < len(torch_devices) and torch_devices[g.index].get("capability"):
                cap = "%d.%d" % tuple(torch_devices[g.index]["capability"])  # older drivers lack compute_cap
            arch = None
            if cap and "." in cap:
                major, minor = cap.split(".", 1)
                arch = cuda_arch_from_capability(major, minor)
            entry = arch_info(arch) if arch else None
            if entry is None and not arch:
                from rocmcheck.knowledge import nvidia_arch_of_product

                entry = nvidia_arch_of_product(g.product_name)  # the product name says the arch
                arch = entry.name if entry else None
            product = entry.match_product(g.product_name) if entry else None
            out.append(GpuView("nvidia", g.index, arch, g.product_name, g.vram_total_bytes, "nvidia-smi",
                               entry, product, {"uuid": g.uuid, "capability_source": "compute_cap" if g.compute_cap
                                                else "torch" if cap else "product name" if arch else None}))
        return out

    @property
    def gpus(self) -> list[GpuView]:
        """Every GPU known; NotKnown only when neither vendor's GPUs are known."""
        unknown: list[str] = []
        amd = self.from_source(lambda: self.amd_gpus, unknown)
        nvidia = self.from_source(lambda: self.nvidia_gpus, unknown)
        if amd is None and nvidia is None:
            raise NotKnown("the GPUs (rocminfo, amd-smi or nvidia-smi output)")
        return (amd or []) + (nvidia or [])

    def every_gpu(self) -> list[GpuView]:
        """Every GPU, both vendors' known: an empty list means there is none (NotKnown when either is not known)."""
        return self.amd_gpus + self.nvidia_gpus

    @known_view
    def vendor(self) -> str:
        """"amd", "nvidia", "none" (known to have no GPU stack) or "unknown" (not enough is known to say)."""
        amd = known_or_none(lambda: self.amd_gpus)
        nvidia = known_or_none(lambda: self.nvidia_gpus)
        if amd or (self.amd_signs and not nvidia):
            return "amd"
        if nvidia or self.nvidia_signs:
            return "nvidia"
        if amd is not None and nvidia is not None and all(self.knows(g, k) for g, k in NONE_NEEDS):
            return "none"
        return "unknown"

    def not_known(self, what: str, evidence: list[str] | None = None, **data: Any) -> CheckResult:
        """The skip of a judgement whose fact is not known, with evidence of what is (else raise NotKnown)."""
        from rocmcheck.result import skipped

        return skipped(f"{self.unknown_phrase}: {what}", evidence, not_known=[what], **data)

    def known_vendor(self) -> str:
        """vendor, for a judgement that depends on it: NotKnown when it is "unknown"."""
        if self.vendor == "unknown":
            raise NotKnown(VENDOR_WHAT)
        return self.vendor

    def vendor_gpus(self) -> list[GpuView]:
        """The GPUs of this machine's vendor."""
        vendor = self.known_vendor()
        return self.amd_gpus if vendor == "amd" else self.nvidia_gpus if vendor == "nvidia" else []


def installed_but_cannot_start(res: CommandResult) -> bool:
    """The tool is there and the kernel could not start it: the interpreter its `#!` line names (or its ELF
    loader) is missing. The runner says so (interpreter_missing); a bundle from before it did shows it as a
    "not found" for a path, which only that can mean, since the doctor runs a tool by the path it found it at."""
    exe = res.argv[0] if res.argv else ""
    return res.interpreter_missing or (res.not_found and os.sep in exe)


def tool_failure(res: CommandResult) -> str:
    """One line saying why a recorded tool gave no usable output; never "not found" for a tool that is there."""
    if installed_but_cannot_start(res) and res.not_found:
        exe = res.argv[0]
        return (f"{exe.rsplit(os.sep, 1)[-1]} is installed ({exe}) but could not be started: the interpreter its "
                "#! line names, or a loader it needs, is missing")
    return res.describe_failure()


def _last_line(text: str) -> str:
    from rocmcheck.facts.parsers._text import clean_lines

    lines = [l for l in clean_lines(text) if l.strip()]
    return lines[-1][:300] if lines else "(none)"


_BDF = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def _bdfid(pci_bus: str | None) -> int | None:
    """"0000:26:00.0" -> 0x2600, rocminfo's BDFID of the same GPU (bus << 8 | device << 3 | function)."""
    m = _BDF.match((pci_bus or "").strip())
    return (int(m.group(1), 16) << 8 | int(m.group(2), 16) << 3 | int(m.group(3))) if m else None
