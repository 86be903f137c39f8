"""The values LLaMA-Factory refuses at start-up (its parser.py and quantization.py, 0.9.5) and the values judged
against this machine's stack (bitsandbytes for quantization_bit, flash-attn for fa2): each rule fires on the bad case
and stays quiet on the good one. Rules are pure: the stack is a Stack built here, the DeepSpeed config a dict."""

from __future__ import annotations

import json

import pytest
from lint_helpers import by_code
from packaging.version import Version

from rocmcheck.lint import Severity, lint_file
from rocmcheck.lint.llamafactory_rules import LfContext, lint_llamafactory_values
from rocmcheck.lint.stack import Stack

ZERO3 = {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}
ZERO2 = {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto"}
ROCM_STACK = Stack(torch_version="2.6.0+rocm6.4", torch_hip="6.4.43482-0f2d60242", flash_attn=None)
CPU_STACK = Stack(torch_version="2.13.0+cpu")


def judge(data: dict, command: str = "train", **kw) -> list:
    kw.setdefault("stack", CPU_STACK)
    kw.setdefault("llamafactory_version", Version("0.9.5"))
    ctx = LfContext(file="train.yaml", command=command, consumer=f"llamafactory-cli {command}", **kw)
    return lint_llamafactory_values(data, ctx)


def refusals(messages) -> list[str]:
    return [m.message.split("start-up: ", 1)[1].strip("'") for m in by_code(messages, "lint.llamafactory.refused")]


@pytest.mark.parametrize("bad, good, deepspeed, error", [
    ({"stage": "dpo", "predict_with_generate": True}, {"stage": "sft", "predict_with_generate": True}, None,
     "`predict_with_generate` cannot be set as True except SFT."),
    ({"do_predict": True}, {"do_predict": True, "predict_with_generate": True}, None,
     "Please enable `predict_with_generate` to save model predictions."),
    ({"predict_with_generate": True}, {"predict_with_generate": False}, "zero3",
     "`predict_with_generate` is incompatible with DeepSpeed ZeRO-3."),
    ({"pure_bf16": True, "deepspeed": "ds.json"}, {"bf16": True, "deepspeed": "ds.json"}, "zero3",
     "`pure_bf16` is incompatible with DeepSpeed ZeRO-3."),
    ({"use_galore": True, "deepspeed": "ds.json"}, {"use_galore": True}, "zero2",
     "GaLore and APOLLO are incompatible with DeepSpeed yet."),
    ({"use_apollo": True, "deepspeed": "ds.json"}, {"use_apollo": True}, "zero2",
     "GaLore and APOLLO are incompatible with DeepSpeed yet."),
    ({"quantization_bit": 4, "finetuning_type": "full"}, {"quantization_bit": 4, "finetuning_type": "lora"}, None,
     "Quantization is only compatible with the LoRA or OFT method."),
    ({"adapter_name_or_path": "saves/x", "finetuning_type": "freeze"}, {"adapter_name_or_path": "saves/x"}, None,
     "Adapter is only valid for the LoRA method."),
    ({"infer_backend": "vllm"}, {"infer_backend": "huggingface"}, None,
     "vLLM/SGLang backend is only available for API, CLI and Web."),
    ({"quantization_bit": 8, "deepspeed": "ds.json"}, {"quantization_bit": 4, "deepspeed": "ds.json"}, "zero3",
     "Only 4-bit quantized model can use fsdp+qlora or auto device map."),
])
def test_llamafactory_start_up_refusals(bad, good, deepspeed, error):
    ds = {"zero3": ZERO3, "zero2": ZERO2}.get(deepspeed)
    found = judge(bad, deepspeed=ds)
    assert error in refusals(found), [m.render() for m in found]
    [m] = [m for m in by_code(found, "lint.llamafactory.refused") if error in m.message]
    assert m.is_error and m.consumer == "llamafactory-cli train" and m.fix is not None
    assert error not in refusals(judge(good, deepspeed=ds))


def test_predict_with_generate_is_fine_under_zero2_and_refusals_are_train_only():
    assert refusals(judge({"predict_with_generate": True, "eval_dataset": "identity"}, deepspeed=ZERO2)) == []
    assert refusals(judge({"do_predict": True}, command="chat")) == []  # chat parses no TrainingArguments


def test_deepspeed_on_one_gpu_needs_force_torchrun():
    [m] = by_code(judge({"deepspeed": "ds.json"}, deepspeed=ZERO2, world_size=1), "lint.llamafactory.force_torchrun")
    assert m.is_error and "Please use `FORCE_TORCHRUN=1` to launch DeepSpeed training." in m.message
    assert m.fix.text == "FORCE_TORCHRUN=1 llamafactory-cli train train.yaml"
    assert not by_code(judge({"deepspeed": "ds.json"}, deepspeed=ZERO2, world_size=8),
                       "lint.llamafactory.force_torchrun")
    assert not by_code(judge({"deepspeed": "ds.json"}, deepspeed=ZERO2), "lint.llamafactory.force_torchrun")


@pytest.mark.parametrize("method, version, installed, expect", [
    ("gptq", Version("0.9.5"), False, Severity.ERROR),      # refused by every release
    ("awq", Version("0.9.5"), True, Severity.ERROR),
    ("fp8", Version("0.9.5"), False, Severity.WARNING),     # dequantized from 0.9.4; the release that runs: not known
    ("fp8", Version("0.9.5"), True, None),                  # the installed 0.9.5 dequantizes it
    ("fp8", Version("0.9.2"), True, Severity.ERROR),        # the thread's release refuses it (#6898)
    ("mxfp4", Version("0.9.5"), True, None),
])
def test_a_ptq_quantized_model_under_zero3(method, version, installed, expect):
    data = {"deepspeed": "ds.json", "model_name_or_path": "/models/x"}
    found = by_code(judge(data, deepspeed=ZERO3, quantization_config={"quant_method": method},
                          model_config_source="/models/x/config.json", llamafactory_version=version,
                          version_installed=installed), "lint.llamafactory.ptq_zero3")
    assert [m.severity for m in found] == ([expect] if expect else [])
    if found:
        assert found[0].key_path == "deepspeed"
        assert "DeepSpeed ZeRO-3 or FSDP is incompatible with PTQ-quantized models." in found[0].message
    assert not by_code(judge(data, deepspeed=ZERO2, quantization_config={"quant_method": method},
                             model_config_source="/models/x/config.json"), "lint.llamafactory.ptq_zero3")


def test_a_model_not_on_this_machine_is_said_not_known_under_zero3():
    [m] = by_code(judge({"deepspeed": "d.json", "model_name_or_path": "org/m"}, deepspeed=ZERO3),
                  "lint.llamafactory.ptq_zero3")
    assert m.severity is Severity.INFO and "was not known" in m.message


def test_the_ptq_check_reads_the_models_config_json(tmp_path, monkeypatch):
    model = tmp_path / "DeepSeek-R1"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 7168, "quantization_config": {
        "quant_method": "gptq", "bits": 4}}))
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}')
    (tmp_path / "train.yaml").write_text(f"model_name_or_path: {model}\nstage: sft\ndo_train: true\n"
                                         "deepspeed: ds.json\ndataset: x\ntemplate: llama3\noutput_dir: o\n")
    monkeypatch.chdir(tmp_path)
    [m] = by_code(lint_file(tmp_path / "train.yaml", deep=False, stack=CPU_STACK), "lint.llamafactory.ptq_zero3")
    assert m.is_error and str(model / "config.json") in m.message and m.consumer == "llamafactory-cli train"


# --- quantization_bit and this machine's bitsandbytes ----------------------------------------------------------

def bnb(stack: Stack, data: dict | None = None) -> list:
    return by_code(judge(data or {"quantization_bit": 4}, stack=stack), "lint.llamafactory.bitsandbytes")


def test_quantization_bit_without_bitsandbytes_on_a_rocm_machine_fails():
    [m] = bnb(ROCM_STACK)
    assert m.is_error and "not installed here" in m.message and m.fix.text == "pip install 'bitsandbytes>=0.39.0'"


def test_quantization_bit_with_a_bitsandbytes_for_another_rocm_fails():
    stack = Stack(torch_version="2.6.0+rocm6.4", torch_hip="6.4.43482-0f2d60242",
                  bitsandbytes={"version": "0.49.2", "libraries": ["libbitsandbytes_rocm62.so"], "dir": "/x"})
    [m] = bnb(stack)
    assert m.is_error and "libbitsandbytes_rocm64.so" in m.message
    assert "Could not find the bitsandbytes ROCm" in m.message


def test_quantization_bit_with_the_library_for_this_rocm_passes():
    stack = Stack(torch_version="2.6.0+rocm6.4", torch_hip="6.4.43482-0f2d60242",
                  bitsandbytes={"version": "0.49.2", "libraries": ["libbitsandbytes_rocm64.so"], "dir": "/x"})
    assert bnb(stack) == []
    assert bnb(stack, {"quantization_bit": 4, "quantization_method": "hqq"}) == []  # not bitsandbytes


def test_quantization_bit_on_a_cpu_torch_is_not_known_never_a_verdict():
    [m] = bnb(CPU_STACK)
    assert m.severity is Severity.INFO and "was not known" in m.message
    [m] = bnb(Stack(bitsandbytes_known=False))
    assert m.severity is Severity.INFO and "was not known" in m.message


def test_quantization_bit_with_a_too_old_bitsandbytes():
    stack = Stack(torch_version="2.6.0+rocm6.4", torch_hip="6.4.1",
                  bitsandbytes={"version": "0.38.0", "libraries": ["libbitsandbytes_rocm64.so"], "dir": "/x"})
    [m] = bnb(stack)
    assert m.is_error and "bitsandbytes>=0.39.0" in m.message


# --- flash_attn: fa2 --------------------------------------------------------------------------------------------

def test_fa2_without_flash_attn_is_a_warning_not_an_error():
    found = judge({"flash_attn": "fa2"}, stack=CPU_STACK)
    [m] = by_code(found, "lint.llamafactory.flash_attn_missing")
    assert m.severity is Severity.WARNING and "FlashAttention-2 is not installed." in m.message
    assert m.fix.text == "flash_attn: set it to sdpa"
    assert not by_code(found, "lint.llamafactory.flash_attn_rocm")  # not a ROCm torch here


def test_fa2_on_rocm_names_the_measurement_behind_preferring_sdpa():
    stack = Stack(torch_version="2.6.0+rocm6.4", torch_hip="6.4.1", flash_attn="2.7.4")
    found = judge({"flash_attn": "fa2"}, stack=stack)
    assert not by_code(found, "lint.llamafactory.flash_attn_missing")
    [m] = by_code(found, "lint.llamafactory.flash_attn_rocm")
    assert "https://github.com/hiyouga/LlamaFactory/issues/8793" in m.message and m.severity is Severity.INFO
    assert judge({"flash_attn": "sdpa"}, stack=stack) == []


# --- llamafactory-cli eval --------------------------------------------------------------------------------------

def test_eval_is_gone_from_llamafactory_094():
    [w] = by_code(judge({"task": "mmlu_test"}, command="eval"), "lint.llamafactory.eval_removed")
    assert w.severity is Severity.WARNING and "0.9.3 and older" in w.message  # the table's release: a warning
    [e] = by_code(judge({"task": "mmlu_test"}, command="eval", version_installed=True),
                  "lint.llamafactory.eval_removed")
    assert e.is_error and "Evaluation will be deprecated in the future." in e.message
    assert judge({"task": "mmlu_test"}, command="eval", llamafactory_version=Version("0.9.3"),
                 version_installed=True) == []


def test_the_datasets_a_mode_needs():
    """get_train_args: predicting needs an eval dataset (or a val_size split), training a dataset
    (hiyouga/LlamaFactory#5092: the example's do_predict with `dataset:` only)."""
    predict = {"stage": "sft", "do_predict": True, "predict_with_generate": True, "dataset": "identity"}
    [m] = [m for m in judge(predict) if "eval_dataset be provided" in m.message]
    assert m.key_path == "do_predict" and m.is_error
    assert not [m for m in judge(dict(predict, val_size=0.1)) if "eval_dataset be provided" in m.message]
    assert "Please specify dataset for training." in refusals(judge({"do_train": True}))
    assert "Cannot specify `val_size` if `eval_dataset` is not None." in refusals(
        judge({"do_train": True, "dataset": "a", "eval_dataset": "b", "val_size": 0.1}))


def test_datasets_are_looked_up_as_llamafactory_looks_them_up(tmp_path, monkeypatch):
    """data/dataset_info.json relative to the working directory, each name in it, each local file under data/."""
    monkeypatch.chdir(tmp_path)
    train = {"do_train": True, "dataset": "identity,alpaca_en_dmeo,hub_set"}
    [missing] = by_code(judge(train), "lint.llamafactory.dataset_dir_missing")
    assert missing.is_error and missing.key_path == "dataset" and "Cannot open data/dataset_info.json" in \
        missing.message
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dataset_info.json").write_text(json.dumps({
        "identity": {"file_name": "identity.json"}, "alpaca_en_demo": {"file_name": "alpaca_en_demo.json"},
        "hub_set": {"hf_hub_url": "org/set"}}))
    (tmp_path / "data" / "alpaca_en_demo.json").write_text("[]")
    found = judge(train)
    [undefined] = by_code(found, "lint.llamafactory.dataset_undefined")
    assert undefined.did_you_mean == "alpaca_en_demo" and "Undefined dataset alpaca_en_dmeo" in undefined.message
    [file] = by_code(found, "lint.llamafactory.dataset_file_missing")
    assert "File data/identity.json not found." in file.message  # hub_set is on the hub: not looked up
    assert not by_code(judge(dict(train, dataset_dir="ONLINE")), "lint.llamafactory.dataset_undefined")
