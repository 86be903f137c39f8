"""The checks' context for pasted facts: the doctor's CheckContext, saying "not in the paste" for a fact the paste
lacks, and knowing the GPUs a paste names without a GPU tool's output (collect_env's "GPU models and
configuration", a Python session's device names, a rocmcheck summary) when no GPU tool's output is pasted. A named
GPU whose arch the paste does not say is left out: a check would judge an arch nobody pasted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocmcheck.checks.context import CheckContext, GpuView, known_view
from rocmcheck.facts.collect import Facts
from rocmcheck.facts.known import ALL, FACT_GROUPS, NotKnown
from rocmcheck.facts.parsers.models import SmiGpu
from rocmcheck.knowledge import arch_info, nvidia_arch_of_product
from rocmcheck.triage.known import Ledger, group_dict, inner_dict, not_known_list, probe_dict
from rocmcheck.triage.pasted import Pasted, PastedGpu

UNKNOWN_PHRASE = "not in the paste"
NVIDIA_ARCH_WHAT = "the GPUs' compute capability (nvidia-smi --query-gpu=name,compute_cap --format=csv)"
# Where a paste's GPU list comes from, best first: the first of these that names GPUs of a vendor is taken whole
# (collect_env and a Python session often name the same GPU twice).
GPU_ORIGINS = ("rocmcheck_summary", "rocm_smi", "amd_smi", "nvidia_smi", "rocminfo", "collect_env", "python_session",
               "llamafactory_env", "accelerate_env", "transformers_env")


@dataclass
class TriageContext(CheckContext):
    unknown_phrase: str = UNKNOWN_PHRASE
    pasted_gpus: list[PastedGpu] = field(default_factory=list)
    pasted_rocm: Any = None  # a rocmcheck summary's ROCm install (RocmLocation)
    pasted_container: bool | None = None  # a rocmcheck summary's word on running in a container

    @known_view
    def rocm(self) -> Any:
        """The ROCm a rocmcheck summary names; else the doctor's rule over what was pasted."""
        if self.pasted_rocm is not None:
            return self.pasted_rocm
        return CheckContext.rocm.func(self)

    @known_view
    def in_container(self) -> tuple[bool, list[str]]:
        if self.pasted_container is not None:
            return self.pasted_container, ["the rocmcheck summary says so"] if self.pasted_container else []
        return CheckContext.in_container.func(self)

    def _pasted(self, vendor: str) -> list[PastedGpu]:
        for origin in GPU_ORIGINS:
            found = [g for g in self.pasted_gpus if g.origin == origin and g.vendor == vendor]
            if found:
                return found
        return []

    @known_view
    def amd_gpus(self) -> list[GpuView]:
        """rocminfo's (or the smi tools') GPUs when pasted; else the AMD GPUs the paste names with their arch."""
        try:
            return CheckContext.amd_gpus.func(self)
        except NotKnown:
            pasted = [g for g in self._pasted("amd") if g.arch]
            if not pasted:
                raise
        # Each GPU with the index its tool printed ("GPU: 3" is GPU 3), and the partition and compute units shown.
        return [self._smi_gpu(SmiGpu(i if g.index is None else g.index, product_name=g.name, gfx=g.arch,
                                     vram_total_bytes=g.memory_bytes, partition=g.partition,
                                     memory_partition=g.memory_partition, compute_units=g.compute_units))
                for i, g in enumerate(pasted)]

    @known_view
    def nvidia_gpus(self) -> list[GpuView]:
        """nvidia-smi's GPUs when pasted; else the NVIDIA GPUs the paste names with an arch (or a product name
        that says it)."""
        try:
            gpus = CheckContext.nvidia_gpus.func(self)
        except NotKnown:
            out = []
            for g in self._pasted("nvidia"):
                entry = arch_info(g.arch) if g.arch else nvidia_arch_of_product(g.name)
                if entry is not None:
                    out.append(GpuView("nvidia", len(out), entry.name, g.name, g.memory_bytes, "paste", entry,
                                       entry.match_product(g.name) if g.name else None, {"uuid": None}))
            if not out:
                raise
            return out
        if self.knows("commands", "nvidia-smi-query"):
            return gpus
        # nvidia-smi's table does not print the compute capability: a GPU whose product name does not say its
        # arch is left out, rather than judged as an unknown arch.
        known = [g for g in gpus if g.arch]
        if gpus and not known:
            raise NotKnown(NVIDIA_ARCH_WHAT)
        return known


def facts_for_checks(pasted: Pasted, ledger: Ledger) -> Facts:
    """The pasted facts, each group and probe answer a PartDict (rocmcheck/triage/known.py)."""
    f = pasted.facts
    out = Facts(**{name: getattr(f, name) for name in f.__dataclass_fields__})
    out.known = {group: (state if state == ALL else list(state)) for group, state in f.known.items()}
    for group in FACT_GROUPS:
        value, state = getattr(f, group), f.known.get(group)
        if isinstance(value, list):
            if state != ALL:
                setattr(out, group, not_known_list(group))
            continue
        if not isinstance(value, dict):
            continue
        inner = dict(value)
        if group == "probes":
            inner = {name: probe_dict(_nested(pasted, name, answer, ledger), name, pasted.probe_known.get(name, ()),
                                      ledger) if isinstance(answer, dict) else answer
                     for name, answer in value.items()}
        elif group == "devices":
            inner = {path: inner_dict(record, f"devices/{path}", pasted.nested_known[(group, path)], ledger, path)
                     if (group, path) in pasted.nested_known and isinstance(record, dict) else record
                     for path, record in value.items()}
        setattr(out, group, group_dict(inner, group, state, ledger))
    return out


def _nested(pasted: Pasted, probe: str, answer: dict, ledger: Ledger) -> dict:
    out = dict(answer)
    for key, value in answer.items():
        known = pasted.nested_known.get((probe, key))
        if known is not None and isinstance(value, dict):
            out[key] = inner_dict(value, f"probes/{probe}.{key}", known, ledger, f"{probe}'s {key}")
    return out
