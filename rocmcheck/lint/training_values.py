"""Values of training arguments that the key check cannot see: a fraction where TrainingArguments counts steps, a
count where it takes a fraction, a fraction where it needs a whole number. What a value means depends on the
transformers release that parses it, so each rule is judged for the releases that may run the file (the installed
one for a TrainingArguments file; those LLaMA-Factory accepts for its YAML).

From transformers/training_args.py: up to 4.57, `warmup_steps: int` is a count of steps and `warmup_ratio` a
fraction that __post_init__ refuses outside [0, 1] ("warmup_ratio must lie in range [0,1]"); from 5.0,
`warmup_steps: float` is a fraction of the total steps below 1 and a count from 1 (get_warmup_steps), and a
`warmup_ratio` still given is copied into warmup_steps as it is (5.0 to 5.14; removed after).
"""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.lint.training_keys import accepts
from rocmcheck.safe.text import excerpt

FRACTIONAL_WARMUP_FROM = Version("5.0.0")  # warmup_steps below 1 is a fraction of the total steps from here
# Integer fields of TrainingArguments (every release read): a fraction is never valid for them.
WHOLE_COUNTS = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
                "max_steps")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _span(versions: list[Version]) -> str:
    return f"transformers {versions[0]}" if len(versions) == 1 else \
        f"transformers {versions[0]} to {versions[-1]}"


def check_values(data: dict, file: str, versions: list[Version], consumer: str) -> list[LintMessage]:
    """versions: the transformers releases that may parse the file (sorted; empty: not known, every rule that
    depends on the release is skipped)."""
    out: list[LintMessage] = []
    old = [v for v in versions if v < FRACTIONAL_WARMUP_FROM]
    new = [v for v in versions if v >= FRACTIONAL_WARMUP_FROM]

    def msg(severity: Severity, code: str, key: str, text: str, fix) -> None:
        out.append(LintMessage(severity, code, file, key, text, fix=fix, consumer=consumer))

    steps = _number(data.get("warmup_steps"))
    if steps is not None and 0 < steps < 1 and old:
        severity = Severity.ERROR if not new else Severity.WARNING
        also = f"; {_span(new)} read it as a fraction of the total steps" if new else ""
        msg(severity, "lint.training.fraction_as_count", "warmup_steps",
            f"warmup_steps: {steps:g} is a fraction, but {_span(old)} count warmup in whole steps (an int field): "
            f"the run starts with no warmup, without a word{also}",
            key_edit(file, "warmup_steps", f"replace it with warmup_ratio: {steps:g}",
                     "a fraction of the total steps before transformers 5.0"))
    ratio = _number(data.get("warmup_ratio"))
    old_ratio = [v for v in old if accepts("warmup_ratio", v)]
    new_ratio = [v for v in new if accepts("warmup_ratio", v)]  # none after 5.14: the key check says it is gone
    if ratio is not None and not 0 <= ratio <= 1:
        if old_ratio:
            msg(Severity.ERROR, "lint.training.count_as_fraction", "warmup_ratio",
                f"warmup_ratio: {excerpt(data['warmup_ratio'])} is not a fraction of the total steps: "
                f"{_span(old_ratio)} stop with 'warmup_ratio must lie in range [0,1]'",
                key_edit(file, "warmup_ratio", f"replace it with warmup_steps: {excerpt(data['warmup_ratio'])}",
                         "warmup_steps counts steps; warmup_ratio is a fraction between 0 and 1"))
        elif new_ratio:
            msg(Severity.WARNING, "lint.training.count_as_fraction", "warmup_ratio",
                f"warmup_ratio: {excerpt(data['warmup_ratio'])} is not a fraction: {_span(new_ratio)} copy it into "
                "warmup_steps, so it runs as a count of steps",
                key_edit(file, "warmup_ratio", f"replace it with warmup_steps: {excerpt(data['warmup_ratio'])}"))
    for key in WHOLE_COUNTS:
        value = _number(data.get(key))
        if value is not None and not value.is_integer() and not (key == "max_steps" and value < 0):
            msg(Severity.ERROR, "lint.training.not_whole", key,
                f"{key}: {value:g} is not a whole number: TrainingArguments counts it (an int field), and the run "
                "stops or misbehaves when it is used",
                key_edit(file, key, f"set it to a whole number ({max(1, round(value))})"))
    return out
