"""kernels.event_rows against the profiler's own key_averages() on the same real profile: every row, its count
and its self CPU time (and, with no device, no device time), for a real model's training step and for nested
user annotations."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.autograd import DeviceType  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from rocmcheck.train.kernels import event_rows, profile_step  # noqa: E402


def profiled(step):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return prof


def by_name(rows):
    return {r["name"]: r for r in rows}


def assert_same_rows(prof):
    mine = by_name(event_rows(prof.profiler.kineto_results.events(), False, DeviceType.CPU))
    theirs = {evt.key: evt for evt in prof.key_averages()}
    assert mine.keys() == theirs.keys()
    for name, evt in theirs.items():
        row = mine[name]
        assert row["count"] == evt.count, name
        assert row["self_cpu_us"] == pytest.approx(evt.self_cpu_time_total, abs=0.01), name
        assert row["self_device_us"] == 0 and row["device_us"] == 0 and not row["on_device"], name
    return mine


def test_a_training_step_gives_the_rows_key_averages_gives():
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, vocab_size=500))
    x = torch.randint(0, 500, (2, 16))

    def step():
        model(input_ids=x, labels=x).loss.backward()
        model.zero_grad()

    step()
    mine = assert_same_rows(profiled(step))
    assert mine["aten::mm"]["count"] > 10 and mine["aten::mm"]["self_cpu_us"] > 0


def test_nested_annotations_split_self_time_as_key_averages_does():
    a = torch.randn(256, 256)

    def step():
        with record_function("outer"):
            with record_function("inner"):
                for _ in range(3):
                    a @ a
            a + a

    mine = assert_same_rows(profiled(step))
    outer, inner = mine["outer"], mine["inner"]
    assert 0 < outer["self_cpu_us"] < outer["self_cpu_us"] + inner["self_cpu_us"]


def test_profile_step_reads_the_raw_events():
    a = torch.randn(128, 128)
    rows = by_name(profile_step(lambda: [a @ a for _ in range(4)], on_gpu=False))
    assert rows["aten::mm"]["count"] == 4 and rows["aten::mm"]["self_cpu_us"] > 0
