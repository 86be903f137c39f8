"""Who reads a config file, and so which rules judge it: the same file can start under one consumer and stop under
another. A DeepSpeed JSON with "auto" values starts under the HF Trainer and accelerate (they fill "auto") and
stops under deepspeed.initialize (it does not); a LLaMA-Factory predict YAML starts under `llamafactory-cli train`
and stops under `llamafactory-cli chat` (hiyouga/LlamaFactory#5633: "Some keys are not used by the
HfArgumentParser").

Every verdict names its consumer. It is, in this order: named with `--consumer`; implied by the file that points at
this one (a training file's `deepspeed:` means the HF Trainer, an accelerate config's `deepspeed_config_file` means
accelerate launch); read from the file's own keys (a LLaMA-Factory YAML's `do_predict` means `train`, `export_dir`
means `export`, `infer_backend` means `chat`, `task` means `eval`); or assumed, and then said so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from rocmcheck.errors import BadInput
from rocmcheck.safe.text import excerpt

# The kinds files.detect_kind tells apart.
DEEPSPEED, LLAMAFACTORY, TRAINING_ARGS, ACCELERATE = "deepspeed", "llamafactory", "training_args", "accelerate"
TRL = "trl"  # a TRL recipe, judged when TRL's own parser can be asked (rocmcheck.lint.trl_recipe)
AXOLOTL = "axolotl"  # an axolotl config, judged when axolotl's own schema can be asked (rocmcheck.lint.axolotl_config)


@dataclass(frozen=True)
class Consumer:
    id: str  # what --consumer takes
    label: str  # how a verdict names it: "for the HF Trainer"
    reads: frozenset[str]  # the kinds of file it reads
    fills_auto: bool = False  # fills "auto" in a DeepSpeed config (the HF Trainer's and accelerate's word)
    llamafactory_command: str | None = None  # the llamafactory-cli subcommand ("train", "eval", "export", "chat")


DEEPSPEED_INITIALIZE = Consumer("deepspeed", "deepspeed.initialize", frozenset({DEEPSPEED}))
HF_TRAINER = Consumer("hf-trainer", "the HF Trainer", frozenset({DEEPSPEED, TRAINING_ARGS}), fills_auto=True)
ACCELERATE_LAUNCH = Consumer("accelerate", "accelerate launch", frozenset({ACCELERATE, DEEPSPEED}), fills_auto=True)
LLAMAFACTORY_TRAIN = Consumer("llamafactory-train", "llamafactory-cli train", frozenset({LLAMAFACTORY, DEEPSPEED}),
                              fills_auto=True, llamafactory_command="train")
LLAMAFACTORY_EVAL = Consumer("llamafactory-eval", "llamafactory-cli eval", frozenset({LLAMAFACTORY}),
                             llamafactory_command="eval")
LLAMAFACTORY_EXPORT = Consumer("llamafactory-export", "llamafactory-cli export", frozenset({LLAMAFACTORY}),
                               llamafactory_command="export")
# chat, webchat and api parse the same classes (get_infer_args) and refuse the same keys.
LLAMAFACTORY_CHAT = Consumer("llamafactory-chat", "llamafactory-cli chat (webchat, api)", frozenset({LLAMAFACTORY}),
                             llamafactory_command="chat")
TRL_CLI = Consumer("trl", "TRL (trl sft|dpo|grpo --config)", frozenset({TRL}))
AXOLOTL_TRAIN = Consumer("axolotl", "axolotl (axolotl train)", frozenset({AXOLOTL}))
# A DeepSpeed config that llamafactory-cli train hands to TrainingArguments: the HF Trainer judges it.
HF_TRAINER_UNDER_LLAMAFACTORY = Consumer("hf-trainer", "the HF Trainer (llamafactory-cli train)",
                                         frozenset({DEEPSPEED}), fills_auto=True)

CONSUMERS: dict[str, Consumer] = {c.id: c for c in (
    DEEPSPEED_INITIALIZE, HF_TRAINER, ACCELERATE_LAUNCH, LLAMAFACTORY_TRAIN, LLAMAFACTORY_EVAL, LLAMAFACTORY_EXPORT,
    LLAMAFACTORY_CHAT, TRL_CLI, AXOLOTL_TRAIN)}
CONSUMER_IDS = tuple(CONSUMERS)
KIND_WORDS = {DEEPSPEED: "a DeepSpeed config", LLAMAFACTORY: "a LLaMA-Factory YAML",
              TRAINING_ARGS: "a TrainingArguments file", ACCELERATE: "an accelerate config", TRL: "a TRL recipe",
              AXOLOTL: "an axolotl config"}


@dataclass(frozen=True)
class ConsumerChoice:
    """The consumer a file is judged for, and why that one."""

    consumer: Consumer
    why: str  # "named with --consumer", "from the file: do_predict", "assumed: ..."
    assumed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"consumer": self.consumer.id, "label": self.consumer.label, "why": self.why, "assumed": self.assumed}


def named(consumer_id: str | None) -> Consumer | None:
    """The consumer --consumer names (the command line checks the id against CONSUMER_IDS)."""
    return CONSUMERS.get(consumer_id) if consumer_id else None


def for_named(consumer: Consumer, kind: str, file: str) -> ConsumerChoice:
    """The choice --consumer makes for a file of this kind; BadInput when that consumer reads no such file."""
    if kind not in consumer.reads:
        reads = " or ".join(KIND_WORDS[k] for k in sorted(consumer.reads))
        raise BadInput(f"{excerpt(file)}: --consumer {consumer.id}: {consumer.label} reads {reads}, and this is "
                       f"{KIND_WORDS.get(kind, 'another kind of file')}")
    if kind == DEEPSPEED and consumer is LLAMAFACTORY_TRAIN:
        return ConsumerChoice(HF_TRAINER_UNDER_LLAMAFACTORY, "named with --consumer llamafactory-train")
    return ConsumerChoice(consumer, f"named with --consumer {consumer.id}")


def has_auto(config: Any) -> bool:
    if isinstance(config, dict):
        return any(v == "auto" or has_auto(v) for v in config.values())
    if isinstance(config, list):
        return any(has_auto(v) for v in config)
    return False


def for_deepspeed_config(config: dict) -> ConsumerChoice:
    """A DeepSpeed JSON linted alone: "auto" is written for the HF Trainer (and accelerate); without it, the file is
    taken for deepspeed.initialize. Either way an assumption, said so."""
    if has_auto(config):
        return ConsumerChoice(HF_TRAINER, "assumed: the file has \"auto\" values, which only the HF Trainer and "
                                          "accelerate fill (name another with --consumer deepspeed|accelerate)",
                              assumed=True)
    return ConsumerChoice(DEEPSPEED_INITIALIZE, "assumed: the file has no \"auto\" value, as a config written for "
                                                "deepspeed.initialize (name another with --consumer hf-trainer)",
                          assumed=True)


# Keys only one LLaMA-Factory subcommand's classes have (llamafactory/hparams: ExportArguments live in
# ModelArguments, the evaluation task in EvaluationArguments, the inference backend in ModelArguments).
EVAL_MARKERS = ("task", "n_shot", "save_dir", "lang", "task_dir")


def for_llamafactory(data: dict, train_only_keys: Iterable[str]) -> ConsumerChoice:
    """The llamafactory-cli subcommand a YAML is written for, from its keys: any TrainingArguments key (do_train,
    do_predict, output_dir, ...) means `train` (the only subcommand that parses TrainingArguments); `export_dir`
    means `export`; an evaluation key (`task`) means `eval`; `infer_backend` means `chat`. With none of them it is
    taken for `chat` (model and template only), an assumption said so."""
    keys = [k for k in data if isinstance(k, str)]
    train_only = set(train_only_keys)
    training = [k for k in keys if k in train_only]
    if training:
        return ConsumerChoice(LLAMAFACTORY_TRAIN, f"from the file: {excerpt(', '.join(training[:3]))} "
                                                  "(TrainingArguments keys, which only `train` parses)")
    if "export_dir" in data:
        return ConsumerChoice(LLAMAFACTORY_EXPORT, "from the file: export_dir")
    marker = next((k for k in EVAL_MARKERS if k in data), None)
    if marker:
        return ConsumerChoice(LLAMAFACTORY_EVAL, f"from the file: {marker} (an EvaluationArguments key)")
    if "infer_backend" in data:
        return ConsumerChoice(LLAMAFACTORY_CHAT, "from the file: infer_backend")
    return ConsumerChoice(LLAMAFACTORY_CHAT, "assumed: no training, export or evaluation key (name another with "
                                             "--consumer llamafactory-train|llamafactory-export|llamafactory-eval)",
                          assumed=True)
