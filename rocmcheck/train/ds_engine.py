"""The smoke-train step through the real DeepSpeed engine (deepspeed.initialize), set up the way the
HF Trainer (with accelerate) sets it up for the same config:

- ZeRO-3: the model is loaded under zero.Init (transformers does that while an HfDeepSpeedConfig is
  alive), so a model bigger than one GPU never exists whole on any rank.
- No "optimizer" section: the Trainer's torch AdamW is handed to DeepSpeed as the client optimizer
  (with zero_allow_untested_optimizer); with optimizer offload, accelerate swaps it for
  DeepSpeedCPUAdam (accelerate.utils.deepspeed.map_pytorch_optim_to_deepspeed). accelerate copies only
  lr and weight_decay, so its CPU Adam runs with betas (0.9, 0.999); here the run's betas are kept, so
  the curve stays comparable with the plain run.
- An "optimizer" section: DeepSpeed builds it ("auto" values filled from the run).
- The engine owns bf16 (bf16.enabled), gradient accumulation (engine.step() at every micro-batch) and
  clipping (gradient_clipping).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import torch

from rocmcheck import fixes
from rocmcheck.train import modeling
from rocmcheck.train.config import ADAM_BETAS, ADAM_EPS, TrainConfig
from rocmcheck.train.distributed import World, skip_deepspeed_cpu_shm
from rocmcheck.train.ds_config import DeepSpeedPlan
from rocmcheck.train.report import SetupFailed, first_line

MicroBatch = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]


class DeepSpeedStrategy:
    def __init__(self, cfg: TrainConfig, device: torch.device, world: World, plan: DeepSpeedPlan) -> None:
        self.cfg, self.device, self.world, self.plan = cfg, device, world, plan
        self.name = plan.label
        self.owns_lr = plan.has_scheduler  # the config's scheduler sets the lr; the run only reads it
        self.zero3 = plan.stage == 3
        self.engine = None
        self._micro_batch: MicroBatch | None = None
        self._hf_ds_config = None  # keeps transformers' zero.Init switch on while the model loads
        self.info: dict[str, Any] = {}

    def build(self, micro_batch: MicroBatch) -> torch.nn.Module:
        import deepspeed

        self._micro_batch = micro_batch
        config = copy.deepcopy(self.plan.config)
        if self.zero3:
            from transformers.integrations import HfDeepSpeedConfig

            self._hf_ds_config = HfDeepSpeedConfig(config)
        model = modeling.load_model(Path(self.cfg.model), self.cfg, None, dtype=torch.float32)
        modeling.prepare_for_training(model, self.cfg.gradient_checkpointing)
        optimizer = None
        if not self.plan.has_optimizer:
            config["zero_allow_untested_optimizer"] = True  # what the Trainer adds with its own AdamW
            optimizer = self._client_optimizer(model)
        skip_deepspeed_cpu_shm(self.device.type)  # where deepspeed.initialize starts the process group itself
        try:
            self.engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer,
                                                        model_parameters=None if optimizer else model.parameters(),
                                                        config=config)
        except (ValueError, AssertionError) as exc:  # DeepSpeed checks the rest of the config here
            fix = fixes.shell("rocmcheck lint {path} --world-size {world} --micro-batch {micro} --grad-accum {accum}",
                              "lint names what DeepSpeed refuses", path=self.plan.path, world=self.world.world_size,
                              micro=self.cfg.micro_batch, accum=self.cfg.grad_accum)
            raise SetupFailed("train.deepspeed", f"deepspeed.initialize refused {self.plan.path}: {first_line(exc)}",
                              fix) from None
        self.info = {"name": self.plan.label, "optimizer": type(self.engine.basic_optimizer).__name__,
                     "zero_optimizer": type(self.engine.optimizer).__name__, "deepspeed": deepspeed.__version__,
                     "accelerator": _accelerator_name()}
        return self.engine.module

    def _client_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        params = [p for p in model.parameters() if p.requires_grad]
        if self.plan.offloads_optimizer:
            from deepspeed.ops.adam import DeepSpeedCPUAdam  # JIT-builds the cpu_adam op on first use

            return DeepSpeedCPUAdam(params, lr=self.cfg.lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                    weight_decay=self.cfg.weight_decay, adamw_mode=True)
        return torch.optim.AdamW(params, lr=self.cfg.lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                 weight_decay=self.cfg.weight_decay)

    def set_lr(self, lr: float) -> float:
        if self.owns_lr:
            return float(self.engine.get_lr()[0])
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """As the Trainer drives the engine: forward, engine.backward, engine.step at every micro-batch
        (the optimizer only steps at the accumulation boundary; engine.backward scales by it)."""
        loss_sum = torch.zeros((), device=self.device)
        for micro in range(self.cfg.grad_accum):
            x, y = self._micro_batch(step, micro)
            loss = self.engine(input_ids=x, labels=y).loss
            self.engine.backward(loss)
            self.engine.step()
            loss_sum += loss.detach().float() / self.cfg.grad_accum
        norm = self.engine.get_global_grad_norm()
        norm_t = torch.as_tensor(float("nan") if norm is None else float(norm), dtype=torch.float32, device=self.device)
        return loss_sum, norm_t

    def zero_grad(self) -> None:
        self.engine.zero_grad()

    def eval_model(self) -> torch.nn.Module | None:
        """The trained weights as one ordinary HF model on rank 0, for generation and saving.

        ZeRO-3 shards every weight, so they are gathered the way the Trainer saves a ZeRO-3 model
        (stage3_gather_16bit_weights_on_model_save: engine._zero3_consolidated_16bit_state_dict, a
        collective: every rank calls it). ZeRO-1/2 keep whole bf16 weights on each rank."""
        if not self.zero3:
            return self.engine.module if self.world.is_main else None
        state = self.engine._zero3_consolidated_16bit_state_dict()
        if not self.world.is_main:
            return None
        from transformers import AutoModelForCausalLM
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()  # a model built now must not be partitioned again
        self._hf_ds_config = None
        model = AutoModelForCausalLM.from_config(self.engine.module.config, dtype=torch.bfloat16,
                                                 attn_implementation=self.cfg.attn)
        model.load_state_dict(state, strict=True)
        return model.to(self.device).eval()

    @torch.no_grad()
    def live_logits(self, batch: torch.Tensor) -> torch.Tensor:
        """Logits of the engine's own module (ZeRO-3 gathers each layer's weights on the fly, so every
        rank must call this with the same batch)."""
        module = self.engine.module
        was = module.training
        module.eval()
        logits = module(input_ids=batch).logits.float()
        module.train(was)
        return logits

    def weights_checksum(self) -> float | None:
        if self.zero3:
            return None  # each rank holds a different shard
        return float(sum(p.detach().double().sum() for p in self.engine.module.parameters()))

    def close(self) -> None:
        if self.engine is not None and hasattr(self.engine, "destroy"):
            self.engine.destroy()
        self.engine = None
        if self._hf_ds_config is not None:
            from transformers.integrations.deepspeed import unset_hf_deepspeed_config

            unset_hf_deepspeed_config()
            self._hf_ds_config = None


def _accelerator_name() -> str:
    from deepspeed.accelerator import get_accelerator

    return get_accelerator().device_name()
