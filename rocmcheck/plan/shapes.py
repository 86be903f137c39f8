"""ModelShape: the few config.json numbers that decide a decoder model's memory, from a preset or a config file.

Read generically across the causal-LM families transformers builds: LLaMA's fields, and where a family has them,
head_dim (Gemma, Qwen 3), tie_word_embeddings, the mixture-of-experts fields (the routed expert count under
num_local_experts (Mixtral, GPT-OSS), num_experts (Qwen-MoE) or n_routed_experts (DeepSeek); num_experts_per_tok;
moe_intermediate_size, else intermediate_size, per expert; a shared expert of shared_expert_intermediate_size
(Qwen-MoE) or n_shared_experts x moe_intermediate_size (DeepSeek); first_k_dense_replace dense layers first
(DeepSeek)) and DeepSeek's compressed attention (q_lora_rank, kv_lora_rank, qk_rope/nope_head_dim, v_head_dim).
Weights and optimizer states count every expert; activations count the experts a token runs through."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from rocmcheck.package_data import read_json

# Each shape number of a real LLaMA-family config is below 2**20 (vocabularies reach 256k, intermediate sizes 53k,
# layers 126); 2**24 is far above and keeps the memory arithmetic exact in floats.
MAX_DIMENSION = 1 << 24
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
MOE_FIELDS = ("num_experts", "experts_per_token", "expert_intermediate_size", "shared_intermediate_size",
              "dense_layers")
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    head_dim: int = 0  # 0: hidden_size // num_attention_heads, as LlamaConfig does
    attention_bias: bool = False
    mlp_bias: bool = False
    max_position_embeddings: int | None = None
    # Mixture of experts (0: a dense model): routed experts, experts per token, one expert's intermediate size, the
    # shared expert's (0: none), and the dense layers before the first MoE layer.
    num_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    shared_intermediate_size: int = 0
    dense_layers: int = 0
    # DeepSeek's multi-head latent attention (0: standard attention).
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    def __post_init__(self) -> None:
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def moe_layers(self) -> int:
        return self.num_hidden_layers - self.dense_layers if self.is_moe else 0

    @property
    def active_intermediate_size(self) -> int:
        """The MLP width a token runs through: its experts' and the shared expert's (a dense model's own)."""
        if not self.is_moe:
            return self.intermediate_size
        return self.experts_per_token * self.expert_intermediate_size + self.shared_intermediate_size

    def attention_params(self) -> int:
        h, heads = self.hidden_size, self.num_attention_heads
        if self.kv_lora_rank:  # MLA: q (through a low-rank q_a/q_b when q_lora_rank), kv_a, kv_b, o, two norms
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk if self.q_lora_rank
                 else h * heads * qk)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank \
                + self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + heads * self.v_head_dim * h
        q, kv = self.q_dim, self.kv_dim
        return h * q + 2 * h * kv + q * h + (q + 2 * kv + h if self.attention_bias else 0)

    def mlp_params(self, moe: bool) -> int:
        """One layer's MLP: a SwiGLU of intermediate_size, or (moe) every routed expert, the router and the shared
        expert."""
        h = self.hidden_size
        if not moe:
            i = self.intermediate_size
            return 3 * h * i + (2 * i + h if self.mlp_bias else 0)
        e, i, shared = self.num_experts, self.expert_intermediate_size, self.shared_intermediate_size
        return e * 3 * h * i + h * e + (3 * h * shared if shared else 0)

    def layer_linear_params(self, moe: bool | None = None) -> int:
        """Weights (and biases) of one decoder layer's Linear modules (an MoE layer's experts counted in full);
        moe None: the model's most common layer."""
        return self.attention_params() + self.mlp_params(self.is_moe if moe is None else moe)

    def layer_params(self, moe: bool | None = None) -> int:
        return self.layer_linear_params(moe) + 2 * self.hidden_size  # + two RMSNorm weights

    def layers_params(self) -> int:
        return (self.moe_layers * self.layer_params(True)
                + (self.num_hidden_layers - self.moe_layers) * self.layer_params(False))

    def layers_linear_params(self) -> int:
        return (self.moe_layers * self.layer_linear_params(True)
                + (self.num_hidden_layers - self.moe_layers) * self.layer_linear_params(False))

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        """0 when tied: the head reuses the embedding matrix."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def param_count(self) -> int:
        """Parameters of transformers' LlamaForCausalLM: embedding, layers, final norm, untied head."""
        return self.embedding_params() + self.layers_params() + self.hidden_size + self.lm_head_params()

    def linear_params(self) -> int:
        """Parameters autocast casts to bf16 (every Linear, the head included; not the embedding or norms)."""
        return self.layers_linear_params() + self.vocab_size * self.hidden_size

    def lora_params(self, rank: int, targets: tuple[str, ...] | None = None) -> int:
        """LoRA adapters (A: in x r, B: r x out) on the given Linear modules of every layer (default: all seven)."""
        from rocmcheck.plan.formulas import LORA_MODULES, lora_in_out

        names = targets or tuple(LORA_MODULES)
        dense = lora_in_out(self.hidden_size, self.q_dim, self.kv_dim, self.intermediate_size)
        total = (self.num_hidden_layers - self.moe_layers) * sum(sum(dense[name]) for name in names)
        if self.moe_layers:  # routed experts are no Linear modules: only a shared expert's MLP carries adapters
            moe = lora_in_out(self.hidden_size, self.q_dim, self.kv_dim, self.shared_intermediate_size)
            total += self.moe_layers * sum(sum(moe[name]) for name in names
                                           if self.shared_intermediate_size or LORA_MODULES[name] in ("attn", "o"))
        return rank * total

    def quantizable_linear_params(self) -> int:
        """Weights bitsandbytes quantizes to 4 bit when a model is loaded in 4 bit: every decoder-layer Linear
        (transformers keeps lm_head, the embedding and the norms in the compute dtype)."""
        return self.layers_linear_params()

    def to_config(self) -> dict[str, Any]:
        """A LlamaConfig-compatible dict (what the GPU batch finder's child builds its model from)."""
        d = asdict(self)
        d.pop("name")
        for key in MOE_FIELDS + MLA_FIELDS:  # LlamaConfig has none of these
            d.pop(key)
        if d["max_position_embeddings"] is None:
            d.pop("max_position_embeddings")
        return d


def shape_from_config(config: dict[str, Any], name: str = "config.json") -> ModelShape:
    """LlamaConfig fields -> ModelShape. Raises ValueError naming what is missing or wrong."""
    if not isinstance(config, dict):
        raise ValueError(f"{name}: not a JSON object")
    if isinstance(config.get("text_config"), dict) and "hidden_size" not in config:
        config = config["text_config"]  # multimodal wrappers keep the language model's shape here
    missing = [k for k in REQUIRED if config.get(k) is None]  # "hidden_size": null says no more than no key
    if missing:
        raise ValueError(f"{name}: missing {', '.join(missing)} (needs LlamaConfig fields)")
    values: dict[str, Any] = {}
    for key in (*REQUIRED, "num_key_value_heads", "head_dim", "max_position_embeddings"):
        raw = config.get(key)
        if raw is None:
            continue
        if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
            raise ValueError(f"{name}: {key} must be a positive integer, got {str(raw)[:40]}")
        if raw > MAX_DIMENSION:
            raise ValueError(f"{name}: {key} {raw} is larger than any real model's ({MAX_DIMENSION:,} at most)")
        values[key] = raw
    values.setdefault("num_key_value_heads", values["num_attention_heads"])
    if values["num_attention_heads"] % values["num_key_value_heads"]:
        raise ValueError(f"{name}: num_attention_heads {values['num_attention_heads']} is not a multiple of "
                         f"num_key_value_heads {values['num_key_value_heads']}")
    if "head_dim" not in values and values["hidden_size"] % values["num_attention_heads"]:
        raise ValueError(f"{name}: hidden_size is not a multiple of num_attention_heads and head_dim is not set")
    for flag in ("tie_word_embeddings", "attention_bias", "mlp_bias"):
        values[flag] = bool(config.get(flag, False))
    values.update(_moe_values(config, values, name))
    if _count(config, "kv_lora_rank", name):
        for key in MLA_FIELDS:
            values[key] = _count(config, key, name)
    return ModelShape(name=name, **values)


def _count(config: dict[str, Any], key: str, name: str) -> int:
    """A non-negative integer field (0 when absent or null); ValueError naming it otherwise."""
    raw = config.get(key)
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ValueError(f"{name}: {key} must be a non-negative integer, got {str(raw)[:40]}")
    if raw > MAX_DIMENSION:
        raise ValueError(f"{name}: {key} {raw} is larger than any real model's ({MAX_DIMENSION:,} at most)")
    return raw


def _moe_values(config: dict[str, Any], values: dict[str, Any], name: str) -> dict[str, int]:
    experts = next((_count(config, k, name) for k in EXPERT_COUNT_KEYS if config.get(k) is not None), 0)
    if experts < 2:
        return {}
    inter = _count(config, "moe_intermediate_size", name) or values["intermediate_size"]
    shared = _count(config, "shared_expert_intermediate_size", name) or \
        _count(config, "n_shared_experts", name) * inter
    dense = _count(config, "first_k_dense_replace", name)
    only = config.get("mlp_only_layers")
    if isinstance(only, list):
        dense += len({i for i in only if isinstance(i, int) and not isinstance(i, bool)})
    return {"num_experts": experts, "experts_per_token": max(1, _count(config, "num_experts_per_tok", name)),
            "expert_intermediate_size": inter, "shared_intermediate_size": shared,
            "dense_layers": min(dense, values["num_hidden_layers"])}


@lru_cache(maxsize=None)
def presets() -> dict[str, dict[str, Any]]:
    data = read_json(__package__, "presets.json")
    return data["presets"]


def preset_shape(name: str) -> ModelShape | None:
    key = name.strip().lower()
    for preset, entry in presets().items():
        if key == preset or key in (a.lower() for a in entry.get("aliases", [])):
            return shape_from_config(entry["config"], name=preset)
    return None


def load_model_shape(spec: str) -> ModelShape:
    """A preset name (or its Hugging Face id), a config.json, or a model folder holding one.
    Raises ValueError with one line a person can act on."""
    shape = preset_shape(spec)
    if shape is not None:
        return shape
    from rocmcheck.safe.files import expand_user

    path = expand_user(spec)  # BadInput (a ValueError) for a ~name this machine has no user of
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise ValueError(f"{spec}: folder has no config.json")
    if path.exists():  # a FIFO or a device too: the reader refuses it by name
        from rocmcheck.safe.structured import load_file

        config = load_file(path, what="config.json", fmt="json")  # BadInput is a ValueError with one line
        return shape_from_config(config, name=str(path))
    names = list(presets())
    close = difflib.get_close_matches(spec.strip().lower(), names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ValueError(f"{spec!r} is neither a preset ({', '.join(names)}) nor a config.json or model folder{hint}")
