"""Builds the bundled tiny LLaMA: a BPE tokenizer and a LlamaForCausalLM pretrained on generated data.

    python scripts/make_bundled_model.py [--out rocmcheck/train/assets/tiny-llama]

Everything is generated here (no download): the tokenizer is trained on text built from the task
vocabulary plus printable ASCII, and the model is pretrained on "copy" and "reverse" digit tasks so
the fine-tune ("inc", see task.py) starts from a model that knows the format but not the skill.
Deterministic for a given torch build and thread count (it pins both seeds and threads).
Afterwards it records the CPU reference loss curve of the default smoke-train (record_reference.py).
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rocmcheck.train import task  # noqa: E402
from rocmcheck.train.config import BUNDLED_MODEL  # noqa: E402
from rocmcheck.train.data import pack_rows  # noqa: E402

DEFAULT_DIR = BUNDLED_MODEL
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
PRETRAIN_STEPS = 400
PRETRAIN_BATCH = 32
PRETRAIN_SEQ = 128
SEED = 1234


def build_tokenizer(vocab_size: int = 160):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(SEED)
    words = list(task.PRETRAIN_OPS) + [task.FINETUNE_OP, "="]
    lines = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(2000)]
    lines += [task.make_example(op, "0123456789").prompt for op in words[:-1]]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    # Digits are always single tokens, so every digit string tokenizes the same way in any context.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)]
    )
    tok.decoder = decoders.BPEDecoder()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=list(string.printable.strip()),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )


def build_model(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, like the LLaMA shapes people fine-tune
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(SEED)
    return LlamaForCausalLM(config)


def pretrain(model, tokenizer, steps: int = PRETRAIN_STEPS, log=print) -> list[float]:
    examples = []
    rng = random.Random(SEED)
    for i in range(steps * PRETRAIN_BATCH * 12):
        op = task.PRETRAIN_OPS[i % len(task.PRETRAIN_OPS)]
        examples.append(task.make_example(op, "".join(rng.choice("0123456789") for _ in range(rng.randint(3, 6)))))
    ids, labels = pack_rows(tokenizer, examples, PRETRAIN_SEQ)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.05)
    losses = []
    model.train()
    for step in range(steps):
        rows = slice(step * PRETRAIN_BATCH, (step + 1) * PRETRAIN_BATCH)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids[rows], labels=labels[rows]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            log(f"pretrain step {step:4d} loss {losses[-1]:.4f}")
    return losses


def _portable_tokenizer_config(path: Path) -> None:
    """transformers 5 writes tokenizer_class "TokenizersBackend", which 4.x cannot resolve; every
    version loads a tokenizer.json through PreTrainedTokenizerFast."""
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg.pop("backend", None)
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--steps", type=int, default=PRETRAIN_STEPS)
    ap.add_argument("--no-reference", action="store_true", help="skip recording the CPU reference curve")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    losses = pretrain(model, tokenizer, args.steps)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    _portable_tokenizer_config(args.out / "tokenizer_config.json")
    (args.out / "pretrain_loss.json").write_text(
        json.dumps({"seed": SEED, "loss": [round(x, 5) for x in losses]}) + "\n")
    print(f"saved {sum(p.numel() for p in model.parameters()):,} params to {args.out}")
    if not args.no_reference:
        from record_reference import record_reference

        print("reference curve:", record_reference(args.out, "cpu"))


if __name__ == "__main__":
    main()
