"""The first use of the step's kernels begun in a thread (rocmcheck/train/kernel_warmup.py): the attention's shape
and the layer's sizes read from real model configs, the warm-up's ops run on the CPU (the same ops a GPU runs),
and the thread on a machine without a GPU and (with ROCMCHECK_TEST_DEVICE=cuda) on one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from devices import TRAIN_DEVICE

torch = pytest.importorskip("torch")

from rocmcheck.train.config import BUNDLED_MODEL  # noqa: E402
from rocmcheck.train.kernel_warmup import (  # noqa: E402
    WARM_MAX_HIDDEN,
    WARM_MAX_INTERMEDIATE,
    WARM_MAX_VOCAB,
    KernelWarmup,
    attention_shape,
    gemm_bytes,
    layer_sizes,
    linear_shapes,
    warm_gemms,
)

# The attention fields of public config.json files on the Hugging Face Hub, as published.
MISTRAL_7B_V01 = {"hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 32000, "num_attention_heads": 32,
                  "num_key_value_heads": 8, "sliding_window": 4096}
QWEN2_7B = {"hidden_size": 3584, "intermediate_size": 18944, "vocab_size": 152064, "num_attention_heads": 28,
            "num_key_value_heads": 4, "sliding_window": 131072, "use_sliding_window": False, "max_window_layers": 28}
QWEN3_8B = {"hidden_size": 4096, "intermediate_size": 12288, "vocab_size": 151936, "head_dim": 128,
            "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": None, "use_sliding_window": False}
LLAMA_31_8B = {"hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 128256, "num_attention_heads": 32,
               "num_key_value_heads": 8}
TINYLLAMA_11B = {"hidden_size": 2048, "intermediate_size": 5632, "vocab_size": 32000, "num_attention_heads": 32,
                 "num_key_value_heads": 4}
GEMMA_7B = {"hidden_size": 3072, "intermediate_size": 24576, "vocab_size": 256000, "head_dim": 256,
            "num_attention_heads": 16, "num_key_value_heads": 16}
LLAMA_2_70B = {"hidden_size": 8192, "intermediate_size": 28672, "vocab_size": 32000, "num_attention_heads": 64,
               "num_key_value_heads": 8}


@pytest.mark.parametrize("config, expected", [
    (LLAMA_31_8B, (32, 8, 128)),
    (TINYLLAMA_11B, (32, 4, 64)),
    (QWEN3_8B, (32, 8, 128)),  # head_dim said outright
    (QWEN2_7B, (28, 4, 128)),  # a window it does not use
    (MISTRAL_7B_V01, (32, 8, 128)),  # a 4096 window over 64 tokens: transformers passes no mask
], ids=["llama-3.1-8b", "tinyllama-1.1b", "qwen3-8b", "qwen2-7b", "mistral-7b-v0.1"])
def test_the_shape_is_the_configs_heads_and_head_size(config, expected):
    assert attention_shape(config, seq_len=64) == expected


def test_a_window_no_longer_than_the_sequence_takes_a_mask_and_is_not_warmed():
    assert attention_shape(MISTRAL_7B_V01, seq_len=4096) is None
    assert attention_shape(MISTRAL_7B_V01, seq_len=4095) == (32, 8, 128)
    hybrid = {**QWEN3_8B, "sliding_window": 512, "layer_types": ["sliding_attention", "full_attention"]}
    assert attention_shape(hybrid, seq_len=64) == (32, 8, 128) and attention_shape(hybrid, seq_len=512) is None
    assert attention_shape({**hybrid, "sliding_window": None}, seq_len=64) is None  # sliding layers, no size said


@pytest.mark.parametrize("config", [{}, {"num_attention_heads": 32}, {"num_attention_heads": "x", "hidden_size": 1},
                                    {"num_attention_heads": 0, "hidden_size": 4096},
                                    {"num_attention_heads": 32, "num_key_value_heads": 5, "hidden_size": 4096}],
                         ids=["empty", "no-size", "not-a-number", "no-heads", "uneven-groups"])
def test_a_config_that_does_not_say_plainly_gives_no_shape(config):
    assert attention_shape(config, 64) is None


def test_the_bundled_models_shape_and_a_folder_without_a_config(tmp_path):
    bundled = json.loads((BUNDLED_MODEL / "config.json").read_text())
    assert attention_shape(bundled, 64) == (bundled["num_attention_heads"], bundled["num_key_value_heads"],
                                            bundled["head_dim"])
    assert "config.json not readable" in KernelWarmup(tmp_path, 64).join()["skipped"]
    (tmp_path / "config.json").write_text("{}")
    assert "neither" in KernelWarmup(tmp_path, 64).join()["skipped"]


@pytest.mark.skipif(TRAIN_DEVICE == "cuda", reason="this machine has a GPU")
def test_without_a_gpu_the_thread_says_so():
    found = KernelWarmup(Path(BUNDLED_MODEL), 64).join()
    assert found["skipped"] == "no GPU" and found["attention"] == [4, 2, 32], found
    assert found["layer"] == [128, 384, 109]
    assert found["gemms"] == {"shapes": [], "rows": []}  # no rows asked for: no GEMMs
    other = KernelWarmup(Path(BUNDLED_MODEL), 64, attention=False, rows=(4, 16, 16)).join()
    assert other["gemms"] == {"shapes": [[128, 128], [128, 64], [128, 384], [384, 128], [128, 109]], "rows": [4, 16]}
    assert other["attention"] == "not torch's sdpa" and other["layer"] == [128, 384, 109], other


@pytest.mark.skipif(TRAIN_DEVICE != "cuda", reason="needs a GPU (ROCMCHECK_TEST_DEVICE=cuda)")
def test_on_a_gpu_the_kernels_are_run_and_timed():
    """...and the device's random generator is left as it was: the run seeds it while the thread runs, and a LoRA
    adapter's initial weights come from it."""
    before = torch.cuda.get_rng_state()
    found = KernelWarmup(Path(BUNDLED_MODEL), 64).join()
    assert "error" not in found and found["seconds"] > 0, found
    assert found["attention"] == [4, 2, 32] and found["layer"] == [128, 384, 109], found
    assert torch.equal(torch.cuda.get_rng_state(), before)


@pytest.mark.parametrize("config, expected", [
    ({"hidden_size": 96, "intermediate_size": 256, "vocab_size": 300}, (96, 256, 300)),
    (TINYLLAMA_11B, (WARM_MAX_HIDDEN, WARM_MAX_INTERMEDIATE, WARM_MAX_VOCAB)),
    (LLAMA_2_70B, (WARM_MAX_HIDDEN, WARM_MAX_INTERMEDIATE, WARM_MAX_VOCAB)),
], ids=["small", "tinyllama-1.1b", "llama-2-70b"])
def test_the_layer_is_the_configs_sizes_up_to_the_caps(config, expected):
    assert layer_sizes(config) == expected


@pytest.mark.parametrize("config", [{}, {"hidden_size": 4096, "intermediate_size": 11008},
                                    {"hidden_size": "wide", "intermediate_size": 1, "vocab_size": 1},
                                    {"hidden_size": 0, "intermediate_size": 11008, "vocab_size": 32000},
                                    {"hidden_size": 1, "intermediate_size": 4, "vocab_size": 8}],
                         ids=["empty", "no-vocab", "not-a-number", "no-width", "too-narrow-to-halve"])
def test_a_config_without_plain_sizes_gives_no_layer(config):
    assert layer_sizes(config) is None


def test_an_attention_the_warm_up_cannot_run_still_warms_the_layer(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**MISTRAL_7B_V01, "sliding_window": 32}))
    found = KernelWarmup(tmp_path, 64).join()
    assert found["attention"] == "not the plain causal kind this warms" and found["layer"] == [512, 1024, 2048]


# The warm-up's ops on the CPU in a fresh interpreter: torch has every one of them there too, so a misspelt op or
# a shape that does not fit fails here. The thread runs beside the main thread's imports, so the ops must import
# nothing (torch.optim's first step imports torch._dynamo), and the run seeds the random generator meanwhile, so
# they must not draw from it.
WARM_ON_CPU = r"""
import json, sys
import torch
from rocmcheck.train.kernel_warmup import attention_shape, layer_sizes, linear_shapes, warm_attention, warm_gemms
from rocmcheck.train.kernel_warmup import warm_layer
config = json.loads(sys.argv[1])
torch.manual_seed(0)
rng, modules = torch.get_rng_state(), set(sys.modules)
warm_attention(torch.device("cpu"), attention_shape(config, 16), 16)
warm_layer(torch.device("cpu"), layer_sizes(config), 16)
warm_gemms(torch.device("cpu"), linear_shapes(config), 16, (4, 16))
print(json.dumps({"imported": sorted(set(sys.modules) - modules),
                  "rng_untouched": torch.equal(torch.get_rng_state(), rng)}))
"""


@pytest.mark.parametrize("config", [json.loads((BUNDLED_MODEL / "config.json").read_text()),
                                    {"hidden_size": 96, "intermediate_size": 256, "vocab_size": 300,
                                     "num_attention_heads": 6, "num_key_value_heads": 2}],
                         ids=["bundled", "grouped-query"])
def test_the_warm_up_runs_its_ops_imports_nothing_and_draws_no_random_numbers(config):
    r = subprocess.run([sys.executable, "-c", WARM_ON_CPU, json.dumps(config)], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert found == {"imported": [], "rng_untouched": True}, found


@pytest.mark.parametrize("config, expected", [
    # the query and output projections are one shape at 4096 wide: each shape once; the 128k head is over the cap
    (LLAMA_31_8B, [(4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096)]),
    (TINYLLAMA_11B, [(2048, 2048), (2048, 256), (2048, 5632), (5632, 2048), (2048, 32000)]),
    # heads x head_dim is not the width; key/value heads as many as the query's
    (GEMMA_7B, [(3072, 4096), (4096, 3072), (3072, 24576), (24576, 3072)]),
    (LLAMA_2_70B, [(8192, 8192), (8192, 1024)]),
], ids=["llama-3.1-8b", "tinyllama-1.1b", "gemma-7b", "llama-2-70b"])
def test_the_gemms_are_the_models_projections_each_once(config, expected):
    """A weight over WARM_MAX_GEMM_WEIGHT (134M) is left out: Gemma's head (256,000 x 3,072: 786M), the 70B's MLP
    (235M) and head (262M)."""
    assert linear_shapes(config) == expected


def test_a_config_without_plain_sizes_gives_no_gemms():
    assert linear_shapes({}) == [] and linear_shapes({**LLAMA_31_8B, "num_attention_heads": 0}) == []
    assert linear_shapes({**LLAMA_31_8B, "vocab_size": "many"}) == []


def test_a_gemm_that_would_take_too_much_of_the_free_memory_is_left_out():
    shapes = [(128, 128), (128, 4096)]
    assert gemm_bytes(128, 4096, 64) == 2 * (2 * 64 * 128 + 2 * 4096 * 128 + 64 * 4096)
    assert warm_gemms(torch.device("cpu"), shapes, 16, (4,), max_bytes=gemm_bytes(128, 128, 64)) == 1
    assert warm_gemms(torch.device("cpu"), shapes, 16, (4, 16)) == 0
