"""The smoke-train's data: batched tokenizing gives the ids one call per text gives, and packing keeps whole
examples with labels on the responses only. Real tokenizers: the bundled one, and a byte-level BPE trained
here with the tokenizers library (merges, so a token can span several characters)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rocmcheck.train import data, task  # noqa: E402
from rocmcheck.train.config import BUNDLED_MODEL  # noqa: E402


def bundled_tokenizer():
    return transformers.AutoTokenizer.from_pretrained(BUNDLED_MODEL, local_files_only=True)


def bpe_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<pad>"])
    corpus = [e.prompt + e.response for e in task.train_examples(2000, seed=7)]
    tok.train_from_iterator(corpus, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>", unk_token="<unk>")


def one_call_per_text(tokenizer, ex: task.Example) -> tuple[list[int], list[int]]:
    bos, eos, _ = data.special_ids(tokenizer)
    prompt = [bos] + tokenizer.encode(ex.prompt, add_special_tokens=False)
    response = tokenizer.encode(ex.response, add_special_tokens=False) + [eos]
    return prompt + response, [data.IGNORE] * len(prompt) + response


class WithoutBackend:
    """A tokenizer with no Rust backend (a Python one): only its own batch call, as transformers' slow classes."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.bos_token_id, self.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
        self.pad_token_id = tokenizer.pad_token_id

    def __call__(self, texts, **kwargs):
        return self._tokenizer(texts, **kwargs)

    def encode(self, text, **kwargs):
        return self._tokenizer.encode(text, **kwargs)


def python_tokenizer():
    return WithoutBackend(bpe_tokenizer())


@pytest.mark.parametrize("make", [bundled_tokenizer, bpe_tokenizer, python_tokenizer],
                         ids=["bundled", "byte-level-bpe", "no-rust-backend"])
def test_batched_encoding_equals_one_call_per_text(make):
    tokenizer = make()
    examples = task.train_examples(300, seed=3) + task.eval_examples(20)
    assert data.encode_examples(tokenizer, examples) == [one_call_per_text(tokenizer, e) for e in examples]
    assert data.encode_examples(tokenizer, []) == []


def test_packed_rows_hold_whole_examples_with_labels_on_responses_only():
    tokenizer = bundled_tokenizer()
    examples = task.train_examples(200, seed=0)
    ids, labels = data.pack_rows(tokenizer, examples, 64)
    _, eos, pad = data.special_ids(tokenizer)
    encoded = data.encode_examples(tokenizer, examples)
    # Concatenating each row's tokens up to its padding gives the examples back, in order.
    flat = [t for row, lab in zip(ids.tolist(), labels.tolist()) for t, l in zip(row, lab)
            if not (t == pad and l == data.IGNORE)]
    assert flat == [t for e_ids, _ in encoded for t in e_ids]
    # Every labelled token is a response token or the end of an example, never a prompt token.
    labelled = sum(1 for lab in labels.flatten().tolist() if lab != data.IGNORE)
    assert labelled == sum(sum(1 for l in e_lab if l != data.IGNORE) for _, e_lab in encoded)
    assert (labels[labels != data.IGNORE] == ids[labels != data.IGNORE]).all()
    with pytest.raises(ValueError, match="shorter than one example"):
        data.pack_rows(tokenizer, examples[:3], 4)


@pytest.mark.parametrize("rows", [1, 16, 1920])
def test_asking_for_rows_packs_the_rows_every_example_would_put_first(rows):
    # The run asks for its rows from an endless stream of examples: only what they take is made and encoded.
    tokenizer = bundled_tokenizer()
    every_ids, every_labels = data.pack_rows(tokenizer, task.train_examples(12 * rows + 20, seed=0), 64)
    ids, labels = data.pack_rows(tokenizer, task.iter_train_examples(0), 64, rows=rows)
    assert ids.shape == (rows, 64) and ids.tolist() == every_ids[:rows].tolist()
    assert labels.tolist() == every_labels[:rows].tolist()
    assert task.train_examples(50, seed=0) == [e for e, _ in zip(task.iter_train_examples(0), range(50))]
    with pytest.raises(ValueError, match="shorter than one example"):
        data.pack_rows(tokenizer, task.iter_train_examples(0), 4, rows=rows)
