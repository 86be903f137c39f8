"""What is wrong with a model folder's files when loading them fails: the file at fault and what is wrong with it,
as the train.load verdict says it, so a damaged checkpoint or tokenizer a person brought is never called a bug in
rocmcheck. No torch here; never raises.

The errors, as the libraries raise them (transformers 5, safetensors 0.6, torch 2.13):
- a truncated or malformed `*.safetensors` (its header's length, a header too large, a shape whose size
  overflows): safetensors' SafetensorError ("Error while deserializing header: ...");
- a pickle `pytorch_model*.bin` holding objects other than tensors: torch.load's weights_only refusal,
  pickle.UnpicklingError ("Weights only load failed ...");
- weights of other sizes than config.json says: transformers' RuntimeError naming `ignore_mismatched_sizes`;
- a tokenizer file that does not parse or lacks a key its loader reads (KeyError 'added_tokens', JSONDecodeError);
- a tokenizer without an end-of-sequence token, which the smoke-train needs to end every example.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from rocmcheck import fixes
from rocmcheck.fixes import Fix

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")
# The largest tokenizer.json of a LLaMA-family model is 9-11 MB (LLaMA 3, Qwen 2's 150k vocabularies).
MAX_TOKENIZER_BYTES = 64 << 20
MISMATCH_MARKERS = ("mismatched_sizes", "size mismatch")
DAMAGED_BIN_MARKERS = ("PytorchStreamReader", "failed finding central directory", "invalid load key")

RECOPY = ("copy the checkpoint again from where it came from (a download or copy that stopped part way leaves "
          "files like this), or save it again with save_pretrained")
BUNDLED_DAMAGED = fixes.shell("pip install --force-reinstall .",
                              "in the rocmcheck checkout: the bundled model's files are damaged")


def first_line(exc: BaseException, limit: int = 200) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


def weight_files(folder: Path) -> list[Path]:
    try:
        return sorted(folder.glob("*.safetensors")) + sorted(folder.glob("pytorch_model*.bin"))
    except OSError:
        return []


def _damaged_safetensors(folder: Path) -> Path | None:
    """The first *.safetensors file whose header safetensors cannot read (only the header is read)."""
    files = sorted(folder.glob("*.safetensors"))
    if len(files) == 1:
        return files[0]
    try:
        from safetensors import safe_open
    except ImportError:
        return files[0] if files else None
    for path in files:
        try:
            with safe_open(str(path), framework="numpy"):
                pass
        except Exception:  # noqa: BLE001 - whatever it raises, this is the file it cannot read
            return path
    return files[0] if files else None


def weights_failure(folder: Path, exc: BaseException, bundled: bool = False) -> tuple[str, Fix] | None:
    """(summary, fix) of a failed load of the weights in `folder`; None when the error does not come from its files."""
    folder = Path(folder)
    text = first_line(exc)
    fix: Fix = BUNDLED_DAMAGED if bundled else fixes.note(RECOPY)
    if type(exc).__name__ == "SafetensorError":
        path = _damaged_safetensors(folder) or folder
        return f"{path}: a damaged safetensors file ({text})", fix
    bins = [p for p in weight_files(folder) if p.suffix == ".bin"]
    where = bins[0] if len(bins) == 1 else folder
    refused = "Weights only load failed" in str(exc) or (isinstance(exc, pickle.UnpicklingError)
                                                          and "weights_only" in str(exc))
    if refused:
        return (f"{where}: torch refuses to load this pickle checkpoint safely (weights_only): it holds objects other "
                "than tensors, and loading it would run code from the file",
                fixes.note("convert it to safetensors where you trust the file and the code that wrote it "
                           "(from_pretrained, then save_pretrained(..., safe_serialization=True)); rocmcheck never "
                           "loads a pickle with weights_only=False"))
    if isinstance(exc, (pickle.UnpicklingError, EOFError)) or any(m in str(exc) for m in DAMAGED_BIN_MARKERS):
        return f"{where}: a damaged pickle checkpoint ({type(exc).__name__}: {text})", fix
    if isinstance(exc, (RuntimeError, ValueError)) and any(m in str(exc) for m in MISMATCH_MARKERS):
        return (f"{folder}: the weights do not have the sizes config.json gives ({text})",
                fixes.note("config.json and the weights come from different models: put the checkpoint's own "
                           "config.json beside its weights"))
    if isinstance(exc, (OSError, ValueError)):
        return f"could not load the weights in {folder}: {text}", fix
    return None


def _broken_json(folder: Path) -> Path | None:
    """The first tokenizer JSON file that does not parse (read through the capped reader: never a FIFO)."""
    from rocmcheck.safe.files import read_text_capped

    for name in TOKENIZER_FILES:
        path = folder / name
        if path.suffix != ".json" or not path.exists():
            continue
        try:
            json.loads(read_text_capped(path, limit=MAX_TOKENIZER_BYTES, what="tokenizer file"))
        except (OSError, ValueError, RecursionError):  # BadInput (not a file, too large, not UTF-8) is a ValueError
            return path
    return None


def tokenizer_file(folder: Path) -> Path:
    """The file that defines the tokenizer: tokenizer.json, else tokenizer.model, else tokenizer_config.json."""
    for name in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json"):
        if (folder / name).is_file():
            return folder / name
    return folder


def tokenizer_failure(folder: Path, exc: BaseException, bundled: bool = False) -> tuple[str, Fix]:
    """(summary, fix) of a tokenizer in `folder` that cannot be loaded (any error: it comes from its files)."""
    folder = Path(folder)
    path = _broken_json(folder) or tokenizer_file(folder)
    what = f"{type(exc).__name__}: {first_line(exc)}"
    return (f"{path}: the tokenizer cannot be loaded ({what})",
            BUNDLED_DAMAGED if bundled else fixes.note(RECOPY.replace("the checkpoint", "the tokenizer files")))


def no_eos_failure(folder: Path) -> tuple[str, Fix]:
    """A tokenizer that loads but has no end-of-sequence token (every training example ends with one)."""
    folder = Path(folder)
    config = folder / "tokenizer_config.json"
    path = config if config.is_file() else tokenizer_file(folder)
    return (f"{path}: the tokenizer has no eos token (eos_token is not set)",
            fixes.edit(path, 'set "eos_token" to the end-of-sequence token the model was trained with',
                       "LLaMA 2: </s>, LLaMA 3: <|end_of_text|>; every training example ends with it"))
