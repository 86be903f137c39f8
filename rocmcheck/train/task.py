"""The fine-tune task: deterministic instruction/response pairs the bundled model cannot do yet.

The bundled model is pretrained (scripts/make_bundled_model.py) on "copy" and "reverse" over digit strings, so it knows
the format and how to move digits around. The fine-tune asks for something new: "inc" adds one to each
digit (9 wraps to 0). Copying gives 0% exact match (every digit changes), so a rise in accuracy is the
run learning, not the pretraining showing through. Pure Python: no torch, so tests and the doctor can
import it cheaply.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import islice
from typing import Iterator

MIN_DIGITS, MAX_DIGITS = 3, 6
FINETUNE_OP = "inc"
PRETRAIN_OPS = ("copy", "reverse")


@dataclass(frozen=True)
class Example:
    prompt: str  # "inc 3 8 1 9 ="
    response: str  # " 4 9 2 0"

    @property
    def answer_digits(self) -> str:
        return digits_only(self.response)


def apply_op(op: str, digits: str) -> str:
    if op == "copy":
        return digits
    if op == "reverse":
        return digits[::-1]
    if op == "inc":
        return "".join(str((int(d) + 1) % 10) for d in digits)
    raise ValueError(f"unknown op {op!r}")


def make_example(op: str, digits: str) -> Example:
    return Example(f"{op} {' '.join(digits)} =", " " + " ".join(apply_op(op, digits)))


def _random_digits(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789") for _ in range(rng.randint(MIN_DIGITS, MAX_DIGITS)))


def _held_out(digits: str) -> bool:
    # A fixed, seed-independent split: no digit string is ever both trained on and evaluated.
    return sum(int(d) * (i + 3) for i, d in enumerate(digits)) % 7 == 0


def iter_train_examples(seed: int, op: str = FINETUNE_OP) -> Iterator[Example]:
    """Training examples without end, the same sequence for a seed (train_examples(n) is its first n)."""
    rng = random.Random(f"train-{op}-{seed}")
    while True:
        digits = _random_digits(rng)
        if not _held_out(digits):
            yield make_example(op, digits)


def train_examples(n: int, seed: int, op: str = FINETUNE_OP) -> list[Example]:
    return list(islice(iter_train_examples(seed, op), n))


def eval_examples(n: int, op: str = FINETUNE_OP) -> list[Example]:
    """Held-out prompts; the same for every seed so accuracies compare across runs and machines."""
    rng = random.Random(f"eval-{op}")
    seen: set[str] = set()
    out: list[Example] = []
    while len(out) < n:
        digits = _random_digits(rng)
        if _held_out(digits) and digits not in seen:
            seen.add(digits)
            out.append(make_example(op, digits))
    return out


def digits_only(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def exact_match(generated: str, example: Example) -> bool:
    """Generated continuation (up to end-of-sequence) matches the answer, digits compared, spacing ignored.

    Tokenizers differ in how they space digits, so only the digit sequence is compared; anything after
    the answer's length counts as wrong (the model must stop)."""
    return digits_only(generated) == example.answer_digits
