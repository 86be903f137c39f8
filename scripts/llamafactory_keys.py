"""Regenerate rocmcheck/lint/llamafactory_keys.json from LLaMA-Factory's own argument classes.

Run with a Python that can import llamafactory (its argument classes need datasets, peft, trl,
accelerate and omegaconf; .ci/run builds such a venv):
    /tmp/rocmcheck-lf-venv/bin/python scripts/llamafactory_keys.py rocmcheck/lint/llamafactory_keys.json
(LLaMA-Factory logs to stdout while importing, so the table goes to the file named.)
Stored: the keys of each argument class LLaMA-Factory's parsers read (_TRAIN_ARGS for train, _EVAL_ARGS
for eval, _INFER_ARGS for export/chat/webchat/api), as parse_dict counts them, its TrainingArguments subclass
only with the keys beyond transformers' Seq2SeqTrainingArguments; which classes each subcommand parses;
the LLaMA-Factory and transformers versions they came from, and the transformers releases
LLaMA-Factory accepts (its Requires-Dist). rocmcheck adds the installed
transformers' own keys at lint time, so the list stays right when transformers moves.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from importlib import metadata

os.environ.setdefault("DISABLE_VERSION_CHECK", "1")


def main(out_path: str) -> None:
    import llamafactory
    import transformers
    from llamafactory.hparams.parser import _EVAL_ARGS, _INFER_ARGS, _TRAIN_ARGS
    from transformers import HfArgumentParser, Seq2SeqTrainingArguments

    def accepted(parser: HfArgumentParser) -> set[str]:  # HfArgumentParser.parse_dict's own rule
        return {f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init}

    def name(dtype: type) -> str:
        return f"{dtype.__module__}.{dtype.__qualname__}"

    base = accepted(HfArgumentParser(Seq2SeqTrainingArguments))
    by_class = {}
    for dtype in {*_TRAIN_ARGS, *_EVAL_ARGS, *_INFER_ARGS}:
        fields = {f.name for f in dataclasses.fields(dtype) if f.init}
        # LLaMA-Factory's TrainingArguments subclass: only its own keys (transformers' are added at lint time);
        # the other classes whole (EvaluationArguments has its own `seed`, never parsed beside TrainingArguments).
        by_class[name(dtype)] = sorted(fields - base if issubclass(dtype, Seq2SeqTrainingArguments) else fields)
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump({
            "llamafactory_version": llamafactory.__version__,
            "transformers_version": transformers.__version__,
            "transformers_requirement": next(str(r).split(";")[0][len("transformers"):]
                                             for r in metadata.requires("llamafactory")
                                             if r.startswith("transformers")),
            "keys_by_class": by_class,
            # the classes each llamafactory-cli parser reads: train; eval; export, chat, webchat and api
            "subcommands": {"train": [name(t) for t in _TRAIN_ARGS], "eval": [name(t) for t in _EVAL_ARGS],
                            "infer": [name(t) for t in _INFER_ARGS]},
        }, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
