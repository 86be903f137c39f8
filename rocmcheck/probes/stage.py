"""doctor's GPU stage, parent side: starts the probe child(ren), reads their JSON, and turns every outcome -
result, skip, error, hang, crash, garbage - into CheckResults. No torch here.

Shape: one child imports torch once and reports the devices first (no GPU -> every probe skips, one child,
about as long as `import torch`). The same child then runs the probes in sequence, each under its own
watchdog. When a probe hangs or kills the child, that probe gets the verdict and a fresh child runs the rest
while the stage budget lasts. The collective runs in its own child (one process per GPU), started once the main
child is done and more than one GPU is there, so it never disturbs the performance probes. The doctor may start
the main child ahead, while it collects its facts (start_early_main_child): that child imports torch and sets up
the device, then waits for the stage's word on its stdin (rocmcheck/child.py, Word).

Which probes run: the ones asked for by name, else those of the doctor level (rocmcheck/probes/levels.py), less
any skipped by name. Each verdict goes to the caller's listener the moment it is known (a result as its event
arrives, while the child goes on with the next probe), together with each probe's start and progress notes, all
on the caller's thread; the returned list holds the same verdicts in run order."""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from rocmcheck.child import ChildRun, Word, child_env, run_child
from rocmcheck.fixes import Fix, collective_hang_fix, shell
from rocmcheck.probes.catalog import BY_NAME, PROBE_NAMES
from rocmcheck.probes.context import DeviceContext, HostFacts
from rocmcheck.probes.gpu_fault import hw_exception_verdict
from rocmcheck.probes.hints import error_fix, hang_fix
from rocmcheck.probes.levels import DEFAULT_LEVEL, durations, names_at
from rocmcheck.probes.protocol import ChildReport, device_problem, parse_child_output, result_problem
from rocmcheck.probes.spec import Probe
from rocmcheck.result import CheckResult, Status, failed, skipped

MAIN_CHILD = "rocmcheck.probes.child"
# The stage's own verdict, when the GPU could not be initialised at all (every probe then skips).
DEVICE_ID = "probe.device"
MIN_RELAUNCH_S = 5.0  # importing torch again costs seconds: do not start a child with less than this left
# Env variables worth showing next to the verdicts (they change which kernels run).
RELEVANT_ENV = ("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL", "FLASH_ATTENTION_TRITON_AMD_ENABLE",
                "TORCH_BLAS_PREFER_HIPBLASLT", "PYTORCH_TUNABLEOP_ENABLED", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NCCL_P2P_DISABLE")
_REPRODUCE_INIT = shell("python -c 'import torch; print(torch.cuda.is_available(), torch.cuda.device_count())'",
                        "reproduce it alone; then check dmesg")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _report_bug(probe: Probe) -> Fix:
    return shell("rocmcheck probe {name} --json", "a rocmcheck bug: please report it with that output",
                 name=probe.name)


def died_verdict(probe: Probe, run: ChildRun, ctx: DeviceContext, per_probe_s: float) -> CheckResult:
    """The probe that was running when its child hung, crashed or exited."""
    name, cmd = probe.name, run.command
    tail = run.stderr_tail()
    fault = hw_exception_verdict(probe.id, name, cmd.stderr, ctx.label())  # ROCr's "HW Exception ... GPU Hang"
    if fault is not None:
        return fault
    if run.hung:
        limit = per_probe_s if run.watchdog_fired else cmd.timeout_s
        if probe.child is not None:  # the collective: the kernel command line and NUMA setting explain most hangs
            evidence, fix = collective_hang_fix(ctx.vendor, ctx.kernel_cmdline, ctx.numa_balancing)
        else:
            evidence, fix = [], hang_fix(name, ctx.vendor)
        return failed(f"{name} hung: it did not finish within {limit:g} s on {ctx.label()}", fix,
                      evidence + [f"stderr: {line}" for line in tail], hung=True, timeout_s=limit, id=probe.id)
    if cmd.returncode is not None and cmd.returncode < 0:
        last = tail[-1] if tail else "(no stderr)"
        return failed(f"{name} crashed the probe process ({_signal_name(-cmd.returncode)}): {last}",
                      hang_fix(name, ctx.vendor), [f"stderr: {line}" for line in tail], signal=-cmd.returncode,
                      id=probe.id)
    why = cmd.describe_failure() if cmd.returncode else "the probe process ended without a result"
    return failed(f"{name} died: {why}" + (f": {tail[-1]}" if tail and cmd.returncode == 0 else ""),
                  hang_fix(name, ctx.vendor), [f"stderr: {line}" for line in tail], returncode=cmd.returncode,
                  id=probe.id)


def result_verdict(probe: Probe, event: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    """A probe's result event -> its verdict, by the probe's own judge. A judge that cannot read the data is
    rocmcheck's bug: CRASH."""
    name = probe.name
    outcome = event["outcome"]
    if outcome == "skip":
        return skipped(f"{name} skipped: {event['reason']}", id=probe.id)
    if outcome == "error":
        meaning, fix = error_fix(event["error"], ctx.vendor, ctx.arch, name, ctx.rocm_version)
        return failed(f"{name} failed on {ctx.label()}: {event['error']} ({meaning})", fix,
                      list(event.get("traceback") or [])[-5:], id=probe.id)
    try:
        result = probe.judge(event["data"], ctx)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
        return CheckResult(probe.id, Status.CRASH, f"{name}: rocmcheck could not read the probe's measurements "
                           f"({type(exc).__name__}: {exc})", [json.dumps(event.get("data"), default=str)[:300]],
                           _report_bug(probe))
    result.data.setdefault("seconds", event.get("seconds"))
    return result


def garbage_verdict(probe: Probe, why: str, run: ChildRun) -> CheckResult:
    return CheckResult(probe.id, Status.CRASH, f"{probe.name}: the probe process reported {why}",
                       [f"stderr: {line}" for line in run.stderr_tail()], _report_bug(probe))


def _init_failure(names: list[str], run: ChildRun, report: ChildReport) -> list[CheckResult]:
    """The child never told us about the devices: torch import or GPU init hung, crashed, or spoke garbage."""
    cmd = run.command
    if run.hung:
        why = f"importing torch / initialising the GPU hung (no answer within {cmd.timeout_s:g} s)"
    elif cmd.returncode is not None and cmd.returncode < 0:
        why = f"importing torch / initialising the GPU crashed ({_signal_name(-cmd.returncode)})"
    elif report.device is not None:
        why = f"the device report is unreadable ({device_problem(report.device)})"
    else:
        why = f"the probe process gave no device report ({cmd.describe_failure()})"
    results = [failed(f"GPU probes could not start: {why}", _REPRODUCE_INIT,
                      [f"stderr: {line}" for line in run.stderr_tail()], id=DEVICE_ID)]
    results += [skipped(f"{n} not run: the GPU could not be initialised (see {DEVICE_ID})", id=BY_NAME[n].id)
                for n in names]
    return results


def _ignore(*_args: Any) -> None:
    pass


@dataclass
class StageListener:
    """What the caller hears while the stage runs, each on the caller's own thread: `result(verdict)` once per
    verdict, the moment it is known; `start(name, number, total)` when a probe starts; `note(name, text)` when a
    running probe reports progress (a long stress probe)."""

    result: Callable[[CheckResult], None] = _ignore
    start: Callable[[str, int, int], None] = _ignore
    note: Callable[[str, str], None] = _ignore


def select_names(only: set[str] | None = None, skip: set[str] | None = None,
                 level: int = DEFAULT_LEVEL) -> list[str]:
    """The probes to run, in run order: those named in `only`, else the level's, less those in `skip`."""
    unknown = (set(only or ()) | set(skip or ())) - set(PROBE_NAMES)
    if unknown:
        raise ValueError(f"unknown probe(s): {', '.join(sorted(unknown))}; valid: {', '.join(PROBE_NAMES)}")
    chosen = set(only) if only is not None else set(names_at(level))
    return [n for n in PROBE_NAMES if n in chosen and n not in (skip or ())]


class _Verdicts:
    """Every verdict of the stage, by probe name (or DEVICE_ID), each handed to the listener once, when first put."""

    def __init__(self, listener: StageListener) -> None:
        self.by_name: dict[str, CheckResult] = {}
        self.listener = listener

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def put(self, name: str, verdict: CheckResult) -> None:
        if name not in self.by_name:
            self.by_name[name] = verdict
            self.listener.result(verdict)


def run_stage(timeout_s: float = 60.0, host: HostFacts | None = None, only: set[str] | None = None,
              allow_build: bool = False, cpu: bool = False, python: str | None = None,
              main_child: str = MAIN_CHILD, collective_child: str | None = None, *, level: int = DEFAULT_LEVEL,
              duration_s: float | None = None, skip: set[str] | None = None,
              listener: StageListener | None = None, early: EarlyMainChild | None = None) -> list[CheckResult]:
    """Run the selected probes (select_names: `only` by name, else the `level`'s, less `skip`) within timeout_s
    seconds overall. host: what the caller collected about the machine (the judges read it; nothing is collected
    here). duration_s: what the level-3 probes share (levels.durations). listener: hears every verdict as it is
    known. cpu=True runs the probe code on the CPU at small sizes: for tests and debugging, not a verdict on a GPU.
    early: the main child started ahead (start_early_main_child), used when its plan is this stage's and stopped
    otherwise."""
    names = select_names(only, skip, level)
    host = host or HostFacts()
    python = python or sys.executable
    listener = listener or StageListener()
    verdicts = _Verdicts(listener)
    env = child_env()
    deadline = time.monotonic() + timeout_s
    seconds = durations([BY_NAME[n] for n in names], duration_s)
    main = [n for n in names if BY_NAME[n].child is None]
    # Probes with a child of their own (the collective: one process per GPU), run after the main child's.
    launchers = [_CollectiveLauncher(BY_NAME[n], python, collective_child or BY_NAME[n].child, env, cpu, deadline)
                 for n in names if BY_NAME[n].child is not None]
    try:
        ctx = _main_child_probes(names, main, deadline, python, main_child, env, cpu, allow_build, host, timeout_s,
                                 seconds, verdicts, early)
        for launcher in launchers:
            if ctx is not None:
                name = launcher.probe.name
                listener.start(name, names.index(name) + 1, len(names))
                verdicts.put(name, launcher.verdict(ctx))
    finally:
        if early is not None:
            early.stop()
    head = [verdicts.by_name[DEVICE_ID]] if DEVICE_ID in verdicts else []  # init failure: one fail, then skips
    return head + [verdicts.by_name[n] for n in names]


class _StreamingChild:
    """run_child in a daemon thread of its own, started at once, its events queued as they arrive; consume hands
    each to `take` on the caller's thread and returns the ChildRun at its end. Ctrl-C here is not held up by the
    thread (the CLI ends the child)."""

    def __init__(self, module: str, plan: dict[str, Any], timeout_s: float, env: dict[str, str], python: str,
                 word: Word | None = None) -> None:
        self.plan = plan
        self._events: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._done: list[ChildRun] = []
        self._worker = threading.Thread(
            target=lambda: self._done.append(run_child(module, plan, timeout_s, env=env, python=python,
                                                       on_event=self._events.put, word=word)),
            name="rocmcheck-probe-child", daemon=True)
        self._worker.start()

    def consume(self, take: Callable[[dict[str, Any]], None]) -> ChildRun:
        while self._worker.is_alive():
            try:
                take(self._events.get(timeout=0.1))
            except queue.Empty:
                continue
        self._worker.join()
        while True:  # what arrived between the last look and the end
            try:
                take(self._events.get_nowait())
            except queue.Empty:
                break
        return self._done[0]

    def done(self) -> bool:
        return not self._worker.is_alive()

    def join(self) -> None:
        self._worker.join()


class EarlyMainChild:
    """The main probe child started ahead (start_early_main_child), while the doctor collects its facts: it imports
    torch, reports the device and waits for its word (rocmcheck/child.py, Word). run_stage sends it on when its plan
    is the stage's own (take); stop lets it go. A stop after take changes nothing, so a caller stops it on every way
    out."""

    def __init__(self, plan: dict[str, Any], timeout_s: float, env: dict[str, str], python: str,
                 main_child: str) -> None:
        self._word = Word()
        self._child = _StreamingChild(main_child, {**plan, "held_s": timeout_s}, timeout_s, env, python, self._word)

    def take(self, plan: dict[str, Any]) -> _StreamingChild | None:
        """The running child, sent on, when it was started to run what `plan` runs (its timeouts were reckoned from
        the same stage budget a moment earlier) and is still there; None otherwise (it is stopped, and the stage
        starts its own)."""
        if self._word.said or self._child.done() or _what_runs(self._child.plan) != _what_runs(plan):
            self.stop()
            return None
        self._word.go()
        return self._child

    def stop(self) -> None:
        """Never leave it waiting: its stdin ends unless it was sent on."""
        self._word.stop()


def start_early_main_child(timeout_s: float, only: set[str] | None = None, skip: set[str] | None = None, *,
                           level: int = DEFAULT_LEVEL, duration_s: float | None = None, wait_s: float = 0.0,
                           allow_build: bool = False, cpu: bool = False, python: str | None = None,
                           main_child: str = MAIN_CHILD) -> EarlyMainChild | None:
    """The main child of run_stage(timeout_s, only=only, skip=skip, level=level, duration_s=duration_s), started
    now; it waits up to wait_s for its stage, then gets the stage's own timeout_s. None when the stage would have
    no main child, or refuses the names (it says so itself)."""
    try:
        names = select_names(only, skip, level)
    except (KeyError, ValueError):
        return None
    main = [n for n in names if BY_NAME[n].child is None]
    if not main:
        return None
    seconds = durations([BY_NAME[n] for n in names], duration_s)
    plan = _main_plan(main, seconds, allow_build, cpu, timeout_s)
    return EarlyMainChild(plan, wait_s + timeout_s, child_env(), python or sys.executable, main_child)


def _what_runs(plan: dict[str, Any]) -> tuple:
    """A main child's plan without its timeouts: the probes in order, their durations, and how they run."""
    return ([p[0] for p in plan.get("probes", [])], plan.get("durations"), plan.get("allow_build"), plan.get("cpu"))


def _main_plan(pending: list[str], seconds: dict[str, float], allow_build: bool, cpu: bool,
               remaining: float) -> dict[str, Any]:
    """The main child's request for the probes still pending, with `remaining` seconds of the stage left."""
    return {"probes": [[n, max(1.0, min(BY_NAME[n].limit(allow_build, seconds.get(n)), remaining - 1))]
                       for n in pending],
            "durations": {n: seconds[n] for n in pending if n in seconds},
            "allow_build": allow_build, "cpu": cpu, "init_timeout_s": max(1.0, remaining - 1)}


class _Events:
    """One child's events as they arrive: the device context from the device event, each probe's start, note and
    result (judged at once, so its verdict is known while the child runs the next probe)."""

    def __init__(self, names: list[str], pending: list[str], ctx: DeviceContext | None, host: HostFacts, cpu: bool,
                 verdicts: _Verdicts) -> None:
        self.names, self.pending, self.ctx = names, pending, ctx
        self.host, self.cpu, self.verdicts = host, cpu, verdicts

    def take(self, event: dict[str, Any]) -> None:
        kind, name = event.get("event"), event.get("probe")
        if kind == "device" and self.ctx is None and not device_problem(event) and event["available"]:
            self.ctx = DeviceContext.from_device_event(event, self.host,
                                                       {k: os.environ[k] for k in RELEVANT_ENV if k in os.environ})
            if self.cpu:
                self.ctx.vendor = "cpu"
        if not isinstance(name, str) or name not in self.pending or name in self.verdicts:
            return
        if kind == "start":
            self.verdicts.listener.start(name, self.names.index(name) + 1, len(self.names))
        elif kind == "note" and isinstance(event.get("text"), str):
            self.verdicts.listener.note(name, event["text"])
        elif kind == "result" and self.ctx is not None and result_problem(event) is None:
            self.verdicts.put(name, result_verdict(BY_NAME[name], event, self.ctx))


def _main_child_probes(names: list[str], main: list[str], deadline: float, python: str, main_child: str,
                       env: dict[str, str], cpu: bool, allow_build: bool, host: HostFacts, timeout_s: float,
                       seconds: dict[str, float], verdicts: _Verdicts,
                       early: EarlyMainChild | None = None) -> DeviceContext | None:
    """Run the main child's probes (the one started ahead, `early`, when it fits; relaunching it after a probe
    that hung or killed it), putting every verdict; the device context, or None when there is no GPU to run on
    (every probe then has its skip or the init fail)."""
    pending = list(main)
    ctx: DeviceContext | None = None

    while ctx is None or pending:
        remaining = deadline - time.monotonic()
        if ctx is not None and remaining < MIN_RELAUNCH_S:
            break
        plan = _main_plan(pending, seconds, allow_build, cpu, remaining)
        events = _Events(names, pending, ctx, host, cpu, verdicts)
        child = early.take(plan) if early is not None and ctx is None else None
        if child is None:
            child = _StreamingChild(main_child, plan, max(1.0, remaining), env, python)
        run = child.consume(events.take)
        report = parse_child_output(run)
        if ctx is None:
            ctx = events.ctx
            if ctx is None:
                if report.device is None or device_problem(report.device):
                    failure = _init_failure(names, run, report)
                    verdicts.put(DEVICE_ID, failure[0])
                    for n, r in zip(names, failure[1:]):
                        verdicts.put(n, r)
                else:  # the child answered: torch cannot be imported, or it sees no GPU
                    for n in names:
                        verdicts.put(n, skipped(f"{n} skipped: {report.device['reason']}", id=BY_NAME[n].id))
                return None
        for name, event in report.results.items():
            if name in pending and name not in verdicts:
                verdicts.put(name, result_verdict(BY_NAME[name], event, ctx))
        for name, why in report.bad.items():
            if name in pending and name not in verdicts:
                verdicts.put(name, garbage_verdict(BY_NAME[name], why, run))
        culprit = report.unfinished()
        if culprit in pending and culprit not in verdicts:
            verdicts.put(culprit, died_verdict(BY_NAME[culprit], run, ctx, plan_timeout(plan, culprit)))
        progressed = [n for n in pending if n in verdicts]
        pending = [n for n in pending if n not in verdicts]
        if report.done or not progressed:
            break  # finished, or the child died between probes: do not loop on it

    for name in pending:
        verdicts.put(name, skipped(f"{name} not run: the GPU stage's {timeout_s:g} s budget ran out "
                                   f"(run it alone: rocmcheck probe {name})", id=BY_NAME[name].id))
    return ctx


def plan_timeout(plan: dict[str, Any], name: str) -> float:
    return next((t for n, t in plan["probes"] if n == name), 0.0)


class _CollectiveLauncher:
    """The collective child, run once the main child's probes are done."""

    def __init__(self, probe: Probe, python: str, module: str, env: dict[str, str], cpu: bool,
                 deadline: float) -> None:
        self.probe = probe
        self.python, self.module, self.env, self.cpu, self.deadline = python, module, env, cpu, deadline

    def verdict(self, ctx: DeviceContext) -> CheckResult:
        probe, name = self.probe, self.probe.name
        if ctx.count < 2 and ctx.vendor != "cpu":
            return skipped(f"{name} skipped: {ctx.count} GPU visible, nothing to all-reduce across", id=probe.id)
        remaining = self.deadline - time.monotonic()
        if remaining < MIN_RELAUNCH_S:
            return skipped(f"{name} not run: the GPU stage's budget ran out (run it alone: rocmcheck probe {name})",
                           id=probe.id)
        # world 0: the child counts the GPUs itself (the parent does not import torch); tests use 2 CPU ranks.
        request = {"world": 2 if self.cpu else 0, "backend": "gloo" if self.cpu else "nccl",
                   "timeout": min(probe.timeout_s, remaining), **({"mib": 1} if self.cpu else {})}
        run = run_child(self.module, request, remaining, env=self.env, python=self.python)
        report = parse_child_output(run)
        if name in report.results:
            return result_verdict(probe, report.results[name], ctx)
        if name in report.bad:
            return garbage_verdict(probe, report.bad[name], run)
        return died_verdict(probe, run, ctx, remaining)
