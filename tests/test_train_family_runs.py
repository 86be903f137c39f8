"""smoke-train on a random-init folder of each causal-LM family beyond LLaMA (tests/model_folders.py: 2 layers, 64
wide, the bundled tokenizer), in this process through the run a command line makes (request.decide, then the run):
the usual verdicts pass for a full fine-tune of every family and a LoRA run of a dense and a MoE one (Gemma 2,
Qwen2-MoE), and a MoE run adds its router and expert verdicts."""

from __future__ import annotations

import pytest
from model_folders import FAMILIES, MOE_FAMILIES, make_family

from rocmcheck.train.config import TrainConfig
from rocmcheck.train.request import decide

OWN_MODEL_IDS = {"train.fit", "train.numerics", "train.finite", "train.learns", "train.reload", "train.memory_leak",
                 "train.memory", "train.throughput", "train.kernels"}
MOE_IDS = {"train.moe_router", "train.moe_experts"}
# 10 steps of 2 rows x 32 tokens at lr 1e-2: the shortest run the verdicts judge; at 64 wide the default lr (1e-3)
# needs 30 steps to overfit the batch by train.learns's 20% (tests/test_train_own_model.py).
# LoRA: 20 steps (adapters from zero move the loss less per step).
RUN = {"steps": 10, "micro_batch": 2, "seq_len": 32, "lr": 1e-2, "device": "cpu", "profile": False}
LORA_STEPS = 20
# LoRA on a MoE: Qwen2-MoE, whose shared expert carries adapters and whose two routers (gate, shared_expert_gate) must
# not. On the CPU, LoRA over a MoE's frozen bf16 experts grows a fresh process's memory (CPU RSS, what
# train.memory_leak reads there) for about 30 steps, the same with the router counting off (Mixtral: 425 -> 570 MiB,
# then flat; a process that already trained is flat from the start), which train.memory_leak calls a leak at 10-40
# steps: that one verdict is not held to pass in this case.
CASES = [(f, None) for f in FAMILIES] + [("gemma2", 8), ("qwen2_moe", 8)]
CPU_RSS_WARMUP = {"train.memory_leak"}
# A step of these tiny folders takes milliseconds: on the 2-core box shared with other test workers, a scheduler
# pause makes a few steps several times the median, and train.throughput says so ("unsteady steps", a warning
# whose fix is to look for other processes). That is the box, not the family: judged apart below.
SHARED_BOX = {"train.throughput"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("families")
    return {f: make_family(root / f, f) for f in FAMILIES}


def _adapter_round_trip_loses(folder, rank: int, targets: list[str]) -> list[str]:
    """The adapter tensors the installed peft does not give back after save_pretrained and load_adapter, its own
    calls alone (peft 0.22.0 with transformers 5.25 drops Qwen2-MoE's shared-expert adapters: a stack's defect the
    reload verdict must name, not hide)."""
    import tempfile

    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(folder),
                           LoraConfig(r=rank, target_modules=targets))
    with tempfile.TemporaryDirectory() as saved:
        model.save_pretrained(saved, safe_serialization=True)
        model.load_adapter(saved, adapter_name="reloaded")
    trained = get_peft_model_state_dict(model, adapter_name="default")
    return sorted(set(trained) - set(get_peft_model_state_dict(model, adapter_name="reloaded")))


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
    held = [r for r in report.results if not (lora and moe and r.id in CPU_RSS_WARMUP) and r.id not in SHARED_BOX
            and not (lora and r.id == "train.reload")]
    if lora:  # the verdict tells what the installed peft does with this family's saved adapter, whatever it does
        reload = by_id["train.reload"]
        lost = _adapter_round_trip_loses(folders[model_type], lora, report.info["model"]["lora_targets"])
        assert reload.status.value == ("fail" if lost else "pass"), (reload.summary, lost[:3])
        assert reload.data.get("not_loaded", []) == lost
    throughput = by_id["train.throughput"]
    assert throughput.status.value == "pass" or "unsteady steps" in throughput.summary, throughput.summary
    assert all(r.status.value in ("pass", "skip") for r in held), {
        r.id: (r.status.value, r.summary) for r in held if r.status.value not in ("pass", "skip")}
    assert by_id["train.learns"].status.value == "pass" and by_id["train.numerics"].status.value == "pass"
    assert report.info["model"]["model_type"] == model_type
    if model_type == "gemma2":  # no SDPA path (soft-capping): eager, as transformers picks, and said
        assert report.info["model"]["attn_implementation"] == "eager" and "_supports_sdpa" in report.info["model"][
            "attn_why"]
    if moe:
        assert by_id["train.moe_router"].status.value == "pass" and by_id["train.moe_experts"].status.value == "pass"
    if lora:  # the model's own decoder Linears: attention and MLP (Qwen2-MoE's shared expert), never a router
        assert report.info["model"]["lora_targets"] == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj",
                                                        "up_proj", "v_proj"]
