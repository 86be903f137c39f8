"""Child process: the keys HfArgumentParser accepts, read from the installed classes themselves.

Run as `python -m rocmcheck.lint.training_child {training_args|llamafactory}`. Importing
transformers' TrainingArguments imports torch (seconds, and a GPU runtime on a GPU box), so
rocmcheck never does it in its own process. Prints one line "ROCMCHECK_JSON <json>" (LLaMA-Factory
logs to stdout while importing).

The accepted keys are computed with HfArgumentParser.parse_dict's own rule,
{f.name for f in dataclasses.fields(dtype) if f.init} over parser.dataclass_types, without
constructing the dataclasses: their __post_init__ checks this machine (bf16 on a CPU box raises),
not the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from rocmcheck.lint.deepspeed_child import MARKER


def accepted(kind: str) -> dict:
    import transformers
    from transformers import HfArgumentParser

    result: dict = {"transformers_version": transformers.__version__}
    if kind == "llamafactory":
        os.environ.setdefault("DISABLE_VERSION_CHECK", "1")  # report transformers' version, do not refuse it
        import llamafactory
        from llamafactory.hparams.parser import _TRAIN_ARGS as types  # what `llamafactory-cli train` parses

        result["llamafactory_version"] = llamafactory.__version__
    else:
        from transformers import TrainingArguments

        types = [TrainingArguments]
    parser = HfArgumentParser(types)
    result["keys"] = sorted({f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init})
    return result


def main() -> int:
    kind = sys.argv[1] if len(sys.argv) > 1 else "training_args"
    try:
        result = accepted(kind)
    except Exception as exc:  # not installed, or broken (a torch it cannot load)
        result = {"skipped": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
