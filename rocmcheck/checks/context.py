"""What the checks see: the raw Facts plus views derived once (parsed tool outputs, the GPU list)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rocmcheck.facts.collect import Facts
from rocmcheck.facts.parsers.models import HipConfig, RocminfoReport, SmiGpu, SmiReport
from rocmcheck.facts.rocm_location import RocmLocation
from rocmcheck.knowledge import Arch, Product, arch_info, base_gfx, cuda_arch_from_capability
from rocmcheck.runner import CommandResult

CONTAINER_CGROUP_MARKERS = ("docker", "kubepods", "containerd", "libpod", "lxc", "podman")


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

    # ---- parsed tool outputs -------------------------------------------------------------------
    @cached_property
    def rocminfo(self) -> RocminfoReport | None:
        from rocmcheck.facts.parsers.rocminfo import parse_rocminfo

        res = self.facts.command("rocminfo")
        if res is None:
            return None
        return parse_rocminfo(res.stdout + ("\n" + res.stderr if res.stderr else ""))

    @cached_property
    def amd_smi(self) -> SmiReport | None:
        from rocmcheck.facts.parsers import smi

        reports = []  # merge_smi: for each GPU, the first report that knows a field wins
        binding = self.facts.probes.get("amdsmi") or {}
        if binding.get("gpus"):  # the amdsmi Python binding first: no text to parse
            reports.append(SmiReport("amdsmi", [SmiGpu(g["index"], product_name=g.get("name") or None, gfx=g.get("gfx"),
                                                       vram_total_bytes=g.get("memory_total"))
                                                for g in binding["gpus"]]))
        static = self.facts.command("amd-smi-static")
        if static is not None and static.ok:
            reports.append(smi.parse_amd_smi_static_json(static.stdout))
        version = self.facts.command("amd-smi-version")
        if version is not None and version.ok:
            reports.append(smi.parse_amd_smi_version(version.stdout))
        rjson = self.facts.command("rocm-smi-json")
        if rjson is not None and rjson.ok:
            reports.append(smi.parse_rocm_smi_json(rjson.stdout))
        concise = self.facts.command("rocm-smi")
        if concise is not None and concise.ok:
            reports.append(smi.parse_rocm_smi(concise.stdout))
        reports = [r for r in reports if r is not None]
        return smi.merge_smi(*reports) if reports else None

    @cached_property
    def nvidia_smi(self) -> SmiReport | None:
        from rocmcheck.facts.collect import NVIDIA_QUERY_FIELDS
        from rocmcheck.facts.parsers.nvidia_smi import parse_nvidia_smi_csv, parse_nvidia_smi_table

        nvml = self.facts.probes.get("nvml") or {}
        if nvml.get("gpus"):  # the NVML binding (nvidia-ml-py) when present: no text to parse
            return SmiReport("nvml", [SmiGpu(g["index"], product_name=g.get("name") or None,
                                             vram_total_bytes=g.get("memory_total"),
                                             vram_used_bytes=g.get("memory_used"), uuid=g.get("uuid"),
                                             compute_cap=g.get("compute_cap")) for g in nvml["gpus"]],
                             driver_version=nvml.get("driver_version"), cuda_version=nvml.get("cuda_version"))
        query = self.facts.command("nvidia-smi-query")
        if query is None:
            return None
        report = parse_nvidia_smi_csv(query.stdout, NVIDIA_QUERY_FIELDS) if query.ok else None
        table = self.facts.command("nvidia-smi")
        if table is not None and table.ok:
            header = parse_nvidia_smi_table(table.stdout)
            if report is None or not report.gpus:
                report = header
            else:
                report.cuda_version = report.cuda_version or header.cuda_version
                report.driver_version = report.driver_version or header.driver_version
        return report

    @cached_property
    def hipconfig(self) -> HipConfig | None:
        from rocmcheck.facts.parsers.hipconfig import parse_hipconfig

        res = self.facts.command("hipconfig")
        if res is None or not res.ok:
            return None
        return parse_hipconfig(res.stdout)

    @cached_property
    def rocm(self) -> RocmLocation | None:
        """The ROCm a build here would use: rocm_location's rule over the recorded layout and hipconfig."""
        from rocmcheck.facts.rocm_location import locate_rocm

        hip = self.hipconfig
        return locate_rocm(self.facts.rocm_layout, self.facts.env,
                           hip.rocm_path if hip else None, hip.hip_version if hip else None)

    # ---- Python stack (child-process probes) ---------------------------------------------------
    @property
    def torch(self) -> dict[str, Any] | None:
        return self.facts.probes.get("torch")

    @property
    def torch_is_rocm(self) -> bool:
        return bool(self.torch and self.torch.get("hip"))

    @property
    def torch_is_cuda(self) -> bool:
        return bool(self.torch and self.torch.get("cuda") and not self.torch.get("hip"))

    def probe_died(self, name: str) -> bool:
        """The child hung or was killed while probing name (so the import itself is the problem)."""
        run = self.facts.probe_runs.get(name)
        return name not in self.facts.probes and run is not None and (
            run.timed_out or (run.returncode is not None and run.returncode < 0))

    def probe_failure(self, name: str) -> str | None:
        """Why a Python probe gave no JSON (crash, hang), or None when it did."""
        if name in self.facts.probes:
            return None
        run = self.facts.probe_runs.get(name)
        if run is None:
            hung = [n for n, r in self.facts.probe_runs.items() if r.timed_out and n not in self.facts.probes]
            return f"was not reached: {hung[0]} hung first in the same child" if hung else "was not run"
        if run.timed_out:
            return f"hung: no answer within {run.timeout_s:g} s"
        if run.returncode is not None and run.returncode < 0:
            return f"crashed (signal {-run.returncode}) while importing; last stderr line: {_last_line(run.stderr)}"
        return f"gave no result (exit {run.returncode}); last stderr line: {_last_line(run.stderr)}"

    # ---- the machine ---------------------------------------------------------------------------
    @cached_property
    def in_container(self) -> tuple[bool, list[str]]:
        evidence = []
        if self.facts.present.get("/.dockerenv"):
            evidence.append("/.dockerenv exists")
        if self.facts.present.get("/run/.containerenv"):
            evidence.append("/run/.containerenv exists (podman)")
        if self.facts.env.get("container"):
            evidence.append(f"container={self.facts.env['container']}")
        cgroup = self.facts.files.get("/proc/1/cgroup") or ""
        hits = [m for m in CONTAINER_CGROUP_MARKERS if m in cgroup]
        if hits:
            evidence.append(f"/proc/1/cgroup mentions {', '.join(hits)}")
        return bool(evidence), evidence

    @cached_property
    def amd_signs(self) -> list[str]:
        """Evidence that this is meant to be an AMD GPU machine."""
        f = self.facts
        signs = []
        if f.present.get("/sys/module/amdgpu"):
            signs.append("amdgpu kernel module loaded")
        if f.devices.get("/dev/kfd", {}).get("exists"):
            signs.append("/dev/kfd exists")
        if "rocminfo" in f.commands:
            signs.append("rocminfo installed")
        if self.rocm is not None:
            signs.append(f"a ROCm install is present ({self.rocm.root}, {self.rocm.layout} layout)")
        if self.torch_is_rocm:
            signs.append("torch is a ROCm build")
        return signs

    @cached_property
    def nvidia_signs(self) -> list[str]:
        f = self.facts
        signs = []
        if f.present.get("/sys/module/nvidia") or f.files.get("/proc/driver/nvidia/version"):
            signs.append("nvidia kernel module loaded")
        if "nvidia-smi-query" in f.commands:
            signs.append("nvidia-smi installed")
        if (f.probes.get("nvml") or {}).get("gpus"):
            signs.append("NVML lists GPUs")
        if self.torch_is_cuda:
            signs.append("torch is a CUDA build")
        return signs

    @cached_property
    def amd_gpus(self) -> list[GpuView]:
        out: list[GpuView] = []
        report = self.rocminfo
        if report is None:
            return out
        smi_gpus = {g.index: g for g in (self.amd_smi.gpus if self.amd_smi else [])}
        for i, agent in enumerate(report.gpus):
            entry = arch_info(agent.name)
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
                                "partition": smi_gpu.partition if smi_gpu else None}))
        return out

    @cached_property
    def nvidia_gpus(self) -> list[GpuView]:
        out: list[GpuView] = []
        report = self.nvidia_smi
        if report is None:
            return out
        torch_devices = (self.torch or {}).get("devices") or [] if self.torch_is_cuda else []
        for g in report.gpus:
            cap = g.compute_cap or ""
            if not cap and g.index < len(torch_devices) and torch_devices[g.index].get("capability"):
                cap = "%d.%d" % tuple(torch_devices[g.index]["capability"])  # older drivers lack compute_cap
            arch = None
            if cap and "." in cap:
                major, minor = cap.split(".", 1)
                arch = cuda_arch_from_capability(major, minor)
            entry = arch_info(arch) if arch else None
            product = entry.match_product(g.product_name) if entry else None
            out.append(GpuView("nvidia", g.index, arch, g.product_name, g.vram_total_bytes, "nvidia-smi",
                               entry, product, {"uuid": g.uuid}))
        return out

    @property
    def gpus(self) -> list[GpuView]:
        return self.amd_gpus + self.nvidia_gpus

    @property
    def vendor(self) -> str:
        """"amd", "nvidia" or "none": what kind of GPU machine this is meant to be."""
        if self.amd_gpus or (self.amd_signs and not self.nvidia_gpus):
            return "amd"
        if self.nvidia_gpus or self.nvidia_signs:
            return "nvidia"
        return "none"


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
