"""Values in a LLaMA-Factory YAML that its own start-up checks refuse, or that this machine cannot run.

The refusals are LLaMA-Factory 0.9.5's (src/llamafactory/hparams/parser.py: get_train_args, get_infer_args,
_verify_model_args; model/model_utils/quantization.py: configure_quantization), each quoted with the ValueError
it raises before any training step. The values judged against this machine (quantization_bit and bitsandbytes,
flash_attn and flash-attn) read the doctor's facts (rocmcheck.lint.stack); what was not known is said.

Each rule is `rule(data, ctx) -> list[LintMessage]`; add one by adding a function to RULES.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from packaging.version import InvalidVersion, Version

from rocmcheck.errors import BadInput
from rocmcheck.fixes import Fix, note, shell
from rocmcheck.lint.known_keys import closest
from rocmcheck.lint.messages import LintMessage, Severity, key_edit
from rocmcheck.lint.stack import Stack
from rocmcheck.safe.structured import load_file
from rocmcheck.safe.text import excerpt

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

# llamafactory-cli eval: LLaMA-Factory 0.9.3's cli.py runs run_eval; from 0.9.4 its launcher.py raises
# NotImplementedError("Evaluation will be deprecated in the future.") before reading the file.
EVAL_REMOVED_IN = Version("0.9.4")
# configure_quantization: up to 0.9.3 every PTQ-quantized model is refused under ZeRO-3 or FSDP; from 0.9.4 FP8 and
# MXFP4 checkpoints are dequantized instead (quant_method "fp8" / "mxfp4"), the others still refused.
PTQ_DEQUANTIZED_FROM = Version("0.9.4")
PTQ_DEQUANTIZED_METHODS = ("fp8", "mxfp4")
# FlashAttention-2 on ROCm measured slower than SDPA for SFT (MI200, ROCm 6.4.1, flash-attention built from
# ROCm/flash-attention): https://github.com/hiyouga/LlamaFactory/issues/8793 (the reporter later traced part of the
# gap to a config that did not scale the batch, so it is a note to measure, not a rule).
FA2_ROCM_SOURCE = "https://github.com/hiyouga/LlamaFactory/issues/8793"
# model_utils/attention.py: without flash-attn, `flash_attn: fa2` only logs "FlashAttention-2 is not installed." and
# loads the model with transformers' default attention (https://github.com/hiyouga/LlamaFactory/issues/3171).
FA2_MISSING_WARNING = "FlashAttention-2 is not installed."
# The minimum bitsandbytes configure_quantization checks for (check_version(..., mandatory=True)).
BNB_MINIMUM = {8: "0.37.0", 4: "0.39.0"}
DATASET_INFO = "dataset_info.json"  # data/parser.py DATA_CONFIG


@dataclass
class LfContext:
    file: str
    command: str  # the llamafactory-cli subcommand: train, eval, export, chat
    consumer: str  # its label, for the messages
    llamafactory_version: Version | None = None  # the release judged (installed, or the table's)
    version_installed: bool = False  # True: the release that will run (its own classes answered)
    deepspeed: dict[str, Any] | None = None  # the DeepSpeed config `deepspeed:` names or holds, when read
    quantization_config: dict[str, Any] | None = None  # the model's config.json quantization_config, when read
    model_config_source: str | None = None  # the config.json read, None when not on this machine
    world_size: int | None = None
    stack: Stack = field(default_factory=Stack)
    check_paths: bool = True  # False: dataset files are not looked up from here (written elsewhere than they run)

    def msg(self, severity: Severity, code: str, key_path: str, message: str, **kw: Any) -> LintMessage:
        return LintMessage(severity, code, self.file, key_path, message, consumer=self.consumer, **kw)

    def edit(self, key_path: str, change: str, why: str = "") -> Fix:
        return key_edit(self.file, key_path, change, why)

    @property
    def zero_stage(self) -> int | None:
        zero = (self.deepspeed or {}).get("zero_optimization")
        stage = zero.get("stage", 0) if isinstance(zero, dict) else (0 if self.deepspeed is not None else None)
        return stage if isinstance(stage, int) and not isinstance(stage, bool) else None

    @property
    def zero3(self) -> bool:
        return self.zero_stage == 3


def _true(data: dict, key: str) -> bool:
    return data.get(key) is True


def refused(ctx: LfContext, key: str, error: str, fix: Fix) -> LintMessage:
    return ctx.msg(E, "lint.llamafactory.refused", key, f"{ctx.consumer} stops at start-up: '{error}'", fix=fix)


def check_train_refusals(data: dict, ctx: LfContext) -> list[LintMessage]:
    """get_train_args' refusals of key combinations (parser.py, LLaMA-Factory 0.9.5)."""
    if ctx.command != "train":
        return []
    out = []
    stage = data.get("stage", "sft")
    if _true(data, "predict_with_generate") and stage != "sft":
        out.append(refused(ctx, "predict_with_generate", "`predict_with_generate` cannot be set as True except SFT.",
                           ctx.edit("predict_with_generate", "delete it", f"stage {excerpt(str(stage))} cannot "
                                                                          "generate predictions")))
    if stage == "sft" and _true(data, "do_predict") and not _true(data, "predict_with_generate"):
        out.append(refused(ctx, "do_predict", "Please enable `predict_with_generate` to save model predictions.",
                           ctx.edit("", "add predict_with_generate: true")))
    if _true(data, "predict_with_generate") and ctx.zero3:
        out.append(refused(ctx, "predict_with_generate", "`predict_with_generate` is incompatible with DeepSpeed "
                                                         "ZeRO-3.",
                           ctx.edit("predict_with_generate", "delete it", "or predict with a ZeRO-2 config")))
    if _true(data, "pure_bf16") and ctx.zero3:
        out.append(refused(ctx, "pure_bf16", "`pure_bf16` is incompatible with DeepSpeed ZeRO-3.",
                           ctx.edit("pure_bf16", "delete it", "bf16: true trains in bf16 mixed precision")))
    if data.get("deepspeed") is not None:
        for key in ("use_galore", "use_apollo"):
            if _true(data, key):
                out.append(refused(ctx, key, "GaLore and APOLLO are incompatible with DeepSpeed yet.",
                                   ctx.edit("deepspeed", "delete it", f"{key} trains without DeepSpeed")))
    return out


def check_inference_backend(data: dict, ctx: LfContext) -> list[LintMessage]:
    backend = data.get("infer_backend")
    if ctx.command not in ("train", "eval") or backend in (None, "huggingface", "hf"):
        return []
    return [refused(ctx, "infer_backend", "vLLM/SGLang backend is only available for API, CLI and Web.",
                    ctx.edit("infer_backend", "delete it", "training and evaluation use the huggingface backend"))]


def check_model_arguments(data: dict, ctx: LfContext) -> list[LintMessage]:
    """_verify_model_args: every subcommand runs it."""
    out = []
    finetuning = data.get("finetuning_type", "lora")
    if data.get("adapter_name_or_path") is not None and finetuning != "lora":
        out.append(refused(ctx, "adapter_name_or_path", "Adapter is only valid for the LoRA method.",
                           ctx.edit("finetuning_type", "set it to lora")))
    if data.get("quantization_bit") is not None and finetuning not in ("lora", "oft"):
        out.append(refused(ctx, "quantization_bit", "Quantization is only compatible with the LoRA or OFT method.",
                           ctx.edit("quantization_bit", "delete it",
                                    f"finetuning_type {excerpt(str(finetuning))} trains the full-precision weights")))
    bits = data.get("quantization_bit")
    if ctx.command == "train" and bits == 8 and ctx.zero3 and data.get("quantization_method", "bnb") == "bnb":
        out.append(refused(ctx, "quantization_bit", "Only 4-bit quantized model can use fsdp+qlora or auto device "
                                                    "map.",
                           ctx.edit("quantization_bit", "set it to 4")))
    return out


def _version_str(version: Version | None) -> str:
    return str(version) if version is not None else "(version not known)"


def check_ptq_model_with_zero3(data: dict, ctx: LfContext) -> list[LintMessage]:
    """configure_quantization: a model whose config.json carries a quantization_config (GPTQ, AWQ, FP8, ...) is
    refused under ZeRO-3 ("DeepSpeed ZeRO-3 or FSDP is incompatible with PTQ-quantized models.",
    https://github.com/hiyouga/LlamaFactory/issues/6898: DeepSeek-R1's FP8 weights with ZeRO-3 on 0.9.2)."""
    if ctx.command != "train" or not ctx.zero3:
        return []
    error = "DeepSpeed ZeRO-3 or FSDP is incompatible with PTQ-quantized models."
    if ctx.quantization_config is None:
        if ctx.model_config_source is None and isinstance(data.get("model_name_or_path"), str):
            return [ctx.msg(I, "lint.llamafactory.ptq_zero3", "model_name_or_path",
                            "ZeRO-3 refuses a PTQ-quantized model (GPTQ, AWQ, ...: "
                            f"'{error}'); whether this one is was not known: its config.json is not on this machine")]
        return []
    method = str(ctx.quantization_config.get("quant_method", "") or "").lower()
    fix = ctx.edit("deepspeed", "point it at a ZeRO-2 config", "or train from the unquantized checkpoint")
    where = f"{excerpt(ctx.model_config_source or 'config.json')} has quantization_config quant_method " \
            f"{excerpt(method or '(none)')}"
    if method not in PTQ_DEQUANTIZED_METHODS:
        return [ctx.msg(E, "lint.llamafactory.ptq_zero3", "deepspeed",
                        f"ZeRO-3 with a PTQ-quantized model ({where}): {ctx.consumer} stops with '{error}'", fix=fix)]
    v = ctx.llamafactory_version
    if v is not None and v >= PTQ_DEQUANTIZED_FROM and ctx.version_installed:
        return []  # the release that will run dequantizes FP8/MXFP4 to 16 bits
    severity = E if (v is not None and v < PTQ_DEQUANTIZED_FROM and ctx.version_installed) else W
    return [ctx.msg(severity, "lint.llamafactory.ptq_zero3", "deepspeed",
                    f"ZeRO-3 with a PTQ-quantized model ({where}): LLaMA-Factory {PTQ_DEQUANTIZED_FROM} and newer "
                    f"load {method} weights dequantized to 16 bits, older releases stop with '{error}' (judged "
                    f"against LLaMA-Factory {_version_str(v)}"
                    + ("" if ctx.version_installed else ", from rocmcheck's table: the installed one was not asked")
                    + ")", fix=fix)]


def _bnb_words(stack: Stack) -> str:
    bnb = stack.bitsandbytes
    return f"bitsandbytes {bnb.get('version') or '(version not known)'} (libraries: " \
           f"{', '.join(bnb.get('libraries') or []) or 'none'})"


def check_quantization_bit(data: dict, ctx: LfContext) -> list[LintMessage]:
    """quantization_bit 4/8 with quantization_method bnb (the default) loads bitsandbytes, which needs a native
    library for this torch's ROCm (or CUDA): rocmcheck.checks.extensions.bnb_choice, the doctor's rule."""
    bits = data.get("quantization_bit")
    if bits is None or data.get("quantization_method", "bnb") != "bnb":
        return []
    stack = ctx.stack
    if not stack.bitsandbytes_known:
        return [ctx.msg(I, "lint.llamafactory.bitsandbytes", "quantization_bit",
                        "quantization_bit needs bitsandbytes; whether it works here was not known (its files could "
                        "not be read)")]
    needed = BNB_MINIMUM.get(bits) if isinstance(bits, int) else None
    if not stack.bitsandbytes:
        if not stack.gpu_torch:
            return [ctx.msg(I, "lint.llamafactory.bitsandbytes", "quantization_bit",
                            f"quantization_bit {excerpt(str(bits))} needs bitsandbytes on the training machine; "
                            "torch here is " + (f"a CPU build ({stack.torch_version})" if stack.torch_version
                                                else "not installed") + ", so whether it works there was not known")]
        return [ctx.msg(E, "lint.llamafactory.bitsandbytes", "quantization_bit",
                        f"quantization_bit {excerpt(str(bits))} needs bitsandbytes, which is not installed here: "
                        f"{ctx.consumer} stops when it loads the model (bitsandbytes>={needed or '0.39.0'} is "
                        "required)", fix=shell("pip install {req}", "a wheel with the library for this torch",
                                               req=f"bitsandbytes>={needed or '0.39.0'}"))]
    from rocmcheck.checks.extensions import bnb_choice

    libraries = list(stack.bitsandbytes.get("libraries") or [])
    choice = bnb_choice(stack.torch_hip, stack.torch_cuda, libraries, stack.bitsandbytes.get("version"),
                        stack.env)
    if choice is None:
        return [ctx.msg(I, "lint.llamafactory.bitsandbytes", "quantization_bit",
                        f"{_bnb_words(stack)} is installed, but torch here is a CPU build: whether it loads a GPU "
                        "library on the training machine was not known")]
    version = stack.bitsandbytes.get("version")
    try:
        too_old = needed is not None and version is not None and Version(version) < Version(needed)
    except InvalidVersion:
        too_old = False
    if too_old:
        return [ctx.msg(E, "lint.llamafactory.bitsandbytes", "quantization_bit",
                        f"quantization_bit {bits} needs bitsandbytes>={needed}; {_bnb_words(stack)} is older: "
                        f"{ctx.consumer} stops when it loads the model",
                        fix=shell("pip install -U {req}", "", req=f"bitsandbytes>={needed}"))]
    if choice.chosen is None:
        kind = "ROCm" if choice.backend == "rocm" else "CUDA"
        return [ctx.msg(E, "lint.llamafactory.bitsandbytes", "quantization_bit",
                        f"quantization_bit {bits}: {_bnb_words(stack)} has no {choice.wanted} for torch's {kind} "
                        f"({stack.torch_hip or stack.torch_cuda}): 'Could not find the bitsandbytes {kind} binary', "
                        "and the 4/8-bit layers fail when the model loads (`rocmcheck doctor` says which wheel has it)",
                        fix=note("install a bitsandbytes whose wheel carries a library for this torch's "
                                 f"{kind} (`rocmcheck doctor --only bitsandbytes` names it)"))]
    return []


def check_flash_attn(data: dict, ctx: LfContext) -> list[LintMessage]:
    if data.get("flash_attn") != "fa2" or ctx.command == "export":
        return []
    stack = ctx.stack
    out = []
    if stack.flash_attn is None:
        out.append(ctx.msg(W, "lint.llamafactory.flash_attn_missing", "flash_attn",
                           "flash_attn: fa2, but flash-attn is not installed here: LLaMA-Factory only warns "
                           f"'{FA2_MISSING_WARNING}' and loads the model with transformers' default attention (SDPA), "
                           "so fa2 is not used", fix=ctx.edit("flash_attn", "set it to sdpa",
                                                              "the attention that runs anyway; or install flash-attn")))
    if stack.is_rocm:
        out.append(ctx.msg(I, "lint.llamafactory.flash_attn_rocm", "flash_attn",
                           f"on ROCm, FlashAttention-2 measured slower than SDPA for SFT ({FA2_ROCM_SOURCE}): "
                           "time a few steps with flash_attn: sdpa before keeping fa2"))
    return out


def check_eval_command(data: dict, ctx: LfContext) -> list[LintMessage]:
    if ctx.command != "eval":
        return []
    v = ctx.llamafactory_version
    if v is not None and v < EVAL_REMOVED_IN:
        return []
    removed = "'NotImplementedError: Evaluation will be deprecated in the future.'"
    if v is not None and ctx.version_installed:
        return [ctx.msg(E, "lint.llamafactory.eval_removed", "",
                        f"the installed LLaMA-Factory {v} has no `eval`: llamafactory-cli eval stops with {removed} "
                        f"before reading the file (LLaMA-Factory 0.9.3 and older run it)",
                        fix=note("run it with LLaMA-Factory 0.9.3 or older, or evaluate with `llamafactory-cli train`"
                                 " (do_eval / do_predict)"))]
    return [ctx.msg(W, "lint.llamafactory.eval_removed", "",
                    f"LLaMA-Factory {EVAL_REMOVED_IN} and newer have no `eval` (llamafactory-cli eval stops with "
                    f"{removed}); LLaMA-Factory 0.9.3 and older read this file", fix=note(
                        "keep LLaMA-Factory 0.9.3 or older for it, or evaluate with `llamafactory-cli train` "
                        "(do_eval / do_predict)"))]


def check_deepspeed_launch(data: dict, ctx: LfContext) -> list[LintMessage]:
    """On a machine with one GPU, llamafactory-cli train runs in-process (no torchrun) and get_train_args stops:
    "Please use `FORCE_TORCHRUN=1` to launch DeepSpeed training." (launcher.py starts torchrun itself only for
    FORCE_TORCHRUN=1 or more than one device)."""
    if ctx.command != "train" or data.get("deepspeed") is None or ctx.world_size != 1:
        return []
    return [ctx.msg(E, "lint.llamafactory.force_torchrun", "deepspeed",
                    f"DeepSpeed on one GPU: {ctx.consumer} starts without torchrun and stops with 'Please use "
                    "`FORCE_TORCHRUN=1` to launch DeepSpeed training.'",
                    fix=shell("FORCE_TORCHRUN=1 llamafactory-cli train {file}", "torchrun with one process",
                              file=ctx.file))]



def _names(value: Any) -> list[str]:
    """A `dataset` / `eval_dataset` value as LLaMA-Factory splits it (split_arg: a comma-separated string or a
    list)."""
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    if isinstance(value, list):
        return [str(n).strip() for n in value if str(n).strip()]
    return []


def _size(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def check_dataset_requirements(data: dict, ctx: LfContext) -> list[LintMessage]:
    """The datasets the chosen mode needs (get_train_args, parser.py; DataArguments.__post_init__, data_args.py;
    LLaMA-Factory 0.9.5): training needs `dataset`; evaluating or predicting needs `eval_dataset` or a `val_size`
    split off the training data, and `val_size` with `eval_dataset` is refused."""
    if ctx.command != "train":
        return []
    out = []
    if _true(data, "do_train") and not _names(data.get("dataset")):
        out.append(refused(ctx, "do_train", "Please specify dataset for training.",
                           ctx.edit("", "add dataset: NAME (a dataset of dataset_info.json)")))
    evaluating = [k for k in ("do_eval", "do_predict", "predict_with_generate") if _true(data, k)]
    if evaluating and not _names(data.get("eval_dataset")) and _size(data.get("val_size")) < 1e-6:
        out.append(refused(ctx, evaluating[0], "Please make sure eval_dataset be provided or val_size >1e-6",
                           ctx.edit("", "add eval_dataset: NAME (or val_size: 0.1 to hold out part of dataset)",
                                    f"{evaluating[0]} evaluates on it")))
    if _names(data.get("eval_dataset")) and _size(data.get("val_size")) > 1e-6:
        out.append(refused(ctx, "val_size", "Cannot specify `val_size` if `eval_dataset` is not None.",
                           ctx.edit("val_size", "delete it", "eval_dataset is the evaluation data")))
    return out


def check_dataset_files(data: dict, ctx: LfContext) -> list[LintMessage]:
    """The datasets a training run loads, found as LLaMA-Factory finds them (data/parser.py get_dataset_list,
    data/loader.py _load_single_dataset, 0.9.5): `dataset_dir` (default "data") relative to the working directory,
    its dataset_info.json ("Cannot open data/dataset_info.json"), each name defined there ("Undefined dataset NAME
    in dataset_info.json."), and each local `file_name` under dataset_dir ("File data/NAME not found."). Hub
    datasets, `dataset_dir: ONLINE` / `REMOTE:` and an existing `tokenized_path` are not looked up."""
    names = _names(data.get("dataset")) + _names(data.get("eval_dataset"))
    folder = data.get("dataset_dir", "data")
    tokenized = data.get("tokenized_path")
    if not ctx.check_paths or ctx.command != "train" or not names or not isinstance(folder, str) or folder == "ONLINE" \
            or folder.startswith("REMOTE:") or (isinstance(tokenized, str) and os.path.isdir(tokenized)):
        return []
    info_path = Path(folder) / DATASET_INFO
    at = "dataset_dir" if "dataset_dir" in data else "dataset" if "dataset" in data else "eval_dataset"
    if not info_path.is_file():
        beside = Path(ctx.file).parent / info_path
        where = f"from the working directory {excerpt(os.getcwd())}"
        if not info_path.is_absolute() and beside.is_file():
            return [ctx.msg(W, "lint.llamafactory.dataset_dir_missing", at,
                            f"{excerpt(info_path)} exists only relative to {excerpt(Path(ctx.file).name)}, not "
                            f"{where}: {ctx.consumer} started here stops with 'Cannot open {excerpt(info_path)}'",
                            fix=note(f"start {ctx.consumer} from {excerpt(Path(ctx.file).parent)}, or set dataset_dir "
                                     "to an absolute path"))]
        return [ctx.msg(E, "lint.llamafactory.dataset_dir_missing", at,
                        f"{excerpt(info_path)} not found {where}: {ctx.consumer} stops with 'Cannot open "
                        f"{excerpt(info_path)}' before training",
                        fix=note(f"start {ctx.consumer} from the folder that holds {excerpt(folder)}/ (LLaMA-Factory's "
                                 "own checkout for its examples), or set dataset_dir to the folder of your "
                                 "dataset_info.json"))]
    try:
        info = load_file(info_path, what="dataset_info.json", fmt="json")
    except BadInput as exc:
        return [ctx.msg(E, "lint.llamafactory.dataset_dir_missing", at, f"{exc}",
                        fix=note(f"repair {excerpt(info_path)}: the message names what is wrong with it"))]
    if not isinstance(info, dict):
        return []
    out = []
    for key in ("dataset", "eval_dataset"):
        for name in _names(data.get(key)):
            entry = info.get(name)
            if not isinstance(entry, dict):
                guess = closest(name, [str(k) for k in info])
                out.append(ctx.msg(E, "lint.llamafactory.dataset_undefined", key,
                                   f"{ctx.consumer} stops: 'Undefined dataset {excerpt(name)} in {DATASET_INFO}.' "
                                   f"({excerpt(info_path)})", did_you_mean=guess,
                                   fix=ctx.edit(key, f'rename "{excerpt(name)}" to "{guess}"' if guess else
                                                f"use a dataset defined in {excerpt(info_path)}, or add one there")))
                continue
            local = entry.get("file_name")
            hub = any(k in entry for k in ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name"))
            if not hub and isinstance(local, str) and not os.path.exists(os.path.join(folder, local)):
                path = os.path.join(folder, local)
                out.append(ctx.msg(E, "lint.llamafactory.dataset_file_missing", key,
                                   f"{ctx.consumer} stops: 'File {excerpt(path)} not found.' (dataset "
                                   f"{excerpt(name)} of {excerpt(info_path)}, from {excerpt(os.getcwd())})",
                                   fix=note(f"put the data at {excerpt(path)}, or correct file_name of "
                                            f"{excerpt(name)} in {excerpt(info_path)}")))
    return out

RULES: list[Callable[[dict, LfContext], list[LintMessage]]] = [
    check_dataset_requirements,
    check_dataset_files,
    check_train_refusals,
    check_inference_backend,
    check_model_arguments,
    check_ptq_model_with_zero3,
    check_quantization_bit,
    check_flash_attn,
    check_eval_command,
    check_deepspeed_launch,
]


def lint_llamafactory_values(data: dict, ctx: LfContext) -> list[LintMessage]:
    out: list[LintMessage] = []
    for rule in RULES:
        out.extend(rule(data, ctx))
    return out
