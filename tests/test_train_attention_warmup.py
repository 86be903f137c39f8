"""The attention kernels' first use begun in a thread (rocmcheck/train/attention_warmup.py): the shape read from
real model configs, and the thread on a machine without a GPU and (with ROCMCHECK_TEST_DEVICE=cuda) on one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from devices import TRAIN_DEVICE

torch = pytest.importorskip("torch")

from rocmcheck.train.attention_warmup import AttentionWarmup, attention_shape  # noqa: E402
from rocmcheck.train.config import BUNDLED_MODEL  # noqa: E402

# The attention fields of public config.json files on the Hugging Face Hub, as published.
MISTRAL_7B_V01 = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096}
QWEN2_7B = {"hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4, "sliding_window": 131072,
            "use_sliding_window": False, "max_window_layers": 28}
QWEN3_8B = {"hidden_size": 4096, "head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 8,
            "sliding_window": None, "use_sliding_window": False}
LLAMA_31_8B = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}
TINYLLAMA_11B = {"hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4}


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
    assert "config.json not readable" in AttentionWarmup(tmp_path, 64).join()["skipped"]
    (tmp_path / "config.json").write_text("{}")
    assert "skipped" in AttentionWarmup(tmp_path, 64).join()


@pytest.mark.skipif(TRAIN_DEVICE == "cuda", reason="this machine has a GPU")
def test_without_a_gpu_the_thread_says_so():
    found = AttentionWarmup(Path(BUNDLED_MODEL), 64).join()
    assert found["skipped"] == "no GPU" and found["shape"] == [4, 2, 32], found


@pytest.mark.skipif(TRAIN_DEVICE != "cuda", reason="needs a GPU (ROCMCHECK_TEST_DEVICE=cuda)")
def test_on_a_gpu_the_kernels_are_run_and_timed():
    """...and the device's random generator is left as it was: the run seeds it while the thread runs, and a LoRA
    adapter's initial weights come from it."""
    before = torch.cuda.get_rng_state()
    found = AttentionWarmup(Path(BUNDLED_MODEL), 64).join()
    assert "error" not in found and found["seconds"] > 0, found
    assert torch.equal(torch.cuda.get_rng_state(), before)


# The warm-up's ops on the CPU in a fresh interpreter: torch has them there too, so a misspelt op or a shape that
# does not fit fails here. The thread runs beside the main thread's imports, so the ops must import nothing (two
# threads in one package's imports can deadlock; torch.optim's first step, or backward() given a gradient, would
# import torch._dynamo or sympy), and the run seeds the random generator meanwhile, so they must not draw from it.
WARM_ON_CPU = r"""
import json, sys
import torch
from rocmcheck.train.attention_warmup import attention_shape, warm_attention
found = []
for config in json.loads(sys.argv[1]):
    torch.manual_seed(0)
    rng, modules = torch.get_rng_state(), set(sys.modules)
    warm_attention(torch.device("cpu"), attention_shape(config, 16), 16)
    found.append({"imported": sorted(set(sys.modules) - modules),
                  "rng_untouched": torch.equal(torch.get_rng_state(), rng)})
print(json.dumps(found))
"""


def test_the_warm_up_runs_its_ops_imports_nothing_and_draws_no_random_numbers():
    """Llama 2 7B's shape (a key/value head per query head), then the bundled model's and TinyLlama's (grouped
    queries, torch's enable_gqa), in one interpreter: each is checked against the modules there before it ran."""
    llama_2_7b = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32}
    configs = [llama_2_7b, json.loads((BUNDLED_MODEL / "config.json").read_text()), TINYLLAMA_11B]
    r = subprocess.run([sys.executable, "-c", WARM_ON_CPU, json.dumps(configs)], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert found == [{"imported": [], "rng_untouched": True}] * 3, found
