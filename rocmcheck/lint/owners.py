"""Whose config a file is, from what each owner's own format requires, not from keys that several programs share
(`output_dir`, `learning_rate`, `dataset`, `lora_rank` are in half of them). The file's owner decides how it is
judged: lint judges DeepSpeed JSON, accelerate configs, LLaMA-Factory YAML and HF TrainingArguments files; a config
of another program is named and skipped, never judged by a parser that is not the one that will read it.

Each owner below is recognised by what its parser requires or what only it writes:

- accelerate: `compute_environment` / `distributed_type` (accelerate/commands/config/config_args.py BaseConfig,
  the two keys `accelerate config` always writes).
- torchtune: objects built from `_component_` paths (torchtune/config/_instantiate.py), `torchtune.*` ones.
- LLaMA-Factory v1 (`llamafactory-cli` with USE_V1=1): `model` with `model_class`, `train_dataset` or
  `dist_config` (LLaMA-Factory examples/v1/*.yaml, src/llamafactory/v1/config/).
- ms-swift: `model` (ms-swift's BaseArguments; LLaMA-Factory spells it `model_name_or_path`) with one of its own
  keys: `tuner_type` / `train_type`, `rlhf_type`, `model_author`, `model_type`, `target_modules`
  (swift/llm/argument/, examples/yaml/*.yaml).
- axolotl: `base_model`, the one field its config schema requires (axolotl/utils/schemas/config.py
  AxolotlInputConfig); no other program here reads it. Judged by that schema when axolotl is installed
  (rocmcheck.lint.axolotl_config), else named and skipped.
- LLaMA-Factory (0.9.x, `llamafactory-cli`): keys only its argument dataclasses have (`stage`, `finetuning_type`,
  `template`, `cutoff_len`, ...; llamafactory/hparams/*_args.py). With Megatron-Core parallelism keys it is its
  Megatron trainer's (mcore_adapter with USE_MCA=1, or Megatron-Bridge): judged, those keys noted, not refused.
- Megatron-Core alone (Megatron-LM, Megatron-Bridge, NeMo recipes): its parallelism keys without LLaMA-Factory's.
- alignment-handbook recipes (its scripts/sft.py, dpo.py, ...): `dataset_mixture`, its ScriptArguments' mixture of
  datasets (src/alignment/configs.py; TRL's own classes call theirs `datasets`).
- TRL (`trl sft|dpo|grpo --config`): keys only TRL's ScriptArguments, ModelConfig and trainer configs have
  (`dataset_train_split`, `use_peft`, `dataset_text_field`, `num_generations`, ...; trl/scripts/utils.py,
  trl/trainer/model_config.py, trl/trainer/sft_config.py); not `dataset_name` or `packing`, which transformers'
  example scripts and LLaMA-Factory share. TRL reads a --config file with its own parser (TrlParser), not with
  HfArgumentParser's "Some keys are not used": judged by that parser when TRL is installed
  (rocmcheck.lint.trl_recipe), else named and skipped.
- HF TrainingArguments and DeepSpeed: as before (rocmcheck.lint.files).
"""

from __future__ import annotations

from typing import Any

# Keys every `accelerate config` file has (accelerate/commands/config/config_args.py BaseConfig, ClusterConfig).
ACCELERATE_KEYS = {"distributed_type", "compute_environment"}
# Keys only LLaMA-Factory's 0.9.x argument dataclasses have (llamafactory/hparams/*_args.py).
LLAMAFACTORY_KEYS = {"stage", "finetuning_type", "template", "cutoff_len", "lora_target", "adapter_name_or_path",
                     "infer_backend", "export_dir", "dataset_dir", "quantization_bit", "flash_attn"}
# LLaMA-Factory keys that other programs share (ms-swift's `dataset` and `lora_rank`): LLaMA-Factory's only with
# `model_name_or_path`, which its ModelArguments requires.
LLAMAFACTORY_SHARED_KEYS = {"dataset", "lora_rank"}
LLAMAFACTORY_V1_KEYS = {"model_class", "train_dataset", "dist_config"}
SWIFT_KEYS = {"tuner_type", "train_type", "rlhf_type", "model_author", "model_type", "target_modules"}
# Megatron-Core's parallelism and overlap settings (megatron/core/model_parallel_config.py ModelParallelConfig,
# distributed/distributed_data_parallel_config.py, transformer/transformer_config.py), as LLaMA-Factory's
# examples/megatron and ms-swift's examples/yaml/megatron write them.
MEGATRON_KEYS = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size",
                 "context_parallel_size", "virtual_pipeline_model_parallel_size", "sequence_parallel",
                 "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "recompute_granularity",
                 "recompute_method", "recompute_num_layers", "moe_grouped_gemm", "moe_token_dispatcher_type",
                 "bias_activation_fusion", "apply_rope_fusion", "masked_softmax_fusion", "cross_entropy_loss_fusion"}
# Names Megatron-Core (and the trainers built on it) gives its settings: a key of a Megatron-mode LLaMA-Factory
# file that starts so is Megatron's, not a misspelt LLaMA-Factory key.
MEGATRON_PREFIXES = ("moe_", "recompute_", "overlap_", "tensor_model_", "pipeline_model_", "expert_", "context_",
                     "virtual_pipeline_", "megatron_")
# Keys only TRL's script and trainer arguments have (trl/scripts/utils.py ScriptArguments, DatasetMixtureConfig;
# trl/trainer/model_config.py ModelConfig; sft_config.py, dpo_config.py, grpo_config.py).
TRL_KEYS = {"dataset_config", "dataset_train_split", "dataset_test_split",
            "use_peft", "lora_target_modules", "dataset_text_field",
            "completion_only_loss", "assistant_only_loss", "use_vllm", "num_generations", "reward_funcs",
            "use_liger_kernel_loss"}
# alignment-handbook's ScriptArguments (src/alignment/configs.py): its dataset mixture, a mapping of `datasets`.
ALIGNMENT_HANDBOOK_KEYS = {"dataset_mixture"}
# TrainingArguments keys that a DeepSpeed config never has at the top level.
TRAINING_ARGS_KEYS = {"output_dir", "per_device_train_batch_size", "deepspeed", "learning_rate", "num_train_epochs",
                      "max_steps", "do_train", "model_name_or_path"}

# The programs lint names and skips: kind -> how a skip names the file.
NOT_JUDGED = {
    "torchtune": "a torchtune config",
    "llamafactory_v1": "a LLaMA-Factory v1 config (USE_V1=1)",
    "swift": "an ms-swift config",
    "axolotl": "an axolotl config",
    "megatron": "a Megatron-Core config",
    "alignment_handbook": "an alignment-handbook recipe (its scripts' parser)",
    "trl": "a TRL recipe (TrlParser)",
}
MAX_SCAN = 2000  # values looked at for a `_component_`: a config is small; a huge file is not scanned whole


def _components(data: Any) -> list[str]:
    """The `_component_` values anywhere in the mapping (breadth first, at most MAX_SCAN values)."""
    found, queue, seen = [], [data], 0
    while queue and seen < MAX_SCAN:
        node = queue.pop(0)
        seen += 1
        if isinstance(node, dict):
            value = node.get("_component_")
            if isinstance(value, str):
                found.append(value)
            queue.extend(node.values())
        elif isinstance(node, list):
            queue.extend(node)
    return found


def megatron_keys(data: dict) -> list[str]:
    return [k for k in data if isinstance(k, str) and k in MEGATRON_KEYS]


def is_megatron_key(key: str) -> bool:
    return key in MEGATRON_KEYS or key.startswith(MEGATRON_PREFIXES)


def foreign_owner(data: dict) -> str | None:
    """The NOT_JUDGED kind of a config lint does not judge, or None (a kind lint may judge, or none at all)."""
    keys = {k for k in data if isinstance(k, str)}
    if keys & ACCELERATE_KEYS:
        return None
    if any(c.startswith("torchtune.") for c in _components(data)):
        return "torchtune"
    if "model" in keys and "model_name_or_path" not in keys:
        if keys & LLAMAFACTORY_V1_KEYS:
            return "llamafactory_v1"
        if keys & SWIFT_KEYS:
            return "swift"
    if "base_model" in keys:
        return "axolotl"
    if is_llamafactory(keys):
        return None
    if keys & MEGATRON_KEYS:
        return "megatron"
    if keys & ALIGNMENT_HANDBOOK_KEYS:
        return "alignment_handbook"
    if keys & TRL_KEYS:
        return "trl"
    return None


def is_llamafactory(keys: set[str]) -> bool:
    return bool(keys & LLAMAFACTORY_KEYS) or ("model_name_or_path" in keys and bool(keys & LLAMAFACTORY_SHARED_KEYS))
