"""Reading the child's JSON lines: garbage, truncated lines and missing keys never raise."""

import json

from rocmcheck.probes.protocol import device_problem, parse_child_output


def lines(*events):
    return "\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n"


DEVICE = {"event": "device", "available": True, "count": 1, "devices": [{"index": 0, "name": "NVIDIA H200", "arch": "sm_90"}]}


def test_a_complete_run():
    report = parse_child_output(lines(DEVICE, {"event": "start", "probe": "memory"},
                                      {"event": "result", "probe": "memory", "outcome": "ok", "data": {"devices": []}},
                                      {"event": "done"}))
    assert report.done and report.device == DEVICE and set(report.results) == {"memory"}
    assert report.unfinished() is None and not report.bad


def test_truncated_line_is_blamed_on_the_running_probe():
    report = parse_child_output(lines(DEVICE, {"event": "start", "probe": "attention"}, '{"event": "result", "probe": "att'))
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
