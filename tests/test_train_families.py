"""Any causal LM the installed transformers builds: which model_types smoke-train takes (read from transformers'
own table, torch not imported), and the LoRA targets chosen from each family's own Linear layers (real tiny models
of each family, built by transformers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from model_folders import FAMILIES, MOE_FAMILIES, family_config

from rocmcheck.train import families

REPO = Path(__file__).resolve().parents[1]


def test_the_causal_table_is_read_from_the_installed_source_as_transformers_has_it():
    pytest.importorskip("transformers")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert families.causal_lm_classes() == dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    for model_type in (*FAMILIES, "llama", "gemma3"):
        assert families.family(model_type).class_name, model_type
    assert families.family("wav2vec2").class_name is None  # an audio encoder: known, but no causal LM
    assert families.family(None).class_name is None and families.family(["llama"]).class_name is None


def test_checking_a_model_type_imports_no_torch():
    code = ("import sys; from rocmcheck.train.families import family; assert family('gemma2').class_name; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("value", ["OrderedDict(make())", "[1, 2]", "3", "("])
def test_a_source_without_the_literal_table_gives_nothing_and_never_raises(value):
    assert families.causal_table_from_source(f"MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = {value}") == {}
    assert families.causal_table_from_source("") == {}


def test_the_table_as_transformers_4_and_5_write_it():
    text = ('MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(\n    [\n        # Model for Causal LM mapping\n'
            '        ("gemma2", "Gemma2ForCausalLM"),\n        ("mixtral", "MixtralForCausalLM"),\n    ]\n)\n')
    assert families.causal_table_from_source(text) == {"gemma2": "Gemma2ForCausalLM", "mixtral": "MixtralForCausalLM"}


def linears(model_type: str) -> tuple[list[families.Linear], int | None]:
    torch = pytest.importorskip("torch")
    import transformers

    config = family_config(model_type)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    found = [families.Linear(n, m.in_features, m.out_features) for n, m in model.named_modules()
             if isinstance(m, torch.nn.Linear)]
    return found, families.num_experts(config.to_dict())


ATTENTION = ["k_proj", "o_proj", "q_proj", "v_proj"]
MLP = ["down_proj", "gate_proj", "up_proj"]


@pytest.mark.parametrize("model_type, expected", [
    ("gemma2", ATTENTION + MLP),
    ("phi3", ["down_proj", "gate_up_proj", "o_proj", "qkv_proj"]),  # fused projections, Phi-3's own names
    ("qwen2", ATTENTION + MLP),  # tied embeddings: the head is the embedding, never a target
    ("mixtral", ATTENTION),  # the experts are 3-D parameters and the router a TopKRouter: no Linear of theirs
    ("qwen2_moe", ATTENTION + MLP),  # the shared expert's MLP; its shared_expert_gate (one score) is a router
    ("deepseek_v3", MLP + ["kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "q_a_proj", "q_b_proj"]),
])
def test_lora_targets_are_the_decoder_linears_of_each_family(model_type, expected):
    found, experts = linears(model_type)
    assert families.lora_targets(found, experts) == sorted(expected)
    assert (experts is not None) == (model_type in MOE_FAMILIES)


def test_routers_the_head_and_linears_outside_the_layers_are_never_targets():
    found = [families.Linear("model.layers.0.mlp.gate", 64, 8), families.Linear("model.layers.0.block.router", 64, 8),
             families.Linear("model.layers.0.mlp.shared_expert_gate", 64, 1),
             families.Linear("model.layers.0.mlp.scorer", 64, 8),  # one score per expert, whatever its name
             families.Linear("lm_head", 64, 1000), families.Linear("model.vision_proj", 64, 64),
             families.Linear("transformer.h.11.attn.c_attn", 64, 192)]
    assert families.lora_targets(found, num_experts=8) == ["c_attn"]
    assert families.lora_targets(found) == ["c_attn", "scorer"]  # a dense model has no expert count to compare


def test_expert_counts_under_each_family_s_key():
    assert families.num_experts({"num_local_experts": 8}) == 8
    assert families.num_experts({"num_experts": 60}) == 60
    assert families.num_experts({"n_routed_experts": 256}) == 256
    assert families.num_experts({"text_config": {"num_experts": 16}}) == 16
    assert families.num_experts({"num_experts": True}) is None and families.num_experts({"hidden_size": 8}) is None


# -- the MoE verdicts on measured numbers ----------------------------------------------------------------------------
# A Mixtral folder's counts after 10 steps (tests/model_folders.py, seed 7), and a collapsed and a dead router.
HEALTHY = {"model.layers.0.mlp.experts": [70, 63, 59, 64], "model.layers.1.mlp.experts": [58, 62, 66, 70]}


def test_a_balanced_router_passes_and_a_finite_aux_loss_is_shown():
    from rocmcheck.train import verdicts

    r = verdicts.check_moe_router(HEALTHY, 2, 2.0121)
    assert r.status.value == "pass" and "aux loss 2.01" in r.summary and r.data["max_share"] < 0.3


@pytest.mark.parametrize("counts, aux, status, expected", [
    ({"l0": [256, 0] + [128] * 6, "l1": [128] * 8}, 2.0, "warn", "got no token in the whole run (l0 expert 1)"),
    ({"l0": [1000, 40] + [160] * 6, "l1": [128] * 8}, 2.0, "warn",
     "sends nearly every token to one expert (l0 expert 0"),
    (HEALTHY, float("nan"), "fail", "aux loss is nan"),
])
def test_a_dead_or_collapsed_router_warns_and_a_nonfinite_aux_loss_fails_with_a_fix(counts, aux, status, expected):
    """An idle or collapsed router can be the run's data and training (RESULTS 26): a warning whose fix is the CPU
    run that tells them from the gating kernels; a non-finite aux loss is a fault whatever the data."""
    from rocmcheck.train import verdicts

    r = verdicts.check_moe_router(counts, 2, aux)  # 8 experts, top-2: 1024 tokens, 2048 assignments
    assert r.status.value == status and expected in r.summary and r.fix is not None


def test_what_a_healthy_router_shows_by_chance_is_not_judged():
    from rocmcheck.train import verdicts

    # 256 experts, top-8, one batch of 1024 tokens repeated 10 steps: 32 a uniform router would give each expert
    counts = {"l0": [0] + [328] * 255}
    assert verdicts.check_moe_router(counts, 8, None, "not reported", batch_tokens=1024).status.value == "pass"
    assert verdicts.check_moe_router(counts, 8, None).status.value == "warn"  # were they 10 batches, it is idle
    # 4 experts, top-2: one expert in 48% of the assignments is a skew a random router shows on repeated tokens
    assert verdicts.check_moe_router({"l0": [60, 123, 40, 33]}, 2, 2.1).status.value == "pass"


def test_expert_gemms_are_judged_against_the_measured_bf16_tolerance():
    from rocmcheck.train import verdicts

    m = {"expert": 1, "rows": 64, "rel_error": 0.0029, "ref_norm": 0.13, "finite": True, "module": "MixtralExperts",
         "precision": "bf16 weights and inputs"}
    assert verdicts.check_moe_experts(m, "model.layers.0.mlp.experts").status.value == "pass"
    bad = verdicts.check_moe_experts({**m, "rel_error": 0.9}, "model.layers.0.mlp.experts")
    assert bad.status.value == "fail" and bad.fix.text == "rocmcheck probe gemm_blaslt"
    assert verdicts.check_moe_experts({**m, "finite": False}, "x").status.value == "fail"
    assert verdicts.check_moe_experts({"skipped": "why"}).status.value == "skip"


def test_flops_of_a_moe_count_the_experts_a_token_runs_through():
    torch = pytest.importorskip("torch")
    import transformers

    from rocmcheck.train import modeling

    with torch.device("meta"):
        mixtral = transformers.AutoModelForCausalLM.from_config(family_config("mixtral"))  # 4 experts, top-2
        qwen2 = transformers.AutoModelForCausalLM.from_config(family_config("qwen2"))
    experts = sum(p.numel() for n, p in mixtral.named_parameters() if ".experts." in n)
    assert modeling.idle_expert_params(mixtral) == (experts // 2, 0) and modeling.idle_expert_params(qwen2) == (0, 0)
    dense_flops = 6 * modeling.param_count(mixtral) + 12 * 2 * 64 * 64
    assert modeling.flops_per_token(mixtral, 64) == dense_flops - 6 * experts // 2
