"""Lines a person reads that used to say nothing or the wrong thing: the smoke-train title of a run that stopped
before loading its model (no "model: ?"), and the fix of a CPU run's unsteady steps (no GPU tool named)."""

from __future__ import annotations

from rocmcheck.result import Status, passed
from rocmcheck.train.runner import _print_results
from rocmcheck.train.verdicts import check_throughput


def test_a_cpu_runs_unsteady_steps_name_no_gpu_tool():
    steps = [0.1] * 8 + [1.0, 1.0]  # p90 at 10x the median: past the CPU's 6x
    cpu = check_throughput(steps, 512, 1e6, None, None, on_gpu=False)
    gpu = check_throughput(steps, 512, 1e6, None, None, on_gpu=True)
    assert cpu.status is Status.WARN and gpu.status is Status.WARN
    assert "amd-smi" not in cpu.fix.line() and "top" in cpu.fix.line()
    assert "amd-smi process" in gpu.fix.line()


def test_the_title_names_the_model_asked_for_or_none(capsys):
    device, results = {"name": "cpu", "kind": "cpu"}, [passed("loss fell", id="train.loss")]
    _print_results(results, None, {"device": device, "config": {"model": "/data/tiny"}})
    _print_results(results, None, {"device": device})
    out = " ".join(capsys.readouterr().out.split())  # the title wraps to the table's width
    assert out.count("device: cpu (cpu)") == 2 and "device: cpu (cpu); model: /data/tiny" in out and "?" not in out
