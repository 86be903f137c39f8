"""Reading what a probe child said (the events rocmcheck.child read off its stdout): garbage, truncated lines and
missing keys never raise."""

import json

from rocmcheck.child import ChildRun, parse_events
from rocmcheck.probes.protocol import device_problem, parse_child_output
from rocmcheck.runner import CommandResult


def lines(*events) -> ChildRun:
    """A finished child that printed these lines (event objects, or raw text), read as run_child reads them."""
    stdout = "\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n"
    return ChildRun(CommandResult(argv=["python"], returncode=0, stdout=stdout), *parse_events(stdout))


DEVICE = {"event": "device", "available": True, "count": 1,
          "devices": [{"index": 0, "name": "NVIDIA H200", "arch": "sm_90"}]}


def test_a_complete_run():
    report = parse_child_output(lines(DEVICE, {"event": "start", "probe": "memory"},
                                      {"event": "result", "probe": "memory", "outcome": "ok", "data": {"devices": []}},
                                      {"event": "done"}))
    assert report.done and report.device == DEVICE and set(report.results) == {"memory"}
    assert report.unfinished() is None and not report.bad


def test_truncated_line_is_blamed_on_the_running_probe():
    report = parse_child_output(lines(DEVICE, {"event": "start", "probe": "attention"},
                                      '{"event": "result", "probe": "att'))
    assert "attention" in report.bad and "unreadable" in report.bad["attention"]
    assert not report.done


def test_garbage_before_any_probe_and_non_objects():
    report = parse_child_output(lines("Segmentation fault", "[1, 2]", "42"))
    assert report.device is None and "" in report.bad


def test_started_without_result_is_the_unfinished_probe():
    report = parse_child_output(lines(DEVICE, {"event": "start", "probe": "memory"},
                                      {"event": "result", "probe": "memory", "outcome": "skip", "reason": "x"},
                                      {"event": "start", "probe": "gemm_tflops"}))
    assert report.unfinished() == "gemm_tflops"


def test_malformed_results():
    report = parse_child_output(lines(
        {"event": "result", "probe": "a", "outcome": "maybe"},
        {"event": "result", "probe": "b", "outcome": "error"},
        {"event": "result", "probe": "c", "outcome": "ok", "data": [1]},
        {"event": "nonsense"}))
    assert set(report.bad) == {"a", "b", "c", ""} and not report.results


def test_device_problems():
    assert device_problem(DEVICE) is None
    assert device_problem({"event": "device", "available": False, "reason": "no GPU"}) is None
    assert device_problem({"event": "device"}) is not None
    assert device_problem({"event": "device", "available": True, "devices": []}) is not None
    assert device_problem({"event": "device", "available": False}) is not None


def test_a_real_child_that_breaks_its_line_blames_the_running_probe(tmp_path):
    """run_child's own reading of a real process: the truncated last line ends up on the probe that printed it."""
    import sys

    from rocmcheck.child import run_child

    script = tmp_path / "child.py"
    script.write_text("import sys\n"
                      "print('{\"event\": \"start\", \"probe\": \"triton\"}', flush=True)\n"
                      "sys.stdout.write('{\"event\": \"result\", \"probe\": \"tri')\n")
    run = run_child("child", None, 30, python=sys.executable, env={"PYTHONPATH": str(tmp_path)})
    report = parse_child_output(run)
    assert report.started == ["triton"] and "unreadable" in report.bad["triton"] and not report.results
