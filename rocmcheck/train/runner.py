"""`rocmcheck smoke-train` once its options are parsed: the one entry (smoke_train). It decides what to run once
(request.py), runs it (this process trains, launch.py starts the ranks, or bench.py benchmarks), then shows the
report, writes --out and returns the exit code (rocmcheck.result.exit_code: 0 judged and nothing failed, 1 a
verdict failed, 3 nothing judged). Bad input is BadInput (one line, exit 2), raised before torch is imported.

--json owns stdout: while the run goes, file descriptor 1 points at stderr (libraries print there: DeepSpeed's
accelerator warning, kernel logs, from C too), and the one JSON document goes to the real stdout. A rank other
than 0 shows nothing: its stdout points at stderr for good, and it exits 1 only when its own run failed (rank 0
judges the run).

Imports no torch itself; the run it calls does.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any

from rocmcheck import fixes
from rocmcheck.child import restore_stdout, stdout_to_stderr
from rocmcheck.errors import BadInput
from rocmcheck.result import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PASSED, CheckResult, Status, exit_code, failed
from rocmcheck.train import cpu_threads
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.report import RunReport, error_result, first_line, step_text, timings_line
from rocmcheck.train.request import Mode, Request, decide, rank_problem

TORCH_MISSING_FIX = fixes.shell("rocmcheck doctor --only torch",
                                "names the pip line for this machine's ROCm/CUDA torch")
INSTALL_DEEPSPEED = fixes.shell("DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed",
                                "after torch; see docs/distributed.md")
GPU_PINS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def smoke_train(cfg: TrainConfig, **options: Any) -> int:
    """The exit code of the run `cfg` and the command's other options (request.decide's) ask for."""
    t0 = time.perf_counter()
    try:
        request = decide(cfg, **options)
    except BadInput as exc:
        if not options.get("as_json"):
            raise
        return refused_as_json(bad_input_result(exc), str(exc))
    if request.mode is Mode.BENCH and not any(v in os.environ for v in GPU_PINS):
        # One GPU for both sides: in one process, HF Trainer wraps the model in nn.DataParallel over every visible
        # GPU (a doubled batch and a slower step), which would compare two different runs. Before CUDA starts.
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    cpu_threads.wait_passively()  # before torch is imported: OpenMP reads it once, as torch loads it
    missing = torch_missing()
    if missing is not None:
        if request.as_json:
            return refused_as_json(missing)
        raise BadInput(f"smoke-train needs PyTorch, which does not import here ({missing.evidence[0]}); which torch "
                       f"to install: {TORCH_MISSING_FIX.line()}")
    if request.mode is Mode.LAUNCH:
        problem = rank_problem(request.nproc, request.cfg.device, *visible_compute())
        if problem:
            if request.as_json:
                return refused_as_json(bad_input_result(BadInput(problem)), problem)
            raise BadInput(problem)
    report = run(request)
    return finish(request, report, t0)


def bad_input_result(exc: BadInput) -> CheckResult:
    """A refused command line as the failed train.input verdict of the --json document."""
    from rocmcheck.train.families import UnbuildableFamily

    fix = exc.fix if isinstance(exc, UnbuildableFamily) else fixes.note(
        "correct the option or model folder the summary names, then run again")
    return failed(str(exc), fix, id="train.input")


def refused_as_json(result: CheckResult, line: str | None = None) -> int:
    """A run refused before it started, with --json: one document (the failed verdict, no metrics) on stdout, the
    bad input's one line on stderr as without --json, and exit 2."""
    from rocmcheck.report.json_report import envelope
    from rocmcheck.safe.text import one_line

    sys.stdout.write(json.dumps(envelope("smoke-train", [result], metrics=[], info={})) + "\n")
    sys.stdout.flush()
    if line:
        print(f"Error: {one_line(line)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def torch_missing() -> CheckResult | None:
    """train.torch failed when torch does not import (ImportError, or a broken install raising anything), else None."""
    from rocmcheck.heap import imports_without_gc

    try:
        with imports_without_gc():
            import torch  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything on import
        text = first_line(exc)
        return failed(f"torch is not importable: {text}", TORCH_MISSING_FIX, [f"{type(exc).__name__}: {text}"],
                      id="train.torch")
    return None


def visible_compute() -> tuple[int, int]:
    """(GPUs torch sees, CPU cores this process may use)."""
    import torch

    try:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken runtime raises anything here; it sees no GPU
        gpus = 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return gpus, cores


def run(request: Request) -> RunReport:
    """The report of what was decided: this process trains, launches the ranks, or benchmarks."""
    cfg = request.cfg
    display = _display(request)
    # --json owns stdout, and a rank other than 0 never writes there (rank 0's --json document is on it).
    real_stdout = stdout_to_stderr() if request.as_json or not request.is_main else None
    try:
        with display:
            if request.plan is not None and importlib.util.find_spec("deepspeed") is None:
                return RunReport([failed("--deepspeed needs DeepSpeed, which is not installed", INSTALL_DEEPSPEED,
                                         id="train.deepspeed")], info={"config": cfg.to_dict()})
            if request.plan is not None and request.is_main:
                for line in request.plan.warnings:  # lint warnings do not stop the run, but a person should see them
                    print(line, file=sys.stderr)
            return _run(request, display)
    except Exception as exc:  # noqa: BLE001 - a crash becomes a verdict, never a traceback
        if not request.is_main:
            traceback.print_exc()  # rank 0 reports the run; this rank's crash shows on stderr and in its exit
        return RunReport([error_result(exc)], info={"config": cfg.to_dict()})
    finally:
        if real_stdout is not None and request.is_main:
            restore_stdout(real_stdout)


def _run(request: Request, display: "_Display") -> RunReport:
    cfg = request.cfg
    if request.mode is Mode.BENCH:
        from rocmcheck.train.bench import run_bench  # imports torch

        return run_bench(cfg, shape=request.bench_shape, log=display.stage)
    if request.mode is Mode.LAUNCH:
        from rocmcheck.train.launch import launch_ranks

        display.stage(f"launching {request.nproc} ranks under torchrun (timeout {request.timeout_s:g} s)")
        return launch_ranks(cfg, request.plan, request.nproc, request.timeout_s, progress=display.step)
    from rocmcheck.train.run import run_smoke_train  # imports torch

    display.stage("starting: imports, device, model, data")
    return run_smoke_train(cfg, progress=display.step, plan=request.plan, pg_timeout_s=request.timeout_s)


class _Display:
    """smoke-train's stages and steps on the one progress display (rocmcheck/report/progress.py), on stderr; a
    rank other than 0 shows nothing."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress

    def __enter__(self) -> "_Display":
        if self.progress is not None:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.end()

    def stage(self, text: str) -> None:
        if self.progress is not None:
            self.progress.begin(text)

    def step(self, step: int, steps: int, row: dict[str, Any]) -> None:
        if self.progress is None:
            return
        if self.progress.stage != "training":
            self.progress.begin("training")
        self.progress.count(step, steps, step_text(row.get("loss"), row.get("tokens_per_s")))


def _display(request: Request) -> _Display:
    if not request.is_main:
        return _Display(None)
    from rocmcheck.report import render
    from rocmcheck.report.progress import Progress

    return _Display(Progress(render.console(stderr=True), prefix="smoke-train "))


def finish(request: Request, report: RunReport, t0: float) -> int:
    """Write --out, show the report (text, or the one JSON document), and return the exit code."""
    report.info["wall_s"] = time.perf_counter() - t0
    if not request.is_main:
        return EXIT_FAILED if any(r.status.is_problem for r in report.results) else EXIT_PASSED
    cfg = request.cfg
    files = None
    if cfg.out:
        files = _write(request, report, t0)
    out = report.to_dict()
    if files is not None:
        out["files"] = files
    if request.as_json:
        from rocmcheck.report.json_report import envelope

        payload = {k: v for k, v in out.items() if k not in ("schema", "results")}
        sys.stdout.write(json.dumps(envelope("smoke-train", report.results, **payload), default=str) + "\n")
        sys.stdout.flush()
    else:
        _print_results(report.results, files, report.info)
    return exit_code(report.results)


def write_failed_fix(out: Any, exc: BaseException) -> fixes.Fix:
    """What to run when --out could not be written: the free space for a full disk, else the folder itself."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return fixes.shell("df -h {folder}", "free space there (the report is shown here), or give another --out",
                           folder=os.path.dirname(os.path.abspath(str(out))) or "/")
    return fixes.shell("mkdir -p {out} && test -w {out}", "--out must be a folder you can write (the report is "
                       "shown here)", out=out)


def _write(request: Request, report: RunReport, t0: float) -> dict[str, str] | None:
    """Write --out's files; a failure becomes train.outputs and the report is still shown."""
    from rocmcheck.train.outputs import write_outputs

    cfg = request.cfg
    t_out = time.perf_counter()
    try:
        files = write_outputs(report.to_dict(), cfg.out, force=request.force)
    except (OSError, BadInput) as exc:
        text = str(exc) if isinstance(exc, BadInput) else f"{type(exc).__name__}: {exc.strerror or exc}"
        report.results.append(failed(f"could not write --out {cfg.out}: {text}", write_failed_fix(cfg.out, exc),
                                     [text], id="train.outputs"))
        return None
    except Exception as exc:  # noqa: BLE001 - a bug in writing never loses the report: it is shown below
        report.results.append(CheckResult("train.outputs", Status.CRASH,
                                          f"writing --out crashed: {type(exc).__name__}: {first_line(exc)}", [],
                                          error_result(exc).fix))
        return None
    # After report.json was written, so only what is shown next (report.info) counts them.
    report.info.setdefault("timings_s", {})["outputs"] = round(time.perf_counter() - t_out, 3)
    report.info["wall_s"] = time.perf_counter() - t0
    return files


def _print_results(results: list[CheckResult], files: dict[str, str] | None, info: dict[str, Any]) -> None:
    from rocmcheck.report import render

    console = render.console()
    dev = info.get("device", {})
    # The model as loaded, else as asked for (a run that stopped before loading it); never a "?"
    model = (info.get("model") or {}).get("path") or (info.get("config") or {}).get("model")
    cpu = (info.get("cpu") or {}).get("line")  # the CPU run's thread count and why (train/cpu_threads.py)
    title = (f"device: {dev.get('name')} ({dev.get('kind')})" + (f"; model: {model}" if model else "")
             + (f"; {cpu}" if cpu else "") if dev else None)
    render.print_report(results, console, title=title)
    line = timings_line(info)
    if line:
        console.print(render.clean(line), markup=False, soft_wrap=True, style="dim")
    for name, path in (files or {}).items():
        console.print(render.clean(f"{name}: {path}"), markup=False, soft_wrap=True)
