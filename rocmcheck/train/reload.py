"""train.reload: the trained weights saved as the Trainer saves them, then checked: they must come back bit for bit,
and the saved model must compute the trained model's own logits within the device's run-to-run noise.

A small model (up to saved_weights.FULL_RELOAD_MAX_BYTES of weights) is loaded back with from_pretrained; a larger
one is saved from host copies and read back from its files tensor by tensor (saved_weights.py: no second copy on
the device), falling back to from_pretrained when the files are not a one-to-one image of the model. A LoRA run
saves its adapter as peft does and loads it back through peft beside the trained one. Imports torch.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from rocmcheck.result import CheckResult
from rocmcheck.train import modeling, saved_weights, verdicts
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.model_files import weights_failure
from rocmcheck.train.outputs import checkpoint_folder, publish_checkpoint
from rocmcheck.train.report import first_line


@dataclass
class Reloaded:
    """What the check compares against: the model as it will be saved (`model`; ZeRO-3's gathered copy), the trained
    module's logits on `batch` (`live`), and the device's run-to-run noise on them. saved_other_model: `model` is not
    the module whose logits `live` holds, so its own logits are compared too when the files are read back."""

    model: torch.nn.Module
    live: torch.Tensor
    noise: float
    batch: torch.Tensor
    saved_other_model: bool = False


def method_for(nbytes: int) -> str:
    """train.reload's method for nbytes of weights, as the environment may force it (saved_weights.METHOD_ENV)."""
    return saved_weights.choose_method(nbytes, os.environ.get(saved_weights.METHOD_ENV))


@torch.no_grad()
def check_reload(cfg: TrainConfig, what: Reloaded, info: dict[str, Any],
                 on_saved: Callable[[Path], None] | None = None) -> CheckResult:
    """The verdict; info (the run's info["reload"]) gets the method and the save, compare and verify seconds.
    on_saved sees the checkpoint folder once it is written, before it is checked."""
    if cfg.lora_rank:
        return _check_adapter(cfg, what)
    nbytes = saved_weights.weight_bytes(what.model)
    info.update(method=method_for(nbytes), weight_bytes=nbytes)
    save_dir = Path(cfg.out or ".")
    try:
        with checkpoint_folder(cfg.out) as save_dir:
            t0 = time.perf_counter()
            host = saved_weights.host_copies(what.model.state_dict()) if info["method"] == "files" else None
            if host is not None:
                info["host_copy_s"] = round(time.perf_counter() - t0, 3)
            # save_pretrained pops what it wrote from the dict it is given: a copy, so the copies stay whole
            modeling.save_checkpoint(what.model, save_dir, dict(host) if host is not None else None)
            info["save_s"] = round(time.perf_counter() - t0, 3)
            if on_saved:
                on_saved(save_dir)
            result = _judge_saved(cfg, what, save_dir, host, info)
            if cfg.out:
                publish_checkpoint(save_dir, Path(cfg.out))
            return result
    except Exception as exc:  # noqa: BLE001 - _save_failed sorts it
        return _save_failed(exc, save_dir)


def _judge_saved(cfg: TrainConfig, what: Reloaded, save_dir: Path, host: dict[str, torch.Tensor] | None,
                 info: dict[str, Any]) -> CheckResult:
    model, batch, live = what.model, what.batch, what.live
    dtype = next(model.parameters()).dtype
    bound, label = what.noise, "this device's run-to-run noise"
    if dtype in (torch.bfloat16, torch.float16):
        # The engine's module (ZeRO hooks, gathered parameters) and a plain HF model with the same 16-bit weights may
        # pick different GEMM/attention kernels: their 16-bit logits then differ by a few units in the last place
        # (bf16: 2^-7 of the magnitude). A wrong checkpoint differs by far more; the weights themselves are still
        # compared bit for bit.
        bound = max(what.noise, 4 * torch.finfo(dtype).eps * live.abs().max().item())
        label = f"4 {dtype} ulps of the largest logit"
    t0 = time.perf_counter()
    if info["method"] == "files":
        files = saved_weights.compare_files(save_dir, model, host)
        info["compare_s"] = round(time.perf_counter() - t0, 3)
        if files.one_to_one:
            diff = (model(input_ids=batch).logits.float() - live).abs().max().item() if what.saved_other_model else None
            info["verify_s"] = round(time.perf_counter() - t0, 3)
            return verdicts.check_reload(diff, bound, files.weights_equal, bound_label=label, files=files.to_dict())
        info["method"], info["fallback"] = "full", files.why_not
    again = modeling.load_model(save_dir, cfg, batch.device, dtype=dtype).eval()
    reloaded = again.state_dict()
    weights_equal = all(torch.equal(t, reloaded[k]) for k, t in model.state_dict().items() if k in reloaded)
    diff = (again(input_ids=batch).logits.float() - live).abs().max().item()
    info["verify_s"] = round(time.perf_counter() - t0, 3)
    return verdicts.check_reload(diff, bound, weights_equal, bound_label=label)


def _save_failed(exc: Exception, save_dir: Path) -> CheckResult:
    """A save or a read back that raised: a failed train.reload when the saved files (or the disk) made the readers
    raise; anything else is raised again (a bug)."""
    if not isinstance(exc, OSError) and weights_failure(save_dir, exc) is None:
        raise exc
    return verdicts.check_reload(None, error=f"{type(exc).__name__}: {first_line(exc, 300)}")


def _check_adapter(cfg: TrainConfig, what: Reloaded) -> CheckResult:
    """LoRA: save the adapter as peft does, load it back through peft next to the trained one: the same weights bit
    for bit, and the same logits when it is the active adapter."""
    from peft import get_peft_model_state_dict

    model = what.model
    try:
        with checkpoint_folder(cfg.out, "adapter") as save_dir:
            model.save_pretrained(save_dir, safe_serialization=True)
            model.load_adapter(save_dir, adapter_name="reloaded")
            if cfg.out:
                publish_checkpoint(save_dir, Path(cfg.out))
    except OSError as exc:
        return verdicts.check_reload(None, error=f"{type(exc).__name__}: {exc}")
    trained = get_peft_model_state_dict(model, adapter_name="default")
    reloaded = get_peft_model_state_dict(model, adapter_name="reloaded")
    weights_equal = trained.keys() == reloaded.keys() and all(torch.equal(t, reloaded[k]) for k, t in trained.items())
    not_loaded = sorted(set(trained) - set(reloaded))
    was = model.training
    model.eval()
    model.set_adapter("reloaded")
    try:
        diff = (model(input_ids=what.batch).logits.float() - what.live).abs().max().item()
    finally:
        model.set_adapter("default")
        model.delete_adapter("reloaded")
        model.train(was)
    return verdicts.check_reload(diff, what.noise, weights_equal, not_loaded=not_loaded)
