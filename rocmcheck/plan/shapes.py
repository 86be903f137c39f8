"""ModelShape: the few config.json numbers that decide a LLaMA model's memory, from a preset or a config file."""

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

    def __post_init__(self) -> None:
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def layer_linear_params(self) -> int:
        """Weights (and biases) of one decoder layer's seven Linear modules."""
        h, q, kv, i = self.hidden_size, self.q_dim, self.kv_dim, self.intermediate_size
        weights = h * q + 2 * h * kv + q * h + 3 * h * i
        biases = (q + 2 * kv + h if self.attention_bias else 0) + (2 * i + h if self.mlp_bias else 0)
        return weights + biases

    def layer_params(self) -> int:
        return self.layer_linear_params() + 2 * self.hidden_size  # + two RMSNorm weights

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        """0 when tied: the head reuses the embedding matrix."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def param_count(self) -> int:
        """Parameters of transformers' LlamaForCausalLM: embedding, layers, final norm, untied head."""
        return (self.embedding_params() + self.num_hidden_layers * self.layer_params()
                + self.hidden_size + self.lm_head_params())

    def linear_params(self) -> int:
        """Parameters autocast casts to bf16 (every Linear, the head included; not the embedding or norms)."""
        return self.num_hidden_layers * self.layer_linear_params() + self.vocab_size * self.hidden_size

    def lora_params(self, rank: int, targets: tuple[str, ...] | None = None) -> int:
        """LoRA adapters (A: in x r, B: r x out) on the given Linear modules of every layer (default: all seven)."""
        from rocmcheck.plan.formulas import LORA_MODULES, lora_in_out

        sizes = lora_in_out(self.hidden_size, self.q_dim, self.kv_dim, self.intermediate_size)
        per_layer = sum(sum(sizes[name]) for name in (targets or tuple(LORA_MODULES)))
        return self.num_hidden_layers * rank * per_layer

    def quantizable_linear_params(self) -> int:
        """Weights bitsandbytes quantizes to 4 bit when a model is loaded in 4 bit: every decoder-layer Linear
        (transformers keeps lm_head, the embedding and the norms in the compute dtype)."""
        return self.num_hidden_layers * self.layer_linear_params()

    def to_config(self) -> dict[str, Any]:
        """A LlamaConfig-compatible dict (what the GPU batch finder's child builds its model from)."""
        d = asdict(self)
        d.pop("name")
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
    return ModelShape(name=name, **values)


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
