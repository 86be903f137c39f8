"""`rocmcheck doctor`: facts -> cheap checks -> (GPU probes) -> (smoke-train) -> one list of verdicts."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.facts.collect import Facts, collect_facts
from rocmcheck.facts.redact import redact_tree
from rocmcheck.result import CheckResult, Status, skipped


@dataclass
class DoctorOptions:
    expected_archs: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    gpu_probes: bool = True
    train: bool = True
    deadline_s: float = 60.0
    command_timeout_s: float = 20.0
    probe_timeout_s: float = 45.0
    gpu_stage_timeout_s: float = 120.0
    train_timeout_s: float = 300.0


@dataclass
class DoctorRun:
    facts: Facts
    results: list[CheckResult] = field(default_factory=list)
    duration_s: float = 0.0
    source: str = "live"
    context: CheckContext | None = None

    def machine_summary(self) -> dict[str, Any]:
        ctx = self.context or CheckContext(self.facts)  # the checks' context: its parsed tool outputs are reused
        f = self.facts
        gpus = [f"{g.arch} {g.product.name if g.product else (g.name or '')}".strip() for g in ctx.gpus]
        headline = (f"rocmcheck doctor — {f.os_info.get('name') or f.platform.get('system')}, "
                    f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" + (f" ({', '.join(sorted(set(gpus)))})" if gpus else "")
                    + (f", torch {(ctx.torch or {}).get('version')}" if ctx.torch and ctx.torch.get("version") else ""))
        return {"vendor": ctx.vendor, "gpus": gpus, "os": f.os_info.get("name"), "kernel": f.platform.get("kernel"),
                "python": f.platform.get("python"), "torch": (ctx.torch or {}).get("version"), "headline": headline}


# Areas whose checks read the child-process probe of torch / flash-attn / DeepSpeed.
PYTHON_STACK_AREAS = {"torch", "triton", "flash_attn", "deepspeed", "rocm", "nvidia"}


def _stage_wanted(opts: DoctorOptions, area: str) -> bool:
    if opts.only and area not in opts.only and not any(o.startswith(area + ".") for o in opts.only):
        return False
    return area not in opts.skip


def _gpu_present(ctx: CheckContext, results: list[CheckResult]) -> bool:
    torch = ctx.torch or {}
    return bool(torch.get("device_count")) or any(r.id == "gpu.present" and r.status == Status.PASS for r in results)


def run_gpu_stage(ctx: CheckContext, opts: DoctorOptions, cheap: list[CheckResult]) -> list[CheckResult]:
    if not opts.gpu_probes:
        return [skipped("GPU probes skipped (--no-gpu-probes)", id="probe.stage")]
    if not _gpu_present(ctx, cheap):
        return [skipped("GPU probes skipped: torch sees no GPU", id="probe.stage")]
    from rocmcheck.probes import run_gpu_stage as probes_stage

    names = [g.name for g in ctx.gpus if g.name] or None
    memory = [g.memory_bytes for g in ctx.gpus if g.memory_bytes] or None
    only = {o.split(".", 1)[1] for o in opts.only if o.startswith("probe.")} or None
    return probes_stage(timeout_s=opts.gpu_stage_timeout_s, gpu_names=names, smi_memory_bytes=memory, only=only)


def run_train_stage(ctx: CheckContext, opts: DoctorOptions) -> list[CheckResult]:
    if not opts.train:
        return [skipped("smoke-train skipped (--no-train)", id="train.stage")]
    torch = ctx.torch or {}
    if not torch.get("version"):
        return [skipped("smoke-train skipped: torch is not importable", id="train.stage")]
    from rocmcheck.train.doctor_stage import run_train_stage as train_stage

    device = "cuda" if torch.get("device_count") else "cpu"
    return train_stage(timeout_s=opts.train_timeout_s, device=device)


def _guarded(stage_id: str, run) -> list[CheckResult]:
    """A stage that raises (a rocmcheck bug) becomes one crash verdict; the report still prints."""
    try:
        return run()
    except Exception as exc:
        return [CheckResult(stage_id, Status.CRASH, f"this stage crashed: {type(exc).__name__}: {exc}", [],
                            "This is a rocmcheck bug; please report it with `rocmcheck doctor --save-bundle FILE`.")]


def run_doctor(opts: DoctorOptions, facts: Facts | None = None) -> DoctorRun:
    """Live when facts is None; otherwise re-diagnose recorded facts (a bundle) without touching the machine."""
    start = time.monotonic()
    source = "live" if facts is None else "bundle"
    specs = select_checks(opts.only, opts.skip)
    if facts is None:
        needs_python = (any(s.area in PYTHON_STACK_AREAS for s in specs)
                        or (opts.gpu_probes and _stage_wanted(opts, "probe"))
                        or (opts.train and _stage_wanted(opts, "train")))
        facts = collect_facts(deadline_s=opts.deadline_s, command_timeout_s=opts.command_timeout_s,
                              probe_timeout_s=opts.probe_timeout_s, python_probes=needs_python)
        # Tool outputs hold secrets too (hipconfig --full prints HIP_*/HSA_* variables): the checks see, and the
        # bundle keeps, only the redacted facts, so a bundle replays to the same verdicts.
        facts = Facts.from_dict(redact_tree(facts.to_dict()))
    ctx = CheckContext(facts, expected_archs=opts.expected_archs)
    results = run_checks(specs, ctx)
    if facts.deadline_hit:
        results.append(CheckResult("doctor.deadline", Status.FAIL,
                                   f"stopped waiting after {opts.deadline_s:g} s for: {', '.join(facts.deadline_hit)}",
                                   [], "Something on this machine hangs; the verdicts naming those tools say which.",
                                   area="doctor"))
    if source == "bundle":
        # GPU and training stages ran on the recorded machine; show what they said there.
        results.extend(CheckResult.from_dict(d) for d in facts.recorded_results
                       if _stage_wanted(opts, d.get("area", "")))
    else:
        staged: list[CheckResult] = []
        if _stage_wanted(opts, "probe"):
            staged += _guarded("probe.stage", lambda: run_gpu_stage(ctx, opts, results))
        if _stage_wanted(opts, "train"):
            staged += _guarded("train.stage", lambda: run_train_stage(ctx, opts))
        facts.recorded_results = [r.to_dict() for r in staged]
        results += staged
    # Verdicts quote tool output and error messages: no secret may reach the report.
    results = [CheckResult.from_dict(redact_tree(r.to_dict())) for r in results]
    return DoctorRun(facts, results, time.monotonic() - start, source, ctx)


def save_bundle(run: DoctorRun, path: Path, *, force: bool = False) -> Path:
    """Write the bundle atomically (an old file stays whole if the write fails), every string redacted."""
    from rocmcheck import __version__
    from rocmcheck.facts.redact import redact_tree
    from rocmcheck.safe.files import write_atomic

    doc = redact_tree({"rocmcheck_bundle": 1, "tool_version": __version__, "facts": run.facts.to_dict()})
    return write_atomic(path, json.dumps(doc, indent=1, default=str), force=force)


class BundleError(ValueError):
    pass


def load_bundle(path: Path) -> Facts:
    """A saved bundle, read through the capped reader and the limited loader, its facts type-checked: a damaged
    or hostile file is a BundleError with one line, never a crash in a check."""
    from rocmcheck.facts.bundle_types import type_problem
    from rocmcheck.safe.files import MAX_BUNDLE_BYTES, UnreadableFile
    from rocmcheck.safe.structured import load_file

    try:
        # Non-finite floats are allowed: a NaN loss is a real, recorded result.
        doc = load_file(path, limit=MAX_BUNDLE_BYTES, what="bundle", fmt="json", allow_nonfinite=True)
    except UnreadableFile as exc:
        raise BundleError(f"cannot read bundle {exc}") from None
    if not isinstance(doc, dict) or doc.get("rocmcheck_bundle") != 1 or "facts" not in doc:
        raise BundleError(f"{path} is not a rocmcheck bundle (made by `rocmcheck doctor --save-bundle FILE`)")
    problem = type_problem(doc["facts"]) if isinstance(doc["facts"], dict) else "facts should be an object"
    if problem:
        raise BundleError(f"{path}: damaged bundle: {problem}")
    try:
        facts = Facts.from_dict(doc["facts"])
        for recorded in facts.recorded_results:
            CheckResult.from_dict(recorded)  # the replay shows these: they must be whole
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise BundleError(f"{path}: damaged bundle: {exc}") from None
    return facts
