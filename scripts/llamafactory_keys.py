"""Regenerate rocmcheck/lint/llamafactory_keys.json from LLaMA-Factory's own argument classes.

Run with a Python that can import llamafactory (its argument classes need datasets, peft, trl,
accelerate and omegaconf; .ci/run builds such a venv):
    /tmp/rocmcheck-lf-venv/bin/python scripts/llamafactory_keys.py rocmcheck/lint/llamafactory_keys.json
(LLaMA-Factory logs to stdout while importing, so the table goes to the file named.)
Stored: the keys `llamafactory-cli train` accepts beyond transformers' Seq2SeqTrainingArguments
(the HfArgumentParser over llamafactory.hparams.parser._TRAIN_ARGS, as parse_dict counts them),
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
    from llamafactory.hparams.parser import _TRAIN_ARGS
    from transformers import HfArgumentParser, Seq2SeqTrainingArguments

    def accepted(parser: HfArgumentParser) -> set[str]:  # HfArgumentParser.parse_dict's own rule
        return {f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init}

    base = accepted(HfArgumentParser(Seq2SeqTrainingArguments))
    by_class = {}
    for dtype in _TRAIN_ARGS:
        own = sorted({f.name for f in dataclasses.fields(dtype) if f.init} - base)
        by_class[f"{dtype.__module__}.{dtype.__qualname__}"] = own
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump({
            "llamafactory_version": llamafactory.__version__,
            "transformers_version": transformers.__version__,
            "transformers_requirement": next(str(r).split(";")[0][len("transformers"):]
                                             for r in metadata.requires("llamafactory") if r.startswith("transformers")),
            "keys_by_class": by_class,
        }, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
