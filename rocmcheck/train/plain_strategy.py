"""The plain smoke-train step (loop.py's: torch AdamW, fp32 weights under bf16 autocast, clipping),
optionally data-parallel under DistributedDataParallel. The baseline the DeepSpeed run is held to."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from rocmcheck.train import loop
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.distributed import World

MicroBatch = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]


class PlainStrategy:
    name = "plain"
    owns_lr = False  # the run sets the lr each step (warmup + cosine, loop.lr_at)
    zero3 = False

    def __init__(self, cfg: TrainConfig, device: torch.device, world: World) -> None:
        self.cfg, self.device, self.world = cfg, device, world
        self.model = self.forward = self.optimizer = None
        self._step = None
        self.info: dict[str, Any] = {}

    def build(self, micro_batch: MicroBatch) -> torch.nn.Module:
        _, model = loop.load_model(Path(self.cfg.model), self.cfg, self.device)
        if self.cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        model.train()
        self.model = model
        self.forward = model
        if self.world.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.forward = DistributedDataParallel(model, device_ids=ids)
        self.optimizer, fused = loop.make_optimizer(model, self.cfg, self.device)
        self._step = loop.make_train_step(self.forward, model, self.cfg, self.device, micro_batch)
        self.info = {"name": "DDP" if self.world.distributed else "plain", "optimizer": "torch AdamW", "fused": fused}
        return model

    def set_lr(self, lr: float) -> float:
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step over the accumulation micro-batches: (this rank's loss, grad norm)."""
        loss, grad_norm = self._step(step)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, grad_norm

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def eval_model(self) -> torch.nn.Module | None:
        """The trained model with all its weights, on rank 0 (DDP keeps a full copy on every rank)."""
        return self.model if self.world.is_main else None

    @torch.no_grad()
    def live_logits(self, batch: torch.Tensor) -> torch.Tensor:
        was = self.model.training
        self.model.eval()
        logits = self.model(input_ids=batch).logits.float()
        self.model.train(was)
        return logits

    def weights_checksum(self) -> float | None:
        return float(sum(p.detach().double().sum() for p in self.model.parameters()))

    def close(self) -> None:
        self.model = self.forward = self.optimizer = self._step = None
