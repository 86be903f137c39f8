"""One real default smoke-train on this CPU, run as a person runs it (the CLI in a child process), offline:
HF_HUB_OFFLINE=1, an HF_ENDPOINT nobody listens on and an empty HF cache, so any download attempt fails.
The verdict tests below all read that one run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rocmcheck.monitor.step_memory import MiB, detect_leak  # noqa: E402
from rocmcheck.train.config import TrainConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def offline_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp / "hf-home"),
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smoke")
    out = tmp / "out"
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--device", "cpu", "--json", "--out",
                           str(out)],
                          capture_output=True, text=True, env=offline_env(tmp), cwd=tmp, timeout=300)
    report = json.loads(proc.stdout)  # --json: stdout is exactly one JSON object, whatever libraries print
    return proc, report, out, {r["id"]: r for r in report["results"]}


def test_exit_zero_and_every_verdict_passes(cpu_run):
    proc, _, _, by_id = cpu_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = {"train.fit", "train.numerics", "train.finite", "train.loss_decrease", "train.task_accuracy",
                "train.reload", "train.reference_curve",
                "train.memory_leak", "train.memory", "train.throughput", "train.kernels"}
    assert set(by_id) == expected
    # Throughput warns on stalls, which a shared CI box can cause; its status is timing, so not asserted.
    statuses = {k: r["status"] for k, r in by_id.items() if k != "train.throughput"}
    assert set(statuses.values()) == {"pass"}, {k: (r["status"], r["summary"]) for k, r in by_id.items()}


def test_one_metrics_row_per_step(cpu_run):
    _, report, out, _ = cpu_run
    steps = TrainConfig().steps
    assert [m["step"] for m in report["metrics"]] == list(range(steps))
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == steps
    columns = {"loss", "grad_norm", "lr", "step_s", "tokens_per_s", "mem_allocated", "mem_reserved", "mem_peak"}
    assert columns <= set(json.loads(lines[0]))


def test_plot_and_report_files(cpu_run):
    _, report, out, _ = cpu_run
    assert (out / "loss_memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "report.json").read_text())["results"] == report["results"]
    assert (out / "checkpoint" / "config.json").is_file() and (out / "checkpoint" / "model.safetensors").is_file()


def test_loss_falls_and_the_task_is_learned_not_pretrained(cpu_run):
    _, _, _, by_id = cpu_run
    loss = by_id["train.loss_decrease"]["data"]
    assert loss["last_mean"] < 0.25 * loss["first"]
    acc = by_id["train.task_accuracy"]["data"]
    assert acc["accuracy_before"] <= 0.05, "the pretrained model must not already do the fine-tune task"
    assert acc["accuracy"] >= acc["threshold"] == TrainConfig().min_accuracy


def test_reload_is_exact_and_curve_matches_cpu_reference(cpu_run):
    _, _, _, by_id = cpu_run
    assert by_id["train.reload"]["data"]["max_abs_diff"] == 0.0
    ref = by_id["train.reference_curve"]["data"]
    assert ref["kind"] == "cpu" and all(w["ok"] for w in ref["windows"])


def test_leak_detector_on_this_runs_real_numbers(cpu_run):
    _, report, _, by_id = cpu_run
    baselines = [m["mem_allocated"] for m in report["metrics"]]
    assert by_id["train.memory_leak"]["data"]["kind"] == "cpu-rss"
    assert not detect_leak(baselines, 32 * MiB).leaking
    # The same real numbers with 4 MiB added per step (a kept graph of this run holds ~44 MiB, see
    # test_train_faults) must be caught: the detector is not just passing everything.
    assert detect_leak([b + i * 4 * MiB for i, b in enumerate(baselines)], 32 * MiB).leaking


def test_kernels_and_throughput_reported(cpu_run):
    _, _, _, by_id = cpu_run
    kern = by_id["train.kernels"]
    assert kern["data"]["attention_path"] == "fused"  # SDPA on CPU: _scaled_dot_product_flash_attention_for_cpu
    assert kern["evidence"] and "aten::" in " ".join(kern["evidence"])
    thr = by_id["train.throughput"]["data"]
    assert thr["tokens_per_s"] > 0 and thr["mfu"] is None  # no datasheet peak for a CPU


def test_stdout_is_pure_json_despite_library_prints(cpu_run):
    proc, _, _, _ = cpu_run
    assert proc.stdout.count("\n") == 1 and proc.stdout.startswith("{")


def test_the_report_says_where_the_time_went(cpu_run):
    """info.timings_s splits the run into its parts; together they stay inside the run's own wall time."""
    from rocmcheck.train.report import timings_line

    _, report, _, _ = cpu_run
    parts = report["info"]["timings_s"]
    assert {"import transformers", "import model classes (and torch._dynamo)", "first optimizer step", "device",
            "fit", "data", "load", "numerics", "accuracy", "train", "reload", "profile", "outputs"} <= set(parts)
    reload = report["info"]["reload"]  # the reload's own split, outside timings_s (it is part of "reload")
    assert reload["method"] == "full" and reload["save_s"] + reload["verify_s"] <= parts["reload"] + 0.01
    passes = report["info"]["numerics_s"]  # the numerics' two passes, each timed: together inside its part
    assert set(passes) == {"bf16", "fp32"} and 0 < passes["bf16"] + passes["fp32"] <= parts["numerics"] + 0.01
    assert all(v >= 0 for v in parts.values())
    assert parts["train"] == max(parts.values())  # 120 steps are the most of a CPU run
    assert sum(parts.values()) <= report["info"]["wall_s"] + 0.01  # writing the outputs included
    line = timings_line(report["info"])
    assert line.startswith(f"time: {report['info']['wall_s']:.1f} s: train ")


def test_lora_on_the_bundled_model_learns_the_task(tmp_path):
    """--lora-rank 8: the adapters' own lr (0.02 / sqrt(8)) and threshold (config.py has the measurements); at the
    full fine-tune's lr the same run scored 0%."""
    pytest.importorskip("peft")
    from rocmcheck.train.config import BUNDLED_LORA_LR_SCALE, LORA_MIN_ACCURACY, default_lr

    assert default_lr(True, None, 128) == 1e-3 and default_lr(True, 8, 128) == pytest.approx(0.02 / 8 ** 0.5)
    assert default_lr(True, 1, 128) == 1e-2  # capped at the largest lr measured healthy
    proc = subprocess.run([sys.executable, "-m", "rocmcheck", "smoke-train", "--device", "cpu", "--json",
                           "--lora-rank", "8", "--no-profile"], capture_output=True, text=True,
                          env=offline_env(tmp_path), cwd=tmp_path, timeout=300)
    report = json.loads(proc.stdout)
    by_id = {r["id"]: r for r in report["results"]}
    assert proc.returncode == 0, {k: (r["status"], r["summary"]) for k, r in by_id.items()}
    assert report["info"]["config"]["lr"] == pytest.approx(BUNDLED_LORA_LR_SCALE / 8 ** 0.5)
    accuracy = by_id["train.task_accuracy"]
    assert accuracy["status"] == "pass" and accuracy["data"]["threshold"] == LORA_MIN_ACCURACY
    assert accuracy["data"]["accuracy_before"] <= 0.05  # what it scores is what the adapters learned
