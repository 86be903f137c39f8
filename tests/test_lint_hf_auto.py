"""rocmcheck's mirror of the HF Trainer's "auto" filling, checked against the real
transformers.integrations.deepspeed.HfTrainerDeepSpeedConfig (needs transformers, accelerate and
deepspeed, run in a child process because it imports torch)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from lint_helpers import REPO

from rocmcheck.lint.hf_auto import TrainingSettings, auto_paths, resolve_auto

CONFIG = {
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto", "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto"}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"},
}
ARGS = {"per_device_train_batch_size": 12, "gradient_accumulation_steps": 8, "world_size": 4, "max_grad_norm": 0.5,
        "learning_rate": 2e-5, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_epsilon": 1e-6, "weight_decay": 0.1,
        "fp16": False, "bf16": True}


def test_mirror_fills_batch_precision_and_optimizer():
    resolved = resolve_auto(CONFIG, TrainingSettings(**ARGS))
    assert resolved.config["train_batch_size"] == 12 * 8 * 4
    assert resolved.config["bf16"]["enabled"] is True and resolved.config["fp16"]["enabled"] is False
    assert resolved.config["optimizer"]["params"]["betas"] == [0.9, 0.95]
    # the hidden-size keys wait for the model (trainer_config_finalize)
    assert auto_paths(resolved.config) == ["zero_optimization.reduce_bucket_size"]


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("transformers", "accelerate", "deepspeed")),
                    reason="needs transformers + accelerate + deepspeed (HfDeepSpeedConfig requires accelerate)")
def test_mirror_equals_the_real_hf_trainer_deepspeed_config():
    code = (
        "import json, sys, types\n"
        "from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig\n"
        "req = json.loads(sys.stdin.read())\n"
        # TrainingArguments' defaults of the fields the method reads besides ARGS (transformers 4.x reads the
        # apex ones too)
        "args = types.SimpleNamespace(save_on_each_node=False, fp16_full_eval=False, bf16_full_eval=False, "
        "fp16_backend='auto', fp16_opt_level='O1', **req['args'])\n"
        "hf = HfTrainerDeepSpeedConfig(req['config']); hf.trainer_config_process(args)\n"
        "print(json.dumps({'config': hf.config, 'mismatches': hf.mismatches}))\n"
    )
    env = dict(os.environ, DS_ACCELERATOR="cpu", PYTHONPATH=str(REPO))
    for config in (CONFIG, dict(CONFIG, train_micro_batch_size_per_gpu=4, gradient_clipping=1.0)):
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps({"config": config, "args": ARGS}),
                             capture_output=True, text=True, env=env, timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
        real = json.loads(out.stdout.strip().splitlines()[-1])
        mine = resolve_auto(config, TrainingSettings(**ARGS))
        assert mine.config == real["config"]
        assert len(mine.mismatches) == len(real["mismatches"])
        for (key, ds_value, hf_name, hf_value), text in zip(mine.mismatches, real["mismatches"]):
            assert text == f"- ds {key}={ds_value} vs hf {hf_name}={hf_value}"
