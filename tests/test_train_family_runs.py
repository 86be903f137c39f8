"""smoke-train on a random-init folder of each causal-LM family beyond LLaMA (tests/model_folders.py: 2 layers, 64
wide, the bundled tokenizer), in this process through the run a command line makes (request.decide, then the run):
the usual verdicts pass for a full fine-tune of every family and a LoRA run of a dense and a MoE one, and a MoE run
adds its router and expert verdicts."""

from __future__ import annotations

import pytest
from model_folders import DENSE_FAMILIES, FAMILIES, MOE_FAMILIES, make_family

from rocmcheck.train.config import TrainConfig
from rocmcheck.train.request import decide

OWN_MODEL_IDS = {"train.fit", "train.numerics", "train.finite", "train.learns", "train.reload", "train.memory_leak",
                 "train.memory", "train.throughput", "train.kernels"}
MOE_IDS = {"train.moe_router", "train.moe_experts"}
# 10 steps of 2 rows x 32 tokens at lr 1e-2: the shortest run the verdicts judge; at 64 wide the default lr (1e-3)
# needs 30 steps to overfit the batch by train.learns's 20% (tests/test_train_own_model.py).
# LoRA: 20 steps; in 10 the process's memory (CPU RSS) still grows as a fresh process's allocator warms up under
# peft with Mixtral's experts (+80 MiB over 10 steps, then flat), which train.memory_leak would call a leak.
RUN = {"steps": 10, "micro_batch": 2, "seq_len": 32, "lr": 1e-2, "device": "cpu", "profile": False}
LORA_STEPS = 20
CASES = [(f, None) for f in FAMILIES] + [(next(iter(DENSE_FAMILIES)), 8), (next(iter(MOE_FAMILIES)), 8)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("families")
    return {f: make_family(root / f, f) for f in FAMILIES}


@pytest.mark.parametrize("model_type, lora", CASES, ids=[f"{f}{'-lora' if r else ''}" for f, r in CASES])
def test_each_family_trains_and_passes(folders, model_type, lora):
    if lora:
        pytest.importorskip("peft")
    from rocmcheck.train.run import run_smoke_train

    request = decide(TrainConfig(model=folders[model_type], lora_rank=lora, **{**RUN, "steps": LORA_STEPS if lora
                                                                                  else RUN["steps"]}))
    report = run_smoke_train(request.cfg)
    by_id = {r.id: r for r in report.results}
    moe = model_type in MOE_FAMILIES
    assert set(by_id) == OWN_MODEL_IDS | (MOE_IDS if moe else set())
    assert all(r.status.value in ("pass", "skip") for r in report.results), {
        k: (r.status.value, r.summary) for k, r in by_id.items()}
    assert by_id["train.learns"].status.value == "pass" and by_id["train.numerics"].status.value == "pass"
    assert report.info["model"]["model_type"] == model_type
    if model_type == "gemma2":  # no SDPA path (soft-capping): eager, as transformers picks, and said
        assert report.info["model"]["attn_implementation"] == "eager" and "_supports_sdpa" in report.info["model"][
            "attn_why"]
    if moe:
        assert by_id["train.moe_router"].status.value == "pass" and by_id["train.moe_experts"].status.value == "pass"
    if lora:  # the model's own decoder Linears: Mixtral's experts are 3-D parameters, its router a TopKRouter
        assert report.info["model"]["lora_targets"] == (["k_proj", "o_proj", "q_proj", "v_proj"] if moe else
                                                        ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj",
                                                         "up_proj", "v_proj"])
