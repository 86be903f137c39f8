"""Child process: the keys HfArgumentParser accepts, read from the installed classes themselves.

Run as `python -m rocmcheck.lint.training_child --request-file FILE`, the request being
{"kind": "training_args"|"llamafactory", "command": "train"|"eval"|"infer"} (command: which llamafactory-cli parser,
_TRAIN_ARGS, _EVAL_ARGS or _INFER_ARGS).
Importing transformers' TrainingArguments imports torch (seconds, and a GPU runtime on a GPU box), so
rocmcheck never does it in its own process. Answers one "keys" event on rocmcheck/child.py's channel
(LLaMA-Factory's import-time logs on stdout go to stderr there).

The accepted keys are computed with HfArgumentParser.parse_dict's own rule,
{f.name for f in dataclasses.fields(dtype) if f.init} over parser.dataclass_types, without
constructing the dataclasses: their __post_init__ checks this machine (bf16 on a CPU box raises),
not the file.
"""

from __future__ import annotations

import dataclasses
import os

from rocmcheck.child import leave, open_channel, read_request


def accepted(kind: str, command: str = "train") -> dict:
    import transformers
    from transformers import HfArgumentParser

    result: dict = {"transformers_version": transformers.__version__}
    if kind == "llamafactory":
        os.environ.setdefault("DISABLE_VERSION_CHECK", "1")  # report transformers' version, do not refuse it
        import llamafactory
        from llamafactory.hparams import parser as lf_parser

        # what `llamafactory-cli train` / `eval` / `export`, `chat`, `webchat`, `api` parse
        types = {"train": lf_parser._TRAIN_ARGS, "eval": lf_parser._EVAL_ARGS,
                 "infer": lf_parser._INFER_ARGS}[command]

        result["llamafactory_version"] = llamafactory.__version__
    else:
        from transformers import TrainingArguments

        types = [TrainingArguments]
    parser = HfArgumentParser(types)
    result["keys"] = sorted({f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init})
    return result


def main(argv: list[str] | None = None) -> int:
    request = read_request(argv, prog="python -m rocmcheck.lint.training_child")
    kind, command = request.get("kind", "training_args"), request.get("command", "train")
    channel = open_channel()
    try:
        result = accepted(kind, command)
    except Exception as exc:  # not installed, or broken (a torch it cannot load)
        result = {"skipped": f"{type(exc).__name__}: {exc}"}
    channel.emit("keys", **result)
    return 0


if __name__ == "__main__":
    leave(main())
