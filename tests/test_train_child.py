"""The train child's request: a TrainConfig (and a DeepSpeed plan) survive the trip through JSON, and a request
this version does not understand is refused with one line and exit 2 (a real child process)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rocmcheck.child import run_child
from rocmcheck.errors import BadInput
from rocmcheck.train.child import MODULE, parse_request, train_request
from rocmcheck.train.config import TrainConfig


@pytest.mark.parametrize("cfg", [
    TrainConfig(),
    TrainConfig(model=Path("/models/llama"), steps=30, micro_batch=4, grad_accum=2, lr=3e-4, device="cpu",
                gradient_checkpointing=True, profile=False, out=Path("/tmp/x"), lora_rank=8, pure_bf16=True),
])
def test_train_config_round_trips_through_json(cfg):
    again = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and isinstance(again.model, Path) and (again.out is None or isinstance(again.out, Path))


def test_unknown_settings_are_bad_input():
    with pytest.raises(BadInput, match="unknown training settings: bogus"):
        TrainConfig.from_dict({"steps": 20, "bogus": 1})


@pytest.mark.parametrize("request_", [{"config": {"bogus": 1}}, {"config": {"steps": 20}, "deepspeed": {"path": "x"}},
                                      {"config": "not a dict"}, {"config": {}, "pg_timeout_s": "soon"}])
def test_bad_requests_are_bad_input(request_):
    with pytest.raises(BadInput, match="bad train request"):
        parse_request(request_)


def test_request_without_plan_or_limit_keeps_the_run_defaults():
    cfg, plan, pg_timeout_s = parse_request(json.loads(json.dumps(train_request(TrainConfig(steps=15)))))
    assert cfg == TrainConfig(steps=15) and plan is None and pg_timeout_s is None


def test_a_refused_request_is_one_line_exit_2_and_no_events():
    run = run_child(MODULE, {"config": {"bogus": 1}}, 60)
    assert run.command.returncode == 2 and run.events == [] and run.bad_lines == []
    assert run.stderr_tail() == ["bad train request: unknown training settings: bogus"]
    assert "Traceback" not in run.command.stderr and sys.executable in run.command.argv[0]
