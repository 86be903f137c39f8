"""Decision functions of the smoke-train on real inputs: profiler rows from real steps, real GPU error
texts, and baselines shaped like a leaking run's staircase."""

from __future__ import annotations

import pytest

from rocmcheck.monitor.step_memory import MiB, detect_leak
from rocmcheck.train import verdicts
from rocmcheck.train.report import error_result

BASE = 2048 * MiB  # a post-optimizer baseline (weights + AdamW state)


def test_staircase_is_a_leak_flat_is_not():
    staircase = [BASE + step * 20 * MiB for step in range(40)]
    assert detect_leak(staircase, 4 * MiB).leaking
    assert not detect_leak([BASE] * 40, 4 * MiB).leaking


def test_warmup_growth_and_one_off_step_are_not_leaks():
    # AdamW state appears at step 1, then flat: left out as warmup.
    assert not detect_leak([BASE // 2, BASE] + [BASE] * 30, 4 * MiB).leaking
    # One step up mid-run (a lazily created workspace), then flat: growth, but it does not keep rising.
    one_off = [BASE] * 15 + [BASE + 64 * MiB] * 15
    decision = detect_leak(one_off, 4 * MiB)
    assert not decision.leaking and "one-off" in decision.reason


def test_growth_below_tolerance_passes_and_too_few_steps_is_skipped():
    assert not detect_leak([BASE + s * 0.1 * MiB for s in range(40)], 32 * MiB).leaking
    result = verdicts.check_memory_leak(detect_leak([BASE] * 5, 4 * MiB), "gpu-allocator", [BASE] * 5)
    assert result.status.value == "skip"


def test_loss_decrease_and_accuracy_can_fail():
    assert verdicts.check_loss_decrease([5.0] * 20, 0.75).status.value == "fail"
    assert verdicts.check_loss_decrease([5.0] + [1.0] * 19, 0.75).status.value == "pass"
    assert verdicts.check_accuracy(0.0, 0.2, 0.5, 64).status.value == "fail"
    assert verdicts.check_finite([1.0, float("nan")], [1.0, 1.0], 1).status.value == "fail"
    assert verdicts.check_finite([1.0, 1.0], [1.0, float("inf")], 1).status.value == "fail"


def test_reload_must_be_exact():
    assert verdicts.check_reload(0.0).status.value == "pass"
    assert verdicts.check_reload(1e-6).status.value == "fail"
    assert verdicts.check_reload(1e-6, noise=2e-6).status.value == "pass"  # nondeterministic GPU kernels
    assert verdicts.check_reload(0.0, weights_equal=False).status.value == "fail"
    assert verdicts.check_reload(None, error="OSError: No space left on device").status.value == "fail"
    lost = ["base_model.model.model.layers.0.mlp.shared_expert.up_proj.lora_A.weight"]
    dropped = verdicts.check_reload(0.0, weights_equal=False, not_loaded=lost)
    assert dropped.status.value == "fail" and "1 saved tensor(s) did not load back" in dropped.summary
    assert lost[0] in dropped.summary and dropped.data["not_loaded"] == lost and "peft" in dropped.fix.line()


def test_reload_read_back_from_the_files_needs_the_same_weights_and_config():
    files = {"tensors": 291, "bytes": 27 * 2**30, "config_equal": True, "config_differences": [],
             "first_difference": None}
    ok = verdicts.check_reload(None, files=files)
    assert ok.status.value == "pass" and "291 tensors" in ok.summary and ok.data["method"] == "files"
    bit = verdicts.check_reload(None, weights_equal=False, files=files | {"first_difference": "lm_head.weight"})
    assert bit.status.value == "fail" and "lm_head.weight" in bit.summary
    config = verdicts.check_reload(None, files=files | {"config_equal": False,
                                                        "config_differences": ["rope_theta: 10000.0 != 500000.0"]})
    assert config.status.value == "fail" and "rope_theta" in config.summary
    assert not verdicts.check_reload(None, files={"tensors": 1, "bytes": 4}).status.value == "pass"  # config unknown
    # ZeRO-3 saves its gathered copy: that copy's logits are still held to the engine's
    assert verdicts.check_reload(0.5, noise=0.1, files=files).status.value == "fail"
    assert verdicts.check_reload(0.05, noise=0.1, files=files).status.value == "pass"
    assert verdicts.check_reload(0.0).data["method"] == "from_pretrained"


def test_mfu_from_the_datasheet_peak_and_stall_warning():
    # H200 numbers of the 1.1B shape: 45.6k tok/s is 35.5% of 989 TFLOP/s.
    flops = 6 * 1_100_048_384 + 12 * 22 * 2048 * 2048
    tokens = 4 * 2048
    r = verdicts.check_throughput([tokens / 45586.0] * 20, tokens, flops, 989.0, "sm_90 H200", True)
    assert r.status.value == "pass" and r.data["mfu"] == pytest.approx(0.355, abs=0.001)
    stalls = verdicts.check_throughput([0.1] * 15 + [1.0] * 5, tokens, flops, None, None, True)
    assert stalls.status.value == "warn" and "unsteady" in stalls.summary


def test_with_several_ranks_the_throughput_says_it_is_their_sum():
    # Two H200 ranks of the 1.1B shape, each at 45.6k tok/s: the run's tokens and peak are the sums over ranks.
    flops = 6 * 1_100_048_384 + 12 * 22 * 2048 * 2048
    tokens = 2 * 4 * 2048
    r = verdicts.check_throughput([tokens / 91172.0] * 20, tokens, flops, 2 * 989.0, "sm_90 H200", True, ranks=2)
    assert r.summary.startswith("91,172 tokens/s over 2 ranks (45,586 per rank), step ")
    assert "MFU 35.5% of 2 x 989 = 1978 TFLOP/s" in r.summary and r.data["ranks"] == 2
    one = verdicts.check_throughput([tokens / 91172.0] * 20, tokens, flops, 989.0, "sm_90 H200", True)
    assert "over" not in one.summary and "x 989" not in one.summary


def test_gpu_runtime_errors_are_verdicts_other_errors_are_crashes():
    hip = RuntimeError("HIP error: invalid device function\nHIP kernel errors might be asynchronously reported at "
                       "some other API call")
    assert error_result(hip).status.value == "fail" and error_result(hip).id == "train.run"
    nobin = RuntimeError("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!")
    assert error_result(nobin).status.value == "fail"
    assert error_result(KeyError("x")).status.value == "crash"


def test_device_name_to_datasheet_peak():
    pytest.importorskip("torch")
    from rocmcheck.train.device import datasheet_peak

    assert datasheet_peak("NVIDIA H200", "sm_90") == (989.0, "sm_90 H200")
    assert datasheet_peak("AMD Instinct MI300X", "gfx942")[0] == 1307.4
    assert datasheet_peak("NVIDIA H100 NVL", "sm_90")[0] == 835.0
    assert datasheet_peak("Some Unknown GPU", None) == (None, None)


@pytest.fixture(scope="module")
def profiles():
    """Real profiles of an attention step: fused (SDPA's own choice) and forced onto the math path."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from rocmcheck.train.kernels import profile_step

    q = torch.randn(4, 8, 256, 64, requires_grad=True)

    def attention_step():
        sdpa(q, q, q, is_causal=True).sum().backward()

    def math_attention_step():
        with sdpa_kernel([SDPBackend.MATH]):
            attention_step()

    return profile_step(attention_step, on_gpu=False), profile_step(math_attention_step, on_gpu=False)


class TestKernelReportOnRealProfiles:

    def test_fused_attention_passes(self, profiles):
        from rocmcheck.train.kernels import check_kernels

        result = check_kernels(profiles[0], on_gpu=False, attn_requested="sdpa")
        assert result.status.value == "pass" and result.data["attention_path"] == "fused"

    def test_math_path_attention_is_flagged(self, profiles):
        from rocmcheck.train.kernels import check_kernels

        result = check_kernels(profiles[1], on_gpu=False, attn_requested="sdpa")
        assert result.status.value == "warn" and "math path" in result.summary

    def test_eager_attention_of_a_model_without_sdpa_is_the_model_s_not_a_warning(self):
        torch = pytest.importorskip("torch")
        from rocmcheck.train.kernels import check_kernels, profile_step

        q = torch.randn(2, 4, 64, 32, requires_grad=True)
        rows = profile_step(lambda: torch.softmax(q @ q.transpose(-1, -2), -1).matmul(q).sum().backward(), False)
        assert check_kernels(rows, False, "sdpa").status.value == "warn"  # unfused, and nothing says why
        why = "Gemma2ForCausalLM has no SDPA attention in transformers (its _supports_sdpa is False): eager"
        result = check_kernels(rows, False, "eager", model_has_only_eager=why)
        assert result.status.value == "pass" and why in result.summary and result.data["attention_path"] == "eager"

    def test_matmuls_with_no_device_time_in_a_gpu_run_are_flagged(self):
        torch = pytest.importorskip("torch")
        from rocmcheck.train.kernels import check_kernels, profile_step

        a = torch.randn(768, 768)
        rows = profile_step(lambda: [a @ a for _ in range(4)], on_gpu=False)
        # Read as a GPU run's profile, these real rows are exactly "the matmuls ran on the CPU".
        result = check_kernels(rows, on_gpu=True, attn_requested="sdpa")
        assert result.status.value == "warn" and "aten::mm" in result.data["cpu_hot_ops"]


def test_timings_line_orders_the_parts_and_names_the_rest():
    from rocmcheck.train.report import timings_line

    line = timings_line({"wall_s": 10.0, "timings_s": {"load": 1.0, "train": 6.0, "data": 0.5}})
    assert line == "time: 10.0 s: train 6.0 s, load 1.0 s, data 0.5 s, other 2.5 s"
    assert timings_line({"wall_s": 1.0, "timings_s": {"train": 0.98}}) == "time: 1.0 s: train 1.0 s"
    assert timings_line({"wall_s": 3.0}) is None  # a run that stopped before timing anything
    assert timings_line({"timings_s": {"train": 1.0}}) is None
    assert timings_line({"wall_s": "x", "timings_s": {"train": 1.0}}) is None
