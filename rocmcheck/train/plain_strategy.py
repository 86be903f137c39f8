"""The plain smoke-train step: torch AdamW, fp32 weights under bf16 autocast (what HF Trainer's bf16=True
does; --pure-bf16: bf16 weights, no autocast), clipping, gradient accumulation; data-parallel under
DistributedDataParallel when there are several ranks. The baseline the DeepSpeed run is held to."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from rocmcheck.train import modeling
from rocmcheck.train.compiled import compile_model
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.distributed import World

MicroBatch = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]


class PlainStrategy:
    name = "plain"
    owns_lr = False  # the run sets the lr each step (warmup + cosine)
    zero3 = False

    def __init__(self, cfg: TrainConfig, device: torch.device, world: World, model: torch.nn.Module | None = None,
                 on_loss: Callable[[int, torch.Tensor], None] | None = None, fp32: bool = False) -> None:
        """model: an already built model to train (the bench's random-init shape); default: load cfg.model.
        on_loss(step, loss): called with every micro-batch's loss tensor (tests reach into a real run with it).
        fp32: the reference run of --drift (train/drift.py): fp32 weights (a LoRA base too), no autocast."""
        self.cfg, self.device, self.world = cfg, device, world
        self.fp32 = fp32
        if fp32:
            self.name = "fp32"
        self.model = model
        self.forward = self.optimizer = None
        self.on_loss = on_loss
        self._micro_batch: MicroBatch | None = None
        self.info: dict[str, Any] = {}

    def build(self, micro_batch: MicroBatch) -> torch.nn.Module:
        lora = self.cfg.lora_rank
        if self.model is None:
            # LoRA: the frozen base in bf16, as the planner counts it (2 bytes a weight)
            self.model = modeling.load_model(Path(self.cfg.model), self.cfg, self.device,
                                             dtype=torch.float32 if self.fp32 else torch.bfloat16 if lora else None)
        model = modeling.prepare_for_training(self.model, self.cfg.gradient_checkpointing)
        if lora:
            model = self.model = modeling.add_lora(model, lora)
        self._micro_batch = micro_batch
        self.forward = compile_model(model, self.cfg.attn) if self.cfg.compile else model
        if self.world.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.forward = DistributedDataParallel(model, device_ids=ids)
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer, fused = modeling.make_optimizer(trainable, self.cfg, self.device)
        self.info = {"name": "DDP" if self.world.distributed else "plain", "optimizer": "AdamW", "fused": fused,
                     "trainable_params": sum(p.numel() for p in trainable)}
        if lora:
            self.info["lora_targets"] = sorted(model.peft_config["default"].target_modules)
        return model

    def set_lr(self, lr: float) -> float:
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def forward_backward(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward/backward over the accumulation micro-batches, then clip: (this rank's loss, grad norm)."""
        cfg = self.cfg
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=not (cfg.pure_bf16 or self.fp32))
        loss_sum = torch.zeros((), device=self.device)
        for micro in range(cfg.grad_accum):
            x, y = self._micro_batch(step, micro)
            with autocast:
                loss = self.forward(input_ids=x, labels=y).loss / cfg.grad_accum
            loss.backward()
            loss_sum += loss.detach()
            if self.on_loss:
                self.on_loss(step, loss)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        return loss_sum, grad_norm

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step over the accumulation micro-batches: (this rank's loss, grad norm)."""
        loss, grad_norm = self.forward_backward(step)
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
        self.model = self.forward = self.optimizer = self._micro_batch = None
