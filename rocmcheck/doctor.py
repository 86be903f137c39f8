"""`rocmcheck doctor`: facts -> cheap checks -> (GPU probes) -> (smoke-train) -> one list of verdicts."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext, known_or_none
from rocmcheck.checks.health import annotate_link_with_bandwidth
from rocmcheck.facts.collect import Facts, collect_facts, gpu_device_paths
from rocmcheck.facts.redact import redact_tree
from rocmcheck.fixes import BUG_FIX, as_recorded, note
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
    level: int = 1  # GPU probes: 1 quick, 2 numerics, 3 stress (rocmcheck/probes/levels.py)
    duration_s: float | None = None  # level 3: seconds the stress probes run in all (None: their default)
    train_timeout_s: float = 300.0
    launch: Any = None  # facts.launch.Launch when run under a launcher (recorded in the bundle)
    across_nodes: bool = False  # the cross-node collective on the launcher's rendezvous
    across_timeout_s: float = 180.0
    python: Any = None  # facts.python_env.TargetPython: the interpreter whose stack is judged (None: rocmcheck's own)
    site_rules: Any = None  # knowledge.site.SiteRules from --knowledge (None: the shipped knowledge alone)
    train_skipped_by: str = "--no-train"  # what the skipped fine-tune's verdict names when train is False


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
        torch = known_or_none(lambda: ctx.torch) or {}  # a fact not collected is left out of the summary
        gpus = [f"{g.arch} {g.product.name if g.product else (g.name or '')}".strip()
                for g in known_or_none(lambda: ctx.gpus) or []]
        headline = (f"rocmcheck doctor — {f.os_info.get('name') or f.platform.get('system')}, "
                    f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
                    + (f" ({', '.join(sorted(set(gpus)))})" if gpus else "")
                    + (f", torch {torch.get('version')}" if torch.get("version") else ""))
        return {"vendor": ctx.vendor, "gpus": gpus, "os": f.os_info.get("name"), "kernel": f.platform.get("kernel"),
                "python": f.platform.get("python"), "torch": torch.get("version"), "headline": headline}


# Areas whose checks read the child-process probe of torch / flash-attn / DeepSpeed (versions: torch's ROCm and the
# installed packages against the known issues).
PYTHON_STACK_AREAS = {"torch", "triton", "flash_attn", "deepspeed", "rocm", "nvidia", "versions"}
# Areas whose checks read the installed packages: from that same child when it runs another interpreter
# (DoctorOptions.python), so judged with the stack then.
PACKAGE_AREAS = {"transformers", "extensions", "bitsandbytes"}


@dataclass(frozen=True)
class StagePlan:
    """What a live doctor run does, decided once before anything starts (plan_stages)."""

    python_probes: bool  # the stack child (torch, flash-attn, DeepSpeed) runs with the fact collection
    cluster: bool  # the cross-node collective, first
    probe_stage: bool  # the GPU probe stage has verdicts (a skip with --no-gpu-probes)
    probes: tuple[str, ...] | None  # the probes it runs, in order; None: names the stage refuses (it says so)
    probe_budget_s: float  # the stage's limit for those probes
    train: bool  # the fine-tune stage has verdicts (a skip with --no-train)
    before_train_s: float  # the longest the stages before the fine-tune may take


def plan_stages(opts: DoctorOptions, specs: list[Any]) -> StagePlan:
    """Which facts, which probes and whether the fine-tune runs: the one place a live run decides them. specs: the
    cheap checks that run (select_checks)."""
    probe_stage, train = _stage_wanted(opts, "probe"), _stage_wanted(opts, "train")
    probes: tuple[str, ...] | None = ()
    budget = 0.0
    if probe_stage and opts.gpu_probes:
        from rocmcheck.probes.catalog import BY_NAME
        from rocmcheck.probes.levels import stage_budget_s
        from rocmcheck.probes.stage import select_names

        try:
            probes = tuple(select_names(*_probe_filters(opts), opts.level))
        except (KeyError, ValueError):
            probes = None
        budget = stage_budget_s(opts.gpu_stage_timeout_s, opts.level, [BY_NAME[n] for n in probes or ()],
                                opts.duration_s)
    cluster = opts.across_nodes and _stage_wanted(opts, "cluster")
    before_train = _facts_wait_s(opts) + (opts.across_timeout_s if cluster else 0.0) + budget
    python = (any(s.area in PYTHON_STACK_AREAS for s in specs) or (probe_stage and opts.gpu_probes)
              or (train and opts.train))
    return StagePlan(python, cluster, probe_stage, probes, budget, train, before_train)


def _stage_wanted(opts: DoctorOptions, area: str) -> bool:
    if opts.only and area not in opts.only and not any(o.startswith(area + ".") for o in opts.only):
        return False
    return area not in opts.skip


def _gpu_present(ctx: CheckContext, results: list[CheckResult]) -> bool:
    torch = known_or_none(lambda: ctx.torch) or {}
    return bool(torch.get("device_count")) or any(r.id == "gpu.present" and r.status == Status.PASS for r in results)


def run_gpu_stage(ctx: CheckContext, opts: DoctorOptions, cheap: list[CheckResult],
                  on_result: Callable[[CheckResult], None] | None = None, progress: Any = None,
                  early: Any = None, plan: StagePlan | None = None) -> list[CheckResult]:
    """The probes the plan chose (plan_stages; made here when none is given); on_result hears each verdict the
    moment it is known, progress.begin each probe as it starts. early: the stage's main child, already started
    (start_early_probes): sent on, or let go."""
    try:
        return _gpu_stage(ctx, opts, cheap, on_result, progress, early, plan or plan_stages(opts, []))
    finally:
        if early is not None:
            early.stop()  # nothing when the stage sent it on; else it leaves without running a probe


def _host_facts(ctx: CheckContext, opts: DoctorOptions) -> Any:
    """What the fact collection found, as the probes' judges read it (probes.HostFacts): they never collect a fact
    themselves."""
    from rocmcheck.probes import HostFacts

    gpus, rocm = known_or_none(lambda: ctx.gpus) or [], known_or_none(lambda: ctx.rocm)
    return HostFacts(gpu_names=[g.name for g in gpus if g.name] or None,
                     smi_memory_bytes=[g.memory_bytes for g in gpus if g.memory_bytes] or None,
                     rocm_version=rocm.version if rocm is not None else None,
                     kernel_cmdline=ctx.facts.files.get("/proc/cmdline"),
                     numa_balancing=ctx.facts.files.get("/proc/sys/kernel/numa_balancing"),
                     site_rules=opts.site_rules)


def _rejudged(recorded: list[CheckResult], ctx: CheckContext, opts: DoctorOptions) -> list[CheckResult]:
    """A replay's recorded probe verdicts, those with a site floor judged again on their recorded numbers
    (probes/rejudge.py). The GPU is the recorded machine's first one, as the probes ran on device 0: its arch and
    name from the GPU tools' records, the name torch reported where the bundle has it."""
    from rocmcheck.probes.context import DeviceContext
    from rocmcheck.probes.rejudge import rejudge

    gpus = known_or_none(lambda: ctx.vendor_gpus()) or known_or_none(lambda: ctx.gpus) or []
    if not gpus:
        return recorded
    host = _host_facts(ctx, opts)
    torch = known_or_none(lambda: ctx.torch) or {}
    seen = torch.get("devices") if isinstance(torch, dict) else None
    first = seen[0] if isinstance(seen, list) and seen and isinstance(seen[0], dict) else {}
    name = first.get("name") if isinstance(first.get("name"), str) else gpus[0].name
    device = DeviceContext(vendor=gpus[0].vendor, name=name or "", arch=gpus[0].arch or "", count=len(gpus),
                           gpu_names=list(host.gpu_names or []), smi_memory_bytes=host.smi_memory_bytes,
                           rocm_version=host.rocm_version, kernel_cmdline=host.kernel_cmdline,
                           numa_balancing=host.numa_balancing, site_rules=opts.site_rules)
    return [rejudge(r, device) or r for r in recorded]


def _gpu_stage(ctx: CheckContext, opts: DoctorOptions, cheap: list[CheckResult],
               on_result: Callable[[CheckResult], None] | None, progress: Any, early: Any,
               plan: StagePlan) -> list[CheckResult]:
    if not opts.gpu_probes:
        return [skipped("GPU probes skipped (--no-gpu-probes)", id="probe.stage")]
    if not _gpu_present(ctx, cheap):
        return [skipped("GPU probes skipped: torch sees no GPU", id="probe.stage")]
    from rocmcheck.probes import run_gpu_stage as probes_stage

    host = _host_facts(ctx, opts)
    from rocmcheck.probes.stage import StageListener

    # The plan's probes by name; names it could not take go to the stage as given, which refuses them in its words
    only, skip = (set(plan.probes), None) if plan.probes is not None else _probe_filters(opts)
    shown = progress or _Quiet()
    listener = StageListener(result=on_result or (lambda result: None),
                             start=lambda name, number, total: shown.begin(f"GPU probe {number}/{total}: {name}"),
                             note=lambda name, text: getattr(shown, "note", lambda _text: None)(text))
    return probes_stage(timeout_s=opts.gpu_stage_timeout_s, host=host, only=only, level=opts.level,
                        duration_s=opts.duration_s, skip=skip, listener=listener, early=early)


def start_early_probes(opts: DoctorOptions, plan: StagePlan,
                       gpu_device_present: Callable[[], bool] | None = None) -> Any:
    """The GPU stage's main child, started now to import torch and set up the GPU while the facts are collected;
    it runs its probes only when the stage sends it on (probes/stage.py, EarlyMainChild). None when the plan runs no
    probes here, or no GPU device file exists (the stage then starts its own child, if it runs at all)."""
    if not plan.probes or opts.across_nodes or not (gpu_device_present or _gpu_device_present)():
        return None
    from rocmcheck.probes.stage import start_early_main_child

    return start_early_main_child(plan.probe_budget_s, set(plan.probes), None, level=opts.level,
                                  duration_s=opts.duration_s, wait_s=_facts_wait_s(opts))


def _gpu_device_present() -> bool:
    return any(os.path.exists(p) for p in gpu_device_paths())


def _probe_filters(opts: DoctorOptions) -> tuple[set[str] | None, set[str] | None]:
    """The probe names --only and --skip give (`probe.NAME`), each None when they name none."""
    only = {o.split(".", 1)[1] for o in opts.only if o.startswith("probe.")} or None
    skip = {o.split(".", 1)[1] for o in opts.skip if o.startswith("probe.")} or None
    return only, skip


def _facts_wait_s(opts: DoctorOptions) -> float:
    """The longest the fact collection and the checks on it may take."""
    return opts.deadline_s + opts.command_timeout_s + 60.0


def start_early_train(opts: DoctorOptions, plan: StagePlan) -> Any:
    """The smoke-train's child, started now to import while the facts are collected and the GPU probes run; it
    trains only when its stage sends it on, after the probes (train/doctor_stage.py, EarlyTrain). None when no
    smoke-train is wanted."""
    if not (opts.train and plan.train):
        return None
    from rocmcheck.train.doctor_stage import EarlyTrain

    return EarlyTrain(opts.train_timeout_s, plan.before_train_s, drift=opts.level >= 2, python=_python_of(opts))


def _python_of(opts: DoctorOptions) -> str | None:
    """The interpreter that runs the fine-tune's child: the one whose stack is judged (None: rocmcheck's own)."""
    return opts.python.executable if opts.python is not None else None


def run_train_stage(ctx: CheckContext, opts: DoctorOptions, early: Any = None,
                    progress: Any = None) -> list[CheckResult]:
    """early: the stage's child, already started (start_early_train): sent on here, or let go. progress: shows
    each training step (count, loss, tokens/s, time left) as the child reports it."""
    try:
        return _train_stage(ctx, opts, early, progress or _Quiet())
    finally:
        if early is not None:
            early.cancel()  # nothing once it was sent on; else the child exits without a run


def _train_stage(ctx: CheckContext, opts: DoctorOptions, early: Any, progress: Any) -> list[CheckResult]:
    if not opts.train:
        return [skipped(f"smoke-train skipped ({opts.train_skipped_by})", id="train.stage")]
    torch = known_or_none(lambda: ctx.torch) or {}
    if not torch.get("version"):
        return [skipped("smoke-train skipped: torch is not importable", id="train.stage")]
    from rocmcheck.train.config import TrainConfig
    from rocmcheck.train.doctor_stage import run_train_stage as train_stage

    device = "cuda" if torch.get("device_count") else "cpu"
    steps = TrainSteps(progress, device == "cpu")
    if device == "cpu":
        cfg = TrainConfig()
        progress.say(f"No GPU: the smoke-train fine-tune runs on the CPU, {cfg.steps} steps of {cfg.tokens_per_step:,} "
                     f"tokens; how long it takes is measured from its first {CPU_ESTIMATE_STEPS} steps and shown "
                     "next (--no-train skips it)")
    if early is not None:
        return early.go(device, on_step=steps)
    # --level 2 (numerics) and up: the run also trains its steps in fp32 and compares the curves (train.drift)
    return train_stage(timeout_s=opts.train_timeout_s, device=device, drift=opts.level >= 2, on_step=steps,
                       python=_python_of(opts))


# The CPU fine-tune's time is estimated once this many steps are done: the first step (allocation, first kernels)
# is left out of the pace, the next ones give it.
CPU_ESTIMATE_STEPS = 3


class TrainSteps:
    """The train stage's steps on the progress display: a count, loss, tokens/s and the time left; on the CPU also
    one line with the estimate of the whole run, once its first CPU_ESTIMATE_STEPS steps are measured."""

    def __init__(self, progress: Any, on_cpu: bool) -> None:
        self.progress, self.on_cpu = progress, on_cpu
        self.estimated = False

    def __call__(self, step: int, steps: int, event: dict[str, Any]) -> None:
        from rocmcheck.report.progress import duration
        from rocmcheck.train.report import step_text

        self.progress.count(step, steps, step_text(event.get("loss"), event.get("tokens_per_s")))
        if not self.on_cpu or self.estimated or step < min(CPU_ESTIMATE_STEPS, steps) or step >= steps:
            return
        self.estimated = True
        left = self.progress.time_left()
        if left is not None:
            speed = step_text(None, event.get("tokens_per_s"))
            self.progress.say(f"CPU fine-tune: about {duration(left)} more for the other {steps - step} steps "
                              f"(measured: the pace of steps 2-{step}" + (f", {speed}" if speed else "") + ")")


def _guarded(stage_id: str, run) -> list[CheckResult]:
    """A stage that raises (a rocmcheck bug) becomes one crash verdict; the report still prints."""
    try:
        return run()
    except Exception as exc:
        return [CheckResult(stage_id, Status.CRASH, f"this stage crashed: {type(exc).__name__}: {exc}", [], BUG_FIX)]


class _Quiet:
    """The progress interface (rocmcheck.report.progress.Progress) doing nothing: run_doctor without a person."""

    def begin(self, stage: str, limit_s: float | None = None) -> None:
        pass

    def count(self, done: int, total: int, detail: str = "") -> None:
        pass

    def say(self, text: str) -> None:
        pass

    def time_left(self) -> float | None:
        return None


def run_doctor(opts: DoctorOptions, facts: Facts | None = None,
               on_results: Callable[[list[CheckResult], list[CheckResult]], None] | None = None,
               progress: Any = None) -> DoctorRun:
    """Live when facts is None; otherwise re-diagnose recorded facts (a bundle) without touching the machine.

    on_results(new, revised) is called as verdicts become known: the areas that need no Python probe as soon as
    the system facts are in, the rest after the torch import, then each stage. A verdict given early and judged
    again on the whole facts comes back in `revised` when it changed (the returned run holds the final ones).
    progress.begin(stage) names what runs now."""
    start = time.monotonic()
    shown_to = on_results or (lambda new, revised: None)

    def emit(new: list[CheckResult], revised: list[CheckResult]) -> None:
        shown_to([_redacted(r) for r in new], [_redacted(r) for r in revised])

    progress = progress or _Quiet()
    source = "live" if facts is None else "bundle"
    specs = select_checks(opts.only, opts.skip)
    plan = plan_stages(opts, specs)
    early: list[CheckResult] = []
    # The smoke-train's child imports beside the facts and the GPU probes; it trains after them (stage overlap).
    pending_train = start_early_train(opts, plan) if facts is None else None
    pending_probes = start_early_probes(opts, plan) if facts is None else None
    if facts is None:
        needs_python = plan.python_probes

        def judge_early(partial: Facts) -> None:
            late = PYTHON_STACK_AREAS | (PACKAGE_AREAS if opts.python is not None else set())
            early_specs = [s for s in specs if s.area not in late]
            # Judged on the facts so far; what they print is redacted on the way out (emit).
            early.extend(run_checks(early_specs, CheckContext(partial, expected_archs=opts.expected_archs,
                                                          site_rules=opts.site_rules)))
            emit(list(early), [])
            if needs_python:
                progress.begin("importing torch, flash-attn, DeepSpeed (child process)", limit_s=opts.probe_timeout_s)

        progress.begin("collecting system facts (rocminfo, smi tools, /dev, /proc)", limit_s=opts.deadline_s)
        facts = collect_facts(deadline_s=opts.deadline_s, command_timeout_s=opts.command_timeout_s,
                              probe_timeout_s=opts.probe_timeout_s, python_probes=needs_python,
                              on_commands_done=judge_early, python=opts.python)
        # Tool outputs hold secrets too (hipconfig --full prints HIP_*/HSA_* variables): the checks see, and the
        # bundle keeps, only the redacted facts, so a bundle replays to the same verdicts.
        facts = _redacted_facts(facts)
    ctx = CheckContext(facts, expected_archs=opts.expected_archs, site_rules=opts.site_rules)
    results = run_checks(specs, ctx)
    shown = {(r.id, r.status, r.summary) for r in early}
    early_ids = {r.id for r in early}
    revised = [r for r in results if r.id in early_ids and (r.id, r.status, r.summary) not in shown]
    emit([r for r in results if r.id not in early_ids], revised)
    if facts.deadline_hit:
        late = CheckResult("doctor.deadline", Status.FAIL,
                           f"stopped waiting after {opts.deadline_s:g} s for: {', '.join(facts.deadline_hit)}",
                           [], note("something on this machine hangs; the verdicts naming those tools say which"),
                           area="doctor")
        results.append(late)
        emit([late], [])
    if source == "bundle":
        # GPU and training stages ran on the recorded machine; show what they said there. Their fixes come from the
        # file (anyone who can write the bundle folder wrote them): shown as notes, never as lines to paste.
        recorded = [_replayed(d) for d in facts.recorded_results if _stage_wanted(opts, d.get("area", ""))]
        if opts.site_rules is not None:  # a site floor judges the recorded probe rates again (probes/rejudge.py)
            recorded = _rejudged(recorded, ctx, opts)
        results.extend(recorded)
        emit(recorded, [])
    else:
        if opts.launch is not None:
            facts.launch = opts.launch.to_dict()
        staged: list[CheckResult] = []
        if plan.cluster:  # first: every node arrives at about the same time
            from rocmcheck.probes.across import run_cross_node_stage

            cross = _guarded("cluster.collective", lambda: run_cross_node_stage(opts.launch, opts.across_timeout_s))
            staged += cross
            emit(cross, [])
        if plan.probe_stage:
            if opts.gpu_probes:
                progress.begin("GPU probes (child process per probe)")
            shown: list[CheckResult] = []

            def show(result: CheckResult) -> None:  # each probe's verdict, printed the moment the stage has it
                shown.append(result)
                emit([result], [])

            new = _guarded("probe.stage", lambda: run_gpu_stage(ctx, opts, results, show, progress, pending_probes,
                                                                plan))
            staged += new
            emit([r for r in new if all(r is not s for s in shown)], [])
        if plan.train:
            if opts.train:
                progress.begin("smoke-train (the bundled tiny LLaMA)", limit_s=opts.train_timeout_s)
            new = _guarded("train.stage", lambda: run_train_stage(ctx, opts, pending_train, progress))
            staged += new
            emit(new, [])
        facts.recorded_results = [r.to_dict() for r in staged]
        results += staged
    annotate_link_with_bandwidth(results)
    return DoctorRun(facts, [_redacted(r) for r in results], time.monotonic() - start, source, ctx)


def _replayed(recorded: dict[str, Any]) -> CheckResult:
    """A stage verdict recorded in a bundle, as a replay (and compare) shows it: its shell fix becomes a note
    naming the recorded command (rocmcheck.fixes.as_recorded)."""
    result = CheckResult.from_dict(recorded)
    result.fix = as_recorded(result.fix, "recorded with this bundle")
    return result


def _redacted_facts(facts: Facts) -> Facts:
    return Facts.from_dict(redact_tree(facts.to_dict()))


def _redacted(result: CheckResult) -> CheckResult:
    """Verdicts quote tool output and error messages: no secret may reach the report."""
    return CheckResult.from_dict(redact_tree(result.to_dict()))


def bundle_document(run: DoctorRun) -> dict[str, Any]:
    from rocmcheck import __version__

    return redact_tree({"rocmcheck_bundle": 1, "tool_version": __version__, "facts": run.facts.to_dict()})


def save_bundle(run: DoctorRun, path: Path, *, force: bool = False) -> Path:
    """Write the bundle atomically (an old file stays whole if the write fails), every string redacted."""
    from rocmcheck.safe.files import write_atomic

    return write_atomic(path, json.dumps(bundle_document(run), indent=1, default=str), force=force)


# What a real bundle holds: a few dozen recorded results (the GPU probes' and smoke-train's verdicts, ~50 with
# every stage) and at most a few hundred entries in any field of its facts (env, files, commands, devices). A
# replay redacts and renders every one of them, so a bundle far past that (a damaged or hostile file: 200 000
# results took minutes) is refused with one line instead.
MAX_RECORDED_RESULTS = 1_000
MAX_BUNDLE_ENTRIES = 10_000  # per field of the facts, and lines of evidence per recorded result


def _too_many(facts: dict[str, Any]) -> str | None:
    """The first part of a bundle's facts that holds more than a real one could; None when none does."""
    recorded = facts.get("recorded_results")
    if isinstance(recorded, list) and len(recorded) > MAX_RECORDED_RESULTS:
        return f"{len(recorded)} recorded results (a real bundle holds at most {MAX_RECORDED_RESULTS})"
    for key, value in facts.items():
        if isinstance(value, (dict, list)) and len(value) > MAX_BUNDLE_ENTRIES:
            return f"{len(value)} entries in {key} (at most {MAX_BUNDLE_ENTRIES})"
    for i, result in enumerate(recorded if isinstance(recorded, list) else []):
        evidence = result.get("evidence") if isinstance(result, dict) else None
        if isinstance(evidence, list) and len(evidence) > MAX_BUNDLE_ENTRIES:
            return f"{len(evidence)} evidence lines in recorded result {i} (at most {MAX_BUNDLE_ENTRIES})"
    return None


def load_bundle(path: Path) -> Facts:
    """A saved bundle, read through the capped reader and the limited loader, its facts type-checked: a damaged
    or hostile file is a BadInput with one line, never a crash in a check."""
    from rocmcheck.errors import BadInput
    from rocmcheck.facts.bundle_types import type_problem
    from rocmcheck.safe.files import MAX_BUNDLE_BYTES
    from rocmcheck.safe.structured import load_file
    from rocmcheck.safe.text import MAX_ECHO_CHARS, excerpt

    try:
        # Non-finite floats are allowed: a NaN loss is a real, recorded result.
        doc = load_file(path, limit=MAX_BUNDLE_BYTES, what="bundle", fmt="json", allow_nonfinite=True)
    except BadInput as exc:
        raise BadInput(f"cannot read bundle {exc}") from None
    shown = excerpt(path)
    if not isinstance(doc, dict) or doc.get("rocmcheck_bundle") != 1 or "facts" not in doc:
        raise BadInput(f"{shown} is not a rocmcheck bundle (made by `rocmcheck doctor --out FILE`)")
    problem = (_too_many(doc["facts"]) or type_problem(doc["facts"])) if isinstance(doc["facts"], dict) \
        else "facts should be an object"
    if problem:
        raise BadInput(f"{shown}: damaged bundle: {problem}")
    try:
        facts = Facts.from_dict(doc["facts"])
        for recorded in facts.recorded_results:
            CheckResult.from_dict(recorded)  # the replay shows these: they must be whole
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise BadInput(f"{shown}: damaged bundle: {excerpt(exc, 2 * MAX_ECHO_CHARS)}") from None
    return facts


def _measured_rates(results: list[CheckResult]) -> dict[str, float]:
    """The rates the passing GPU probes measured, by floor key and in its unit (knowledge/floors.py)."""
    from rocmcheck.knowledge import floors
    from rocmcheck.probes.catalog.copy_bandwidth import TRANSFERBENCH_COPY_BYTES_FACTOR

    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    out: dict[str, float] = {}
    for r in results:
        if r.status != Status.PASS:
            continue  # a reference records a known-good node: a slow or failed probe sets no floor
        if r.id == "probe.gemm_tflops" and number(r.data.get("tflops")):
            out[floors.GEMM_BF16_TFLOPS] = number(r.data["tflops"])
        elif r.id == "probe.copy_bandwidth" and number(r.data.get("tb_per_s")):
            # TransferBench's unit, as the shipped floors: GB/s with a copy's bytes counted once
            out[floors.HBM_COPY_GBPS] = number(r.data["tb_per_s"]) * 1000 / TRANSFERBENCH_COPY_BYTES_FACTOR
        elif r.id == "probe.host_bandwidth":
            for key, name in ((floors.HOST_TO_DEVICE_GBPS, "h2d_gb_per_s"), (floors.DEVICE_TO_HOST_GBPS,
                                                                              "d2h_gb_per_s")):
                if number(r.data.get(name)):
                    out[key] = number(r.data[name])
    return out


def reference_document(run: DoctorRun) -> dict[str, Any]:
    """This run's node as a site rule file (knowledge/site.py reference_rules): what `--write-reference` writes."""
    import datetime

    from rocmcheck.checks.rocm import detected_rocm_version
    from rocmcheck.facts.parsers.host_tools import parse_amd_smi_firmware
    from rocmcheck.knowledge.site import reference_rules

    ctx = run.context or CheckContext(run.facts)
    firmware: dict[str, str] = {}
    res = run.facts.commands.get("amd-smi-firmware")
    per_gpu = parse_amd_smi_firmware(res.stdout) if res is not None and res.ok else {}
    for fw_id in sorted({f for gpu in per_gpu.values() for f in gpu}):
        seen = {gpu.get(fw_id) for gpu in per_gpu.values()}
        if len(seen) == 1 and None not in seen:  # one version on every GPU: a mixed node sets no expectation
            firmware[fw_id] = seen.pop()
    gpus = known_or_none(lambda: ctx.gpus) or []
    products = {g.product.name for g in gpus if g.product is not None}
    torch = known_or_none(lambda: ctx.torch) or {}
    amd = known_or_none(ctx.known_vendor) == "amd"
    node = run.facts.platform.get("node") or "this node"
    now = datetime.datetime.fromtimestamp(run.facts.collected_at or time.time(), datetime.timezone.utc)
    replayed = "a replayed bundle, " if run.source == "bundle" else ""
    return reference_rules(
        source=f"rocmcheck doctor --write-reference on {node} ({replayed}collected {now:%Y-%m-%d %H:%M} UTC)",
        read=f"{now:%Y-%m-%d}",
        amdgpu_module=(run.facts.files.get("/sys/module/amdgpu/version") or None) if amd else None,
        firmware=firmware, rocm=known_or_none(lambda: detected_rocm_version(ctx)) if amd else None,
        torch=torch.get("version"), product=products.pop() if len(products) == 1 else None,
        measured=_measured_rates(run.results))


def write_reference(run: DoctorRun, path: Path, *, force: bool = False) -> tuple[Path, list[str]]:
    """Write the reference atomically (never over an existing file without force); the path and what it records."""
    from rocmcheck.safe.files import write_atomic

    doc = reference_document(run)
    recorded = [k for k in ("driver", "firmware", "rocm", "torch") if k in doc]
    recorded += [f"{p} floors ({', '.join(m)})" for p, m in doc.get("products", {}).items()]
    return write_atomic(path, json.dumps(doc, indent=1) + "\n", force=force), recorded
