"""What `rocmcheck smoke-train` does once its input is valid: run (or bench), show, write, exit code."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rocmcheck.child import restore_stdout, stdout_to_stderr
from rocmcheck.result import CheckResult, Status, failed
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.report import RunReport, timings_line


def error_result(exc: BaseException) -> CheckResult:
    """An exception that escaped the run. GPU runtime errors are verdicts on the machine; others are our bugs."""
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    name = type(exc).__name__
    if any(k in text for k in ("HIP error", "CUDA error", "hipError", "invalid device function", "no kernel image",
                                     "code object")):
        return failed(f"the GPU runtime failed during training: {text}",
                      "rocmcheck doctor   (checks that this torch build has kernels for this GPU arch)",
                      [f"{name}: {text}"], id="train.run")
    return CheckResult("train.run", Status.CRASH, f"smoke-train crashed: {name}: {text}", [f"{name}: {text}"],
                       "rocmcheck smoke-train --json > smoke-train.json  # a rocmcheck bug: please report it with that file")


def run_and_report(cfg: TrainConfig, as_json: bool, bench: bool = False, bench_shape: str = "1.1b", run=None) -> int:
    """run: another way to produce the RunReport, run(cfg, progress=...) (DeepSpeed, several ranks: launch.py)."""
    t0 = time.perf_counter()
    progress, done = _progress(cfg.steps, as_json)
    # --json owns stdout. Libraries print there (DeepSpeed's accelerator warning, kernel logs, from C
    # too), so while the run goes, file descriptor 1 points at stderr; the JSON goes to the real stdout.
    real_stdout = stdout_to_stderr() if as_json else None
    try:
        if bench:
            from rocmcheck.train.bench import run_bench

            report = run_bench(cfg, shape=bench_shape, log=None if as_json else _log)
        elif run is not None:
            report = run(cfg, progress=progress)
        else:
            from rocmcheck.train.run import run_smoke_train

            report = run_smoke_train(cfg, progress=progress)
    except Exception as exc:  # noqa: BLE001 - a crash becomes a verdict, never a traceback
        report = RunReport([error_result(exc)], info={"config": cfg.to_dict()})
    finally:
        done()
        if real_stdout is not None:
            restore_stdout(real_stdout)
    report.info["wall_s"] = time.perf_counter() - t0
    out: dict[str, Any] = report.to_dict()
    if cfg.out:
        from rocmcheck.train.outputs import write_outputs

        t_out = time.perf_counter()
        try:
            out["files"] = write_outputs(out, cfg.out)
            # After report.json was written, so only what is shown next (out["info"] is report.info) counts them.
            report.info.setdefault("timings_s", {})["outputs"] = round(time.perf_counter() - t_out, 3)
            report.info["wall_s"] = time.perf_counter() - t0
        except OSError as exc:
            report.results.append(failed(f"could not write to {cfg.out}: {exc}",
                                         f"mkdir -p {cfg.out} and check it is writable", id="train.outputs"))
            out["results"] = [r.to_dict() for r in report.results]
    if as_json:
        from rocmcheck.report.json_report import envelope

        payload = {k: v for k, v in out.items() if k not in ("schema", "results")}
        sys.stdout.write(json.dumps(envelope("smoke-train", report.results, **payload), default=str) + "\n")
    else:
        _print_results(report.results, out.get("files"), report.info)
    return 1 if any(r.status.is_problem for r in report.results) else 0


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# Off a terminal (CI, Slurm, `| tee`): one line every LOG_LINES-th of the run, plus the first and last step.
LOG_LINES = 10


def _progress(total: int, as_json: bool):
    """A live bar on a terminal (stderr); elsewhere a plain line on stderr every few steps, so a log shows life."""
    if sys.stderr.isatty() and not as_json:
        return _progress_bar(total)
    every = max(1, total // LOG_LINES)
    start = time.perf_counter()

    def log(step: int, steps: int, row: dict[str, Any]) -> None:
        if step == 1 or step == steps or step % every == 0:
            print(f"smoke-train [{time.perf_counter() - start:6.1f} s] step {step}/{steps}  loss {row['loss']:.3f}  "
                  f"{row['tokens_per_s']:,.0f} tok/s", file=sys.stderr, flush=True)

    return log, lambda: None


def _progress_bar(total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from rocmcheck.report import render

    bar = Progress(TextColumn("smoke-train"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                   TimeRemainingColumn(), transient=True, console=render.console(stderr=True))
    bar.start()
    task_id = bar.add_task("train", total=total, status="")

    def update(step: int, steps: int, row: dict[str, Any]) -> None:
        bar.update(task_id, completed=step, status=f"loss {row['loss']:.3f}  {row['tokens_per_s']:,.0f} tok/s")

    return update, bar.stop


def _print_results(results: list[CheckResult], files: dict[str, str] | None, info: dict[str, Any]) -> None:
    from rocmcheck.report import render

    console = render.console()
    dev = info.get("device", {})
    title = (f"device: {dev.get('name')} ({dev.get('kind')}); model: {info.get('model', {}).get('path', '?')}"
             if dev else None)
    render.print_report(results, console, title=title)
    line = timings_line(info)
    if line:
        console.print(render.clean(line), markup=False, soft_wrap=True, style="dim")
    for name, path in (files or {}).items():
        console.print(render.clean(f"{name}: {path}"), markup=False, soft_wrap=True)
