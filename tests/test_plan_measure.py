"""The real batch finder: the search logic, the child on the CPU against a byte ceiling, a misbehaving child."""

from __future__ import annotations

import sys

import pytest

from rocmcheck.fixes import FixKind
from rocmcheck.plan.measure import MeasuredBatch, find_max_micro_batch, measured_verdict
from rocmcheck.plan.search import Trial, search_max_batch
from rocmcheck.plan.shapes import shape_from_config
from rocmcheck.result import Status
from tests.fakes import make_tool

TINY = shape_from_config({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "intermediate_size": 172, "vocab_size": 256}, name="tiny")


def _by_limits(ok_up_to: int, oom_from: int):
    def try_batch(b: int) -> Trial:
        if b >= oom_from:
            return Trial(b, "oom", error="OutOfMemoryError: HIP out of memory.")
        return Trial(b, "ok" if b <= ok_up_to else "over", device_peak=b)
    return try_batch


def test_search_doubles_then_bisects():
    out = search_max_batch(_by_limits(ok_up_to=11, oom_from=14))
    assert out.best == 11
    assert [t.micro_batch for t in out.trials] == [1, 2, 4, 8, 16, 12, 10, 11]
    assert out.stop == "micro-batch 12 is over the budget"


def test_search_stops_at_the_cap_and_on_errors():
    assert search_max_batch(_by_limits(1000, 2000), max_micro_batch=64).stop == "reached the cap of 64"

    def broken(b: int) -> Trial:
        return Trial(b, "ok") if b < 4 else Trial(b, "error", error="RuntimeError: HIP error: invalid device function")
    out = search_max_batch(broken)
    assert out.best == 2 and "invalid device function" in out.stop


def test_search_from_a_start_that_does_not_fit():
    out = search_max_batch(_by_limits(ok_up_to=3, oom_from=5), start=8)
    assert out.best == 3
    assert [t.micro_batch for t in out.trials][0] == 8


def test_child_on_cpu_with_a_byte_ceiling():
    """On the CPU there is no device allocator to run out of, so the child counts the bytes autograd saves
    (a saved-tensor hook) on top of the model states and raises a real torch.OutOfMemoryError past the
    ceiling. That exercises what a GPU run needs: catching the OOM by type, freeing, going on, bisecting."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # At seq 32 this model holds ~2.2 MB of states and ~0.27 MB of activations per sample: against a 6.5 MB
    # ceiling, 16 runs out of memory, 12 is within 90% of it, 14 runs but above 90%.
    m = find_max_micro_batch(TINY, 32, 0.9, cpu_ceiling_bytes=6_500_000, steps=1, start=1, timeout_s=240)
    assert m.available and m.finished, m.reason
    outcomes = {t.micro_batch: t.outcome for t in m.trials}
    assert [t.micro_batch for t in m.trials][:5] == [1, 2, 4, 8, 16]
    assert outcomes[16] == "oom"
    assert "CPU test ceiling" in next(t.error for t in m.trials if t.micro_batch == 16)
    assert "over" in outcomes.values()
    best = m.best
    assert outcomes[best] == "ok" and outcomes[best + 1] in ("over", "oom")
    # tries after an OOM ran: the memory it held was given back
    first_oom = [t.outcome for t in m.trials].index("oom")
    assert "ok" in [t.outcome for t in m.trials[first_oom + 1:]]
    peaks = [t.device_peak for t in sorted(m.trials, key=lambda t: t.micro_batch) if t.outcome != "oom"]
    assert peaks == sorted(peaks)
    verdict = measured_verdict(m)
    assert verdict.status is Status.PASS and f"micro-batch {best}" in verdict.summary


def test_no_gpu_is_a_clear_skip():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    m = find_max_micro_batch(TINY, 32, timeout_s=120)
    assert not m.available
    verdict = measured_verdict(m)
    assert verdict.status is Status.SKIP
    assert "no GPU" in verdict.summary


def test_a_hung_child_becomes_a_verdict(tmp_path):
    python = make_tool(tmp_path / "bin", "python", hang=True)
    m = find_max_micro_batch(TINY, 32, python=str(python), timeout_s=3)
    verdict = measured_verdict(m)
    assert verdict.status is Status.FAIL
    assert "hung" in verdict.summary
    assert verdict.fix.text.startswith("python -c 'import torch;")  # it hung before it said whether there is a GPU


def test_a_child_that_crashes_mid_search_names_the_batch(tmp_path):
    events = ('{"event": "device", "available": true, "count": 1, "devices": [{"index": 0, "name": "x"}]}\n'
              '{"event": "start", "micro_batch": 1}\n'
              '{"event": "trial", "micro_batch": 1, "outcome": "ok", "device_peak": 1000}\n'
              '{"event": "start", "micro_batch": 2}\n')
    python = make_tool(tmp_path / "bin", "python", stdout=events, crash_signal="SEGV")
    m = find_max_micro_batch(TINY, 32, python=str(python), timeout_s=30)
    verdict = measured_verdict(m)
    assert verdict.status is Status.FAIL
    assert "crashed" in verdict.summary and "micro-batch 2" in verdict.summary
    assert m.running == 2 and [t.micro_batch for t in m.trials] == [1]
    assert verdict.fix.text == "rocmcheck plan --model tiny --seq-len 32 --measure --timeout 1200"


def test_settings_are_checked_before_a_process_starts():
    with pytest.raises(ValueError, match="attention"):
        find_max_micro_batch(TINY, 32, attention="flash3", python=sys.executable)
    with pytest.raises(ValueError, match="target_fraction"):
        find_max_micro_batch(TINY, 32, target_fraction=1.5, python=sys.executable)


def test_lora_child_starts_from_the_planner_on_cpu():
    """peft adapters over a bf16 base in the child, the planner's answer as the first try, and the search
    proving its answer (it fitted; the next size did not)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    m = find_max_micro_batch(TINY, 32, 0.9, cpu_ceiling_bytes=6_500_000, steps=1, lora_rank=8, timeout_s=240)
    assert m.available and m.finished, (m.reason, m.stderr_tail)
    assert m.guess is not None and m.trials[0].micro_batch == m.guess
    outcomes = {t.micro_batch: t.outcome for t in m.trials}
    assert outcomes[m.best] == "ok" and outcomes[m.best + 1] in ("over", "oom")
    assert len(m.trials) <= 6
    assert m.settings["lora_rank"] == 8
    assert "tries, from the planner's" in measured_verdict(m).summary


def test_the_rerun_fix_quotes_a_model_path():
    """A config.json path with a space and a quote stays one word of the pasted line."""
    shape = shape_from_config({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "intermediate_size": 172, "vocab_size": 256},
                              name="/models/it's llama/config.json")
    capped = MeasuredBatch(shape, 512, 0.95, available=True, device={"available": True}, best=64,
                           stop="reached the cap of 64", total_bytes=80 << 30,
                           trials=[Trial(64, "ok", device_peak=40 << 30)])
    r = measured_verdict(capped)
    assert r.status is Status.WARN and r.fix.kind is FixKind.SHELL
    assert r.fix.text == ("rocmcheck plan --model '/models/it'\"'\"'s llama/config.json' --seq-len 512 --measure "
                          "--start-batch 64")
    none_fits = MeasuredBatch(shape, 512, 0.95, available=True, device={"available": True}, best=0,
                              stop="micro-batch 1 ran out of memory", total_bytes=80 << 30,
                              settings={"gradient_checkpointing": True})
    r = measured_verdict(none_fits)
    assert r.status is Status.FAIL and "--seq-len 256 --gradient-checkpointing" in r.fix.text
