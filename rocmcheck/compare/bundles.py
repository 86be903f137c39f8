"""Bundles of several nodes: find and load them, name each node, and lay out what `compare` sets side by side
(versions, GPUs, every check's status, the probes' numbers, kernel-log findings). Writing one node's bundle into a
shared folder lives here too. No torch."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmcheck.errors import BadInput
from rocmcheck.facts.collect import Facts
from rocmcheck.facts.redact import redact_tree, redact_value
from rocmcheck.fixes import one_line
from rocmcheck.result import CheckResult

# Collection times compare can place: from the epoch to the end of year 9999 (what time.gmtime can show). A NaN,
# a negative or an absurd one (a damaged bundle) is an unknown time.
LATEST_TIME = 253402300799.0

# Stage markers that say only that a stage was skipped or left out; they differ between a GPU node and a replay
# with --no-train for reasons that are not the node's.
IGNORED_IDS = {"probe.stage", "train.stage"}

# (facet key, label, where it comes from). The order is the table's order within a kind.
VERSION_FACETS = (
    ("driver", "GPU driver"), ("rocm", "ROCm"), ("cuda", "CUDA (driver)"), ("torch", "torch"),
    ("triton", "Triton"), ("flash_attn", "flash-attn"), ("deepspeed", "DeepSpeed"), ("transformers", "transformers"),
    ("os", "OS"), ("kernel", "kernel"), ("python", "Python"),
)
GPU_FACETS = (("gpu_count", "GPU count"), ("gpu_model", "GPU model"))
TRITON_PACKAGES = ("pytorch-triton-rocm", "triton-rocm", "pytorch-triton", "triton")


@dataclass
class NodeBundle:
    """One bundle as compare sees it: its node's name and everything set side by side."""

    label: str  # unique among the compared bundles
    host: str
    path: str
    facts: Facts
    results: list[CheckResult] = field(default_factory=list)  # the checks replayed + the recorded GPU/train stages
    facets: dict[str, Any] = field(default_factory=dict)  # versions and GPUs: key -> value (None = not found)
    numbers: dict[str, float] = field(default_factory=dict)  # metric key -> value (bigger is better)
    kernel_log: list[dict[str, Any]] = field(default_factory=list)  # fail/warn findings of health.kernel_log

    @property
    def collected_at(self) -> float:
        """Seconds since the epoch; 0.0 when the bundle holds none that is a real time."""
        return known_time(self.facts.collected_at)

    @property
    def statuses(self) -> dict[str, str]:
        return {r.id: r.status.value for r in self.results if r.id not in IGNORED_IDS}

    def result(self, check_id: str) -> CheckResult | None:
        return next((r for r in self.results if r.id == check_id), None)




def known_time(value: Any) -> float:
    """A collection time as compare uses it: a finite number of seconds between the epoch and LATEST_TIME, else
    0.0 (not known)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    number = float(value) if not isinstance(value, int) or value.bit_length() < 64 else math.inf
    return number if math.isfinite(number) and 0 <= number <= LATEST_TIME else 0.0


def bundle_paths(args: list[str]) -> list[Path]:
    """Files as given; a folder gives its *.json files (sorted). Missing paths are an error; anything else that
    exists (a FIFO, a device) goes to the loader, which says what it is instead of reading it."""
    paths: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found = sorted(q for q in p.glob("*.json") if q.is_file())
            if not found:
                raise BadInput(f"{p} holds no *.json bundles")
            paths += found
        elif p.exists():
            paths.append(p)
        else:
            raise BadInput(f"no such file or folder: {p}")
    unique = list(dict.fromkeys(p.resolve() for p in paths))
    return unique


def _when(ts: float) -> str:
    ts = known_time(ts)
    if not ts:
        return "unknown time"
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):  # a platform whose gmtime stops earlier
        return "unknown time"


def host_of(facts: Facts, path: Path) -> str:
    """The node's name: as the launch named it (a stand-in node is host-rankN), the host name the doctor recorded,
    else the bundle's file name. One line (a newline in a recorded name cannot start a line of the output), and
    redacted like everything else a bundle shows."""
    name = one_line(redact_value(str((facts.launch or {}).get("hostname") or facts.platform.get("node") or "")))
    return name or one_line(path.stem) or "node"


def load_nodes(paths: list[Path]) -> list[NodeBundle]:
    """Load and lay out every bundle. A file that is not a bundle is a BadInput naming it."""
    from rocmcheck.doctor import DoctorOptions, load_bundle, run_doctor

    nodes = []
    for path in paths:
        facts = load_bundle(path)
        # The same checks as `doctor --bundle`: live verdicts on the recorded facts, GPU and train stages as recorded.
        run = run_doctor(DoctorOptions(gpu_probes=False, train=False), facts)
        node = NodeBundle(label="", host=host_of(facts, path), path=str(path), facts=facts, results=run.results)
        # Redacted as the checks' own output is: a bundle written by an older rocmcheck, or edited, may hold a
        # token in a version string or a password in a URL.
        node.facets = redact_tree(facets(run))
        node.numbers = numbers(node.results)
        node.kernel_log = kernel_log_findings(node.results)
        nodes.append(node)
    _label(nodes)
    return nodes


def _label(nodes: list[NodeBundle]) -> None:
    """Host names where they are unique; the same host twice (one machine over time) gets its collection time,
    and if that too is the same, the file name."""
    hosts = [n.host for n in nodes]
    for n in nodes:
        n.label = n.host if hosts.count(n.host) == 1 else f"{n.host}@{_when(n.collected_at)}"
    labels = [n.label for n in nodes]
    for n in nodes:
        if labels.count(n.label) > 1:
            n.label = f"{n.host}:{Path(n.path).name}"


# ------------------------------------------------------------------------------------------------ facets

def facets(run: Any) -> dict[str, Any]:
    """Versions and GPUs of one node, from the same parsed views the checks use."""
    from rocmcheck.checks.context import CheckContext, known_or_none
    from rocmcheck.checks.rocm import detected_rocm_version

    f: Facts = run.facts
    ctx = run.context or CheckContext(f)
    pk = f.packages or {}
    # A fact the bundle does not know is left out (None), never read as absent.
    torch = known_or_none(lambda: ctx.torch) or {}
    amd_smi, nvidia_smi = known_or_none(lambda: ctx.amd_smi), known_or_none(lambda: ctx.nvidia_smi)
    driver = None
    if ctx.vendor == "amd":
        amd_version = (f.files.get("/sys/module/amdgpu/version") or "").strip()
        driver = f"amdgpu {amd_version}" if amd_version else (
            f"amdgpu {amd_smi.driver_version}" if amd_smi and amd_smi.driver_version else None)
    elif ctx.vendor == "nvidia" and nvidia_smi is not None and nvidia_smi.driver_version:
        driver = f"nvidia {nvidia_smi.driver_version}"
    triton = next((f"{n} {pk[n]}" if n != "triton" else str(pk[n]) for n in TRITON_PACKAGES if pk.get(n)), None)
    gpus = known_or_none(lambda: ctx.gpus) or []
    models = sorted({(g.product.name if g.product else g.name) or g.arch or "?" for g in gpus})
    return {
        "driver": driver,
        "rocm": known_or_none(lambda: detected_rocm_version(ctx)) if ctx.vendor == "amd" else None,
        "cuda": nvidia_smi.cuda_version if ctx.vendor == "nvidia" and nvidia_smi else None,
        "torch": torch.get("version") or pk.get("torch"),
        "triton": triton,
        "flash_attn": pk.get("flash-attn") or pk.get("flash_attn"),
        "deepspeed": pk.get("deepspeed"),
        "transformers": pk.get("transformers"),
        "os": f.os_info.get("name"),
        "kernel": f.platform.get("kernel"),
        "python": f.platform.get("python"),
        "gpu_count": len(gpus),
        "gpu_model": ", ".join(models) if models else None,
    }


# ------------------------------------------------------------------------------------------------ numbers

# metric key -> (label, unit, check id, path into the result's data). All are "bigger is better".
METRICS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "gemm_tflops": ("bf16 GEMM", "TFLOP/s", "probe.gemm_tflops", ("tflops",)),
    "copy_tbps": ("device copy bandwidth", "TB/s", "probe.copy_bandwidth", ("tb_per_s",)),
    "h2d_gbps": ("pinned host->device", "GB/s", "probe.host_bandwidth", ("h2d_gb_per_s",)),
    "d2h_gbps": ("pinned device->host", "GB/s", "probe.host_bandwidth", ("d2h_gb_per_s",)),
    "allreduce_busbw": ("all-reduce busbw in the node", "GB/s", "probe.collective", ("all_reduce", "busbw_gbps")),
    "allgather_busbw": ("all-gather busbw in the node", "GB/s", "probe.collective", ("all_gather", "busbw_gbps")),
    "cross_best_pair_busbw": ("cross-node all-reduce busbw (its best node pair)", "GB/s", "cluster.collective",
                              ("node", "best_pair_busbw_gbps")),
    "cross_local_busbw": ("all-reduce busbw among its own GPUs during the cross-node test", "GB/s",
                          "cluster.collective", ("node", "local_busbw_gbps")),
}


def _dig(data: Any, path: tuple[str, ...]) -> float | None:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return float(data) if isinstance(data, (int, float)) and not isinstance(data, bool) and data > 0 else None


def numbers(results: list[CheckResult]) -> dict[str, float]:
    by_id = {r.id: r for r in results}
    out = {}
    for key, (_label_text, _unit, check_id, path) in METRICS.items():
        r = by_id.get(check_id)
        value = _dig(r.data, path) if r is not None else None
        if value is not None:
            out[key] = value
    return out


def kernel_log_findings(results: list[CheckResult]) -> list[dict[str, Any]]:
    r = next((r for r in results if r.id == "health.kernel_log"), None)
    if r is None:
        return []
    return [f for f in r.data.get("findings") or [] if isinstance(f, dict) and f.get("severity") in ("fail", "warn")]


# ------------------------------------------------------------------------------------------------ writing

