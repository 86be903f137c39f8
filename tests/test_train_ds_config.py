"""`smoke-train --deepspeed CONFIG` input: lint first (errors are bad input, exit 2), then "auto" filled
exactly as the HF Trainer fills it, checked against the real HfTrainerDeepSpeedConfig in a child."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmcheck.errors import BadInput
from rocmcheck.train.child import parse_request, train_request
from rocmcheck.train.config import BUNDLED_MODEL, TrainConfig
from rocmcheck.train.ds_config import finalize_auto, model_hidden_size, prepare_deepspeed_config
from rocmcheck.train.launch import torchrun_launcher

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"
MODEL_CONFIG = json.loads((BUNDLED_MODEL / "config.json").read_text())
HIDDEN = MODEL_CONFIG["hidden_size"]
HAS_DS = all(importlib.util.find_spec(m) for m in ("deepspeed", "transformers", "accelerate"))


def write(tmp_path: Path, config: dict, name: str = "ds.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("recipe", ["zero2", "zero3", "zero3-offload"])
def test_shipped_recipes_are_accepted_and_every_auto_is_filled(recipe):
    cfg = TrainConfig(micro_batch=4, grad_accum=2)
    plan = prepare_deepspeed_config(RECIPES / f"{recipe}.json", cfg, world_size=2, hidden_size=HIDDEN)
    c = plan.config
    assert (c["train_micro_batch_size_per_gpu"], c["gradient_accumulation_steps"], c["train_batch_size"]) == (4, 2, 16)
    assert c["gradient_clipping"] == cfg.grad_clip and c["bf16"]["enabled"] is True
    assert "auto" not in json.dumps(c)
    assert plan.stage == (2 if recipe == "zero2" else 3)
    assert plan.offloads == (recipe == "zero3-offload")
    if plan.stage == 3:
        z = c["zero_optimization"]
        assert (z["reduce_bucket_size"], z["stage3_prefetch_bucket_size"], z["stage3_param_persistence_threshold"]) == \
            (HIDDEN * HIDDEN, int(0.9 * HIDDEN * HIDDEN), 10 * HIDDEN)
    off = plan.without_offload()
    assert not off.offloads and "offload_optimizer" not in off.config["zero_optimization"]
    assert plan.offloads == ("offload_optimizer" in c["zero_optimization"])  # the original is untouched


def test_the_seed_typo_is_refused_with_one_line_per_error(tmp_path):
    config = json.loads((RECIPES / "zero3-offload.json").read_text())
    config["zero_optimization"]["stage3_parition_grads"] = True  # a misspelt key seen in a real config
    config["zero_optimisation"] = {"stage": 2}  # a misspelt section DeepSpeed silently ignores
    with pytest.raises(BadInput) as err:
        prepare_deepspeed_config(write(tmp_path, config), TrainConfig(), 1, HIDDEN)
    lines = str(err.value).splitlines()
    assert len(lines) == 2 and "stage3_parition_grads" in lines[0] and "stage3_partition_grads" in lines[0]
    assert ": error [lint." in lines[0] and "1 lint error(s)" in lines[1]
    # The misspelt section alone is a lint warning (DeepSpeed ignores it): the run goes on and says so.
    del config["zero_optimization"]["stage3_parition_grads"]
    plan = prepare_deepspeed_config(write(tmp_path, config), TrainConfig(), 1, HIDDEN)
    assert any("zero_optimisation" in w and "ignores it" in w for w in plan.warnings)


def test_a_value_that_contradicts_the_run_is_refused_like_the_trainer_does(tmp_path):
    config = json.loads((RECIPES / "zero2.json").read_text()) | {"train_micro_batch_size_per_gpu": 4}
    with pytest.raises(BadInput, match=r"train_micro_batch_size_per_gpu.*per_device_train_batch_size=16"):
        prepare_deepspeed_config(write(tmp_path, config), TrainConfig(micro_batch=16), 1, HIDDEN)


@pytest.mark.parametrize("text, words", [("{not json", "not valid JSON"), ("[1, 2]", "not a JSON object")])
def test_unreadable_config_is_bad_input(tmp_path, text, words):
    path = tmp_path / "ds.json"
    path.write_text(text)
    with pytest.raises(BadInput, match=words):
        prepare_deepspeed_config(path, TrainConfig(), 1, HIDDEN)
    with pytest.raises(BadInput, match="no such file"):
        prepare_deepspeed_config(tmp_path / "missing.json", TrainConfig(), 1, HIDDEN)


def test_scheduler_step_counts_and_hidden_size_keys():
    config = {"zero_optimization": {"stage": 2, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"},
              "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto", "warmup_num_steps": "auto"}}}
    filled = finalize_auto(config, 64, steps=50, warmup_steps=0)
    # warmup_num_steps >= 1 for deepspeed >= 0.19.6
    assert config["scheduler"]["params"] == {"total_num_steps": 50, "warmup_num_steps": 1}
    assert config["zero_optimization"]["reduce_bucket_size"] == 64 * 64
    assert config["zero_optimization"]["stage3_prefetch_bucket_size"] == "auto"  # only ZeRO-3 fills the stage3_ keys
    assert set(filled) == {"scheduler.params.total_num_steps", "scheduler.params.warmup_num_steps",
                           "zero_optimization.reduce_bucket_size"}
    assert model_hidden_size({"text_config": {"hidden_sizes": [32, 96]}}) == 96
    assert model_hidden_size({}) is None


@pytest.mark.skipif(not HAS_DS,
                    reason="needs deepspeed, transformers and accelerate (the real HfTrainerDeepSpeedConfig)")
@pytest.mark.parametrize("recipe", ["zero2", "zero3", "zero3-offload", "with-scheduler"])
def test_fill_equals_the_real_hf_trainer(recipe):
    if recipe == "with-scheduler":
        config = json.loads((RECIPES / "zero3.json").read_text())
        config["optimizer"] = {"type": "AdamW",
                               "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
        config["scheduler"] = {"type": "WarmupDecayLR",
                               "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto",
                                          "total_num_steps": "auto"}}
    else:
        config = json.loads((RECIPES / f"{recipe}.json").read_text())
    cfg = TrainConfig(micro_batch=4, grad_accum=3, steps=40)
    code = (
        "import json, sys, types\n"
        "from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig\n"
        "r = json.loads(sys.stdin.read())\n"
        "a = r['args']\n"
        "args = types.SimpleNamespace(save_on_each_node=False, fp16_full_eval=False, bf16_full_eval=False,\n"
        "    get_warmup_steps=lambda n: a['warmup_steps'], **{k: v for k, v in a.items() if k != 'warmup_steps'})\n"
        "hf = HfTrainerDeepSpeedConfig(r['config']); hf.trainer_config_process(args)\n"
        "model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=r['hidden']))\n"
        "hf.trainer_config_finalize(args, model, r['steps'])\n"
        "print(json.dumps(hf.config))\n"
    )
    args = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 3, "world_size": 2,
            "max_grad_norm": cfg.grad_clip,
            "learning_rate": cfg.lr, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_epsilon": 1e-8,
            "weight_decay": cfg.weight_decay, "fp16": False, "bf16": True, "warmup_steps": cfg.warmup_steps}
    env = dict(os.environ, DS_ACCELERATOR="cpu", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180,
                         input=json.dumps({"config": config, "args": args, "hidden": HIDDEN, "steps": cfg.steps}))
    assert out.returncode == 0, out.stderr[-2000:]
    real = json.loads(out.stdout.strip().splitlines()[-1])
    path = REPO / "recipes" / f"{recipe}.json"
    if recipe == "with-scheduler":
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"rocmcheck-test-{os.getpid()}-sched.json"
        path.write_text(json.dumps(config))
    try:
        mine = prepare_deepspeed_config(path, cfg, world_size=2, hidden_size=HIDDEN).config
    finally:
        if recipe == "with-scheduler":
            path.unlink()
    assert mine == real


# -- the CLI: bad input is one clear message and exit 2, before torch or a launcher ----------------------

def smoke(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real command (rocmcheck.cli.main turns BadInput into one line and exit 2), in a child process."""
    full = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", *args], capture_output=True, text=True,
                          env=full, cwd=REPO, timeout=120)


def test_cli_refuses_a_config_with_lint_errors(tmp_path):
    config = json.loads((RECIPES / "zero3.json").read_text())
    config["zero_optimization"]["stage3_parition_grads"] = True
    proc = smoke(["--deepspeed", str(write(tmp_path, config)), "--device", "cpu"])
    assert proc.returncode == 2 and proc.stdout == ""
    assert "stage3_parition_grads" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("Error: ") and "did you mean 'stage3_partition_grads'" in proc.stderr


@pytest.mark.parametrize("args, env, words", [
    (["--nproc", "0"], None, "0 is not in the range 1<=x"),
    (["--nproc", "2", "--bench"], None, "--bench runs in one process"),
    (["--nproc", "2", "--pure-bf16"], None, "cannot be combined"),
    (["--nproc", "2"], {"WORLD_SIZE": "2", "RANK": "1"}, "already one of 2 ranks"),
    (["--nproc", "2", "--timeout", "0"], None, "0 is not in the range 0<x"),
])
def test_cli_bad_parallel_flags(args, env, words):
    proc = smoke(args, env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_the_ranks_request_carries_the_run_settings_and_the_filled_plan():
    cfg = TrainConfig(steps=30, micro_batch=4, grad_accum=2, lr=3e-4, device="cpu", gradient_checkpointing=True,
                      profile=False, out=Path("/tmp/x"))
    plan = prepare_deepspeed_config(RECIPES / "zero2.json", cfg, 2, HIDDEN)
    request = json.loads(json.dumps(train_request(cfg, plan, 99.0)))  # as it crosses the command line
    got_cfg, got_plan, pg_timeout_s = parse_request(request)
    assert got_cfg == cfg and pg_timeout_s == 99.0
    assert got_plan.to_dict() == plan.to_dict() and got_plan.path == str(RECIPES / "zero2.json")
    assert torchrun_launcher(2)[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                        "--max-restarts", "0"]


def test_without_deepspeed_installed_the_run_is_a_failed_verdict_with_the_install_command(tmp_path):
    """sys.modules["deepspeed"] = None makes this child see no DeepSpeed (importlib finds no spec)."""
    code = ("import sys; sys.modules['deepspeed'] = None\n"
            "from rocmcheck.cli import cli\n"
            f"cli.main(['smoke-train', '--deepspeed', {str(RECIPES / 'zero2.json')!r}, '--device', 'cpu', '--json'])\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert out.returncode == 1, out.stderr[-2000:]
    (result,) = json.loads(out.stdout)["results"]
    assert result["id"] == "train.deepspeed" and result["status"] == "fail"
    assert result["fix"]["kind"] == "shell" and "--no-build-isolation deepspeed" in result["fix"]["text"]
