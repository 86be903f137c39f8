"""The planner reads every causal-LM family smoke-train trains: the parameter count of ModelShape against the real
one of transformers' own model (sum of numel, built on the meta device) for a tiny config of each family, and a MoE
estimate counting every expert's weights but only the active experts' activations."""

from __future__ import annotations

import json

import pytest
from model_folders import FAMILIES, MOE_FAMILIES, family_config

from rocmcheck.plan.estimate import estimate_memory
from rocmcheck.plan.shapes import shape_from_config

# Left out: a few biases and norms some families add (Qwen 2's q/k/v biases, OLMo 2's and Gemma 3's QK norms,
# GPT-OSS's expert biases and attention sinks): 1.1% of a 64-wide GPT-OSS, less at any real width.
PARAM_TOLERANCE = 0.02


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_parameter_count_matches_transformers_within_a_few_percent(model_type):
    torch = pytest.importorskip("torch")
    import transformers

    config = family_config(model_type)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    real = sum(p.numel() for p in model.parameters())
    shape = shape_from_config(json.loads(config.to_json_string()))
    assert abs(shape.param_count() / real - 1) <= PARAM_TOLERANCE, (shape.param_count(), real)
    assert shape.is_moe == (model_type in MOE_FAMILIES)


def test_a_moe_estimate_counts_all_experts_in_its_states_and_the_active_ones_in_its_activations():
    mixtral = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
               "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
               "num_experts_per_tok": 2}
    shape = shape_from_config(mixtral)
    assert 46.5e9 < shape.param_count() < 46.8e9  # Mixtral 8x7B: 46.7B parameters (Jiang et al. 2024)
    dense = shape_from_config({**mixtral, "num_local_experts": None, "intermediate_size": 2 * 14336})
    moe_est = estimate_memory(shape, micro_batch=1, seq_len=2048)
    dense_est = estimate_memory(dense, micro_batch=1, seq_len=2048)
    assert moe_est.line("activations").largest == dense_est.line("activations").largest  # top-2 of 14336 wide
    assert moe_est.line("optimizer states").largest == 8 * shape.param_count() > 3 * dense_est.line(
        "optimizer states").largest
    assert any("all 8 experts" in note for note in moe_est.notes)


def test_deepseek_shared_experts_and_dense_first_layers_are_read():
    shape = shape_from_config({"hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
                               "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
                               "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
                               "n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536,
                               "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                               "v_head_dim": 128})
    assert (shape.dense_layers, shape.moe_layers, shape.shared_intermediate_size) == (3, 58, 2048)
    assert 670e9 < shape.param_count() < 672e9  # DeepSeek-V3: 671B without its multi-token-prediction module
    assert shape.active_intermediate_size == 9 * 2048
