"""doctor's GPU stage, parent side: starts the probe child(ren), reads their JSON, and turns every outcome -
result, skip, error, hang, crash, garbage - into CheckResults. No torch here.

Shape: one child imports torch once and reports the devices first (no GPU -> every probe skips, one child,
about as long as `import torch`). The same child then runs the probes in sequence, each under its own
watchdog. When a probe hangs or kills the child, that probe gets the verdict and a fresh child runs the rest
while the stage budget lasts. The collective runs in its own child (one process per GPU), started together
with the main child so its torch imports and process-group set-up overlap the other probes; it waits on a
"go" file and only touches the GPUs' interconnect once the main child is done, so it does not disturb the
performance probes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from rocmcheck.child import child_env, run_child
from rocmcheck.probes.catalog import BY_NAME, DEEPSPEED_BUILD_TIMEOUT_S, PROBE_NAMES, probe_id
from rocmcheck.probes.hints import collective_hang_hints, error_fix, hang_fix
from rocmcheck.probes.protocol import ChildReport, device_problem, parse_child_output
from rocmcheck.probes.smi_memory import read_smi_memory_bytes
from rocmcheck.probes.verdicts import JUDGES, DeviceContext
from rocmcheck.result import CheckResult, Status, failed, skipped
from rocmcheck.runner import CommandResult

MAIN_CHILD = "rocmcheck.probes.child"
COLLECTIVE_CHILD = "rocmcheck.probes.collective"
MIN_RELAUNCH_S = 5.0  # importing torch again costs seconds: do not start a child with less than this left
# Env variables worth showing next to the verdicts (they change which kernels run).
RELEVANT_ENV = ("TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL", "FLASH_ATTENTION_TRITON_AMD_ENABLE",
                "TORCH_BLAS_PREFER_HIPBLASLT", "PYTORCH_TUNABLEOP_ENABLED", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NCCL_P2P_DISABLE")


def _stderr_tail(cmd: CommandResult, n: int = 5) -> list[str]:
    return [line for line in cmd.stderr.strip().splitlines() if line.strip()][-n:]


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def died_verdict(name: str, cmd: CommandResult, ctx: DeviceContext, per_probe_s: float) -> CheckResult:
    """The probe that was running when its child hung, crashed or exited."""
    pid = probe_id(name)
    tail = _stderr_tail(cmd)
    watchdog = any(line.startswith("Timeout (") for line in cmd.stderr.splitlines())
    if cmd.timed_out or watchdog:
        limit = per_probe_s if watchdog else cmd.timeout_s
        evidence, fix = (collective_hang_hints(ctx.vendor) if name == "collective" else ([], hang_fix(name, ctx.vendor)))
        return failed(f"{name} hung: it did not finish within {limit:g} s on {ctx.label()}", fix,
                      evidence + [f"stderr: {line}" for line in tail], hung=True, timeout_s=limit, id=pid)
    if cmd.returncode is not None and cmd.returncode < 0:
        last = tail[-1] if tail else "(no stderr)"
        return failed(f"{name} crashed the probe process ({_signal_name(-cmd.returncode)}): {last}",
                      hang_fix(name, ctx.vendor), [f"stderr: {line}" for line in tail], signal=-cmd.returncode, id=pid)
    why = cmd.describe_failure() if cmd.returncode else "the probe process ended without a result"
    return failed(f"{name} died: {why}" + (f": {tail[-1]}" if tail and cmd.returncode == 0 else ""),
                  hang_fix(name, ctx.vendor), [f"stderr: {line}" for line in tail], returncode=cmd.returncode, id=pid)


def result_verdict(name: str, event: dict[str, Any], ctx: DeviceContext) -> CheckResult:
    """A probe's result event -> its verdict. A judge that cannot read the data is rocmcheck's bug: CRASH."""
    pid = probe_id(name)
    outcome = event["outcome"]
    if outcome == "skip":
        return skipped(f"{name} skipped: {event['reason']}", id=pid)
    if outcome == "error":
        meaning, fix = error_fix(event["error"], ctx.vendor, ctx.arch, name)
        return failed(f"{name} failed on {ctx.label()}: {event['error']} ({meaning})", fix,
                      list(event.get("traceback") or [])[-5:], id=pid)
    try:
        result = JUDGES[name](event["data"], ctx)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
        return CheckResult(pid, Status.CRASH, f"{name}: rocmcheck could not read the probe's measurements "
                           f"({type(exc).__name__}: {exc})", [json.dumps(event.get("data"), default=str)[:300]],
                           "please report this as a rocmcheck bug with: rocmcheck probe " + name + " --json")
    result.data.setdefault("seconds", event.get("seconds"))
    return result


def garbage_verdict(name: str, why: str, cmd: CommandResult) -> CheckResult:
    return CheckResult(probe_id(name), Status.CRASH, f"{name}: the probe process reported {why}",
                       [f"stderr: {line}" for line in _stderr_tail(cmd)],
                       "please report this as a rocmcheck bug with: rocmcheck probe " + name + " --json")


def _per_probe_timeout(name: str, allow_build: bool) -> float:
    if name == "deepspeed_ops" and allow_build:
        return DEEPSPEED_BUILD_TIMEOUT_S
    return BY_NAME[name].timeout_s


def _init_failure(names: list[str], cmd: CommandResult, report: ChildReport) -> list[CheckResult]:
    """The child never told us about the devices: torch import or GPU init hung, crashed, or spoke garbage."""
    tail = _stderr_tail(cmd)
    if cmd.timed_out or any(line.startswith("Timeout (") for line in cmd.stderr.splitlines()):
        why = f"importing torch / initialising the GPU hung (no answer within {cmd.timeout_s:g} s)"
    elif cmd.returncode is not None and cmd.returncode < 0:
        why = f"importing torch / initialising the GPU crashed ({_signal_name(-cmd.returncode)})"
    elif report.device is not None:
        why = f"the device report is unreadable ({device_problem(report.device)})"
    else:
        why = f"the probe process gave no device report ({cmd.describe_failure()})"
    fix = "python -c 'import torch; print(torch.cuda.is_available(), torch.cuda.device_count())'  # reproduce it alone; then check dmesg"
    results = [failed(f"GPU probes could not start: {why}", fix, [f"stderr: {l}" for l in tail], id="probe.device")]
    results += [skipped(f"{n} not run: the GPU could not be initialised (see probe.device)", id=probe_id(n)) for n in names]
    return results


def run_stage(timeout_s: float = 60.0, gpu_names: list[str] | None = None, smi_memory_bytes: list[int] | None = None,
              only: set[str] | None = None, allow_build: bool = False, cpu: bool = False,
              python: str | None = None, main_child: str = MAIN_CHILD,
              collective_child: str = COLLECTIVE_CHILD) -> list[CheckResult]:
    """Run the selected probes (all when only is None) within timeout_s seconds overall.
    cpu=True runs the probe code on the CPU at small sizes: for tests and debugging, not a verdict on a GPU."""
    unknown = set(only or ()) - set(PROBE_NAMES)
    if unknown:
        raise ValueError(f"unknown probe(s): {', '.join(sorted(unknown))}; valid: {', '.join(PROBE_NAMES)}")
    names = [n for n in PROBE_NAMES if only is None or n in only]
    python = python or sys.executable
    env = child_env()
    deadline = time.monotonic() + timeout_s
    collective = None
    if "collective" in names:
        collective = _CollectiveLauncher(python, collective_child, env, cpu, deadline)
        # Start it now only where a second GPU may exist (the doctor passes the GPUs the system tools saw).
        if cpu or gpu_names is None or len(gpu_names) >= 2:
            collective.start()
    try:
        verdicts = _main_child_probes(names, deadline, python, main_child, env, cpu, allow_build, gpu_names,
                                      smi_memory_bytes, timeout_s)
        ctx = verdicts.pop(_CTX, None)
        if collective is not None and ctx is not None:
            verdicts["collective"] = collective.verdict(ctx)
    finally:
        if collective is not None:
            collective.release()
    if "probe.device" in verdicts:  # init failure: one fail plus a skip per probe
        return [verdicts["probe.device"]] + [verdicts[n] for n in names]
    return [verdicts[n] for n in names]


_CTX = "__device_context__"


def _main_child_probes(names: list[str], deadline: float, python: str, main_child: str, env: dict[str, str],
                       cpu: bool, allow_build: bool, gpu_names: list[str] | None,
                       smi_memory_bytes: list[int] | None, timeout_s: float) -> dict[str, Any]:
    """Verdicts of the probes the main child runs, keyed by name, plus the DeviceContext under _CTX."""
    pending = [n for n in names if BY_NAME[n].in_main_child]
    verdicts: dict[str, Any] = {}
    ctx: DeviceContext | None = None

    while ctx is None or pending:
        remaining = deadline - time.monotonic()
        if ctx is not None and remaining < MIN_RELAUNCH_S:
            break
        plan = {"probes": [[n, max(1.0, min(_per_probe_timeout(n, allow_build), remaining - 1))] for n in pending],
                "allow_build": allow_build, "cpu": cpu, "init_timeout_s": max(1.0, remaining - 1)}
        cmd = run_child(main_child, plan, max(1.0, remaining), env=env, python=python).command
        report = parse_child_output(cmd.stdout)
        if ctx is None:
            if report.device is None or device_problem(report.device):
                failure = _init_failure(names, cmd, report)
                return {"probe.device": failure[0], **{n: r for n, r in zip(names, failure[1:])}}
            if not report.device["available"]:
                return {n: skipped(f"{n} skipped: {report.device['reason']}", id=probe_id(n)) for n in names}
            ctx = DeviceContext.from_device_event(report.device, gpu_names, smi_memory_bytes,
                                                  {k: os.environ[k] for k in RELEVANT_ENV if k in os.environ})
            if cpu:
                ctx.vendor = "cpu"
            elif "memory" in pending and ctx.smi_memory_bytes is None:
                ctx.smi_memory_bytes = read_smi_memory_bytes(ctx.vendor)
        for name, event in report.results.items():
            if name in pending:
                verdicts[name] = result_verdict(name, event, ctx)
        for name, why in report.bad.items():
            if name in pending and name not in verdicts:
                verdicts[name] = garbage_verdict(name, why, cmd)
        culprit = report.unfinished()
        if culprit in pending and culprit not in verdicts:
            verdicts[culprit] = died_verdict(culprit, cmd, ctx, plan_timeout(plan, culprit))
        progressed = [n for n in pending if n in verdicts]
        pending = [n for n in pending if n not in verdicts]
        if report.done or not progressed:
            break  # finished, or the child died between probes: do not loop on it

    for name in pending:
        verdicts[name] = skipped(f"{name} not run: the GPU stage's {timeout_s:g} s budget ran out "
                                 f"(run it alone: rocmcheck probe {name})", id=probe_id(name))
    verdicts[_CTX] = ctx
    return verdicts


def plan_timeout(plan: dict[str, Any], name: str) -> float:
    return next((t for n, t in plan["probes"] if n == name), 0.0)


class _CollectiveLauncher:
    """The collective child, started at once in a thread; released by writing the go file."""

    def __init__(self, python: str, module: str, env: dict[str, str], cpu: bool, deadline: float) -> None:
        self._dir = tempfile.mkdtemp(prefix="rocmcheck-go-")
        self.go_file = os.path.join(self._dir, "go")
        self.python, self.module, self.env, self.cpu, self.deadline = python, module, env, cpu, deadline
        self.timeout = 0.0
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._future: Future[CommandResult] | None = None

    def start(self) -> None:
        remaining = max(1.0, self.deadline - time.monotonic())
        # world 0: the child counts the GPUs itself (the parent does not import torch); tests use 2 CPU ranks.
        request = {"world": 2 if self.cpu else 0, "backend": "gloo" if self.cpu else "nccl",
                   "timeout": min(BY_NAME["collective"].timeout_s, remaining), "go_file": self.go_file,
                   **({"mib": 1} if self.cpu else {})}
        self.timeout = remaining
        self._future = self._pool.submit(
            lambda: run_child(self.module, request, remaining, env=self.env, python=self.python).command)

    def _go(self, word: str) -> None:
        tmp = self.go_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(word)
        os.replace(tmp, self.go_file)  # atomic: the workers never read half a word

    def verdict(self, ctx: DeviceContext) -> CheckResult:
        pid = probe_id("collective")
        if ctx.count < 2 and ctx.vendor != "cpu":
            self._go("stop")
            return skipped(f"collective skipped: {ctx.count} GPU visible, nothing to all-reduce across", id=pid)
        if self.deadline - time.monotonic() < MIN_RELAUNCH_S and self._future is None:
            return skipped("collective not run: the GPU stage's budget ran out (run it alone: rocmcheck probe collective)", id=pid)
        if self._future is None:
            self.start()
        self._go("go")
        assert self._future is not None
        cmd = self._future.result()
        report = parse_child_output(cmd.stdout)
        if "collective" in report.results:
            return result_verdict("collective", report.results["collective"], ctx)
        if "collective" in report.bad:
            return garbage_verdict("collective", report.bad["collective"], cmd)
        return died_verdict("collective", cmd, ctx, self.timeout)

    def release(self) -> None:
        """Never leave the child waiting: tell it to stop if nobody said go, and do not wait for it here."""
        if not os.path.exists(self.go_file):
            self._go("stop")
        self._pool.shutdown(wait=False)
        if self._future is None or self._future.done():
            shutil.rmtree(self._dir, ignore_errors=True)
        else:
            self._future.add_done_callback(lambda _f: shutil.rmtree(self._dir, ignore_errors=True))
