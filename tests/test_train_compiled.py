"""`--compile` keeps SDPA's causal fast path: a real torch.compile of a real LlamaForCausalLM on this CPU.

Plain torch.compile(model) makes transformers build a dense causal mask (it cannot prove the batch is
unpadded while tracing); compile_model's training calls must reach SDPA with no mask, train exactly like the
eager model, and still honour a padding mask when one is given."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402

from rocmcheck.train.compiled import CAUSAL_SDPA, compile_model, has_sliding_window  # noqa: E402

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
            vocab_size=128, max_position_embeddings=64, tie_word_embeddings=False)


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    conf = LlamaConfig(**TINY)
    conf._attn_implementation = "sdpa"
    conf.use_cache = False  # as in training (HF's gradient checkpointing forces it): no cache, so transformers
    # checks position ids for packed sequences, which it cannot do while tracing
    torch.manual_seed(seed)
    return LlamaForCausalLM(conf).train()


@pytest.fixture()
def masks_seen():
    """Record, per attention call, whether SDPA got a mask; both names route through transformers' own function."""
    seen: list[bool] = []

    def spy(module, query, key, value, attention_mask, **kwargs):
        seen.append(attention_mask is not None)
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    compile_model(tiny_llama(), "sdpa")  # registers CAUSAL_SDPA, so the spy below replaces it
    AttentionInterface.register("sdpa", spy)
    AttentionInterface.register(CAUSAL_SDPA, spy)
    yield seen
    AttentionInterface.register("sdpa", sdpa_attention_forward)
    AttentionInterface.register(CAUSAL_SDPA, sdpa_attention_forward)
    torch._dynamo.reset()


def test_plain_torch_compile_builds_the_mask_that_compile_model_avoids(masks_seen):
    """The premise: without compile_model, the compiled model hands SDPA a dense mask (this transformers)."""
    x = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    torch.compile(tiny_llama())(input_ids=x, labels=x)
    assert masks_seen == [True, True]


def test_training_call_reaches_sdpa_unmasked_and_trains_like_eager(masks_seen):
    x = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    eager = tiny_llama()
    ref = eager(input_ids=x, labels=x)
    ref.loss.backward()
    masks_seen.clear()

    model = tiny_llama()
    out = compile_model(model, "sdpa")(input_ids=x, labels=x)
    out.loss.backward()

    assert masks_seen == [False, False]  # both layers: no mask, so SDPA ran with is_causal=True
    assert out.loss.item() == pytest.approx(ref.loss.item(), abs=1e-5)
    assert torch.allclose(out.logits, ref.logits, atol=1e-5)
    grad = model.model.layers[0].self_attn.q_proj.weight.grad
    ref_grad = eager.model.layers[0].self_attn.q_proj.weight.grad
    assert torch.allclose(grad, ref_grad, atol=1e-6)
    assert model.config._attn_implementation == "sdpa"  # switched only for the call: eval and save see "sdpa"


def test_padded_batch_keeps_its_mask_and_matches_eager(masks_seen):
    x = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(2))
    pad = torch.ones_like(x)
    pad[0, :5] = 0  # left padding, as generation uses
    model = tiny_llama()
    forward = compile_model(model, "sdpa")
    with torch.no_grad():
        expected = model(input_ids=x, attention_mask=pad).logits
        masks_seen.clear()
        got = forward(input_ids=x, attention_mask=pad).logits
    assert masks_seen == [True, True]
    assert torch.allclose(got[:, 5:], expected[:, 5:], atol=1e-5)


def test_other_attention_and_sliding_windows_get_plain_compile():
    assert not has_sliding_window(LlamaConfig(**TINY))
    from transformers import MistralConfig, Qwen2Config

    assert has_sliding_window(MistralConfig(sliding_window=4096))
    assert not has_sliding_window(MistralConfig(sliding_window=None))
    assert not has_sliding_window(Qwen2Config(use_sliding_window=False))
    model = tiny_llama()
    assert isinstance(compile_model(model, "eager"), torch.nn.Module)  # torch.compile's wrapper, no switch
    torch._dynamo.reset()
