"""Hostile options: non-finite, absurd and empty values are one line and exit 2 for every command."""

from __future__ import annotations

import pytest
from fakes import env_with_path, make_tool
from hostile import cli, one_line

HUGE = "9" * 400


@pytest.mark.parametrize("argv, words", [
    (["doctor", "--deadline", "nan"], "not a finite number"),
    (["doctor", "--deadline", "inf"], "not a finite number"),
    (["doctor", "--deadline", "1e300"], "not in the range"),
    (["probe", "all", "--timeout", "nan"], "not a finite number"),
    (["plan", "--model", "llama-2-7b", "--gpu-memory", "nan"], "not a finite number"),
    (["plan", "--model", "llama-2-7b", "--gpu-memory", "inf"], "not a finite number"),
    (["plan", "--model", "llama-2-7b", "--gpu-memory", "1e300"], "not in the range"),
    (["plan", "--model", "llama-2-7b", "--target", "nan"], "not a finite number"),
    (["plan", "--model", "llama-2-7b", "--timeout", "inf"], "not a finite number"),
    (["plan", "--model", "llama-2-7b", "--seq-len", HUGE], "400 digits"),
    (["plan", "--model", "llama-2-7b", "--micro-batch", "9" * 5000], "5000 digits"),
    (["lint", "--world-size", HUGE, "x.json"], "not in the range"),
    (["smoke-train", "--seq-len", "9" * 91], "91 digits"),
    (["smoke-train", "--timeout", "nan"], "not a finite number"),
    (["smoke-train", "--lr", "inf"], "not a finite number"),
    (["smoke-train", "--steps", HUGE], "not in the range"),
    (["smoke-train", "--deadline-typo", "1"], "No such option"),
    (["smoke-train", "--lora-rank", "0"], "not in the range"),
    (["plan", "--model", "llama-2-7b", "--lora-rank", "8", "--lora-dropout", "nan"], "not a finite number"),
    (["lint", "--hidden-size", "1e200", "x.json"], "not a whole number"),
    (["monitor", "--interval", "nan", "--", "true"], "not a finite number"),
    (["monitor", "--timeout", "inf", "--", "true"], "not a finite number"),
    (["monitor", "--pid", HUGE], "not in the range"),
    (["compare", "--across-typo"], "No such option"),
    (["doctor", "--only", "probe.bogus"], "did you mean"),
    (["doctor", "--only", "gpu.presnt"], "did you mean gpu.present"),
    (["doctor", "--only", "os", "--skip", "os"], "nothing to run"),
    (["doctor", "--only", ""], "an empty name"),
    (["doctor", "--only", "gpu,"], "an empty name"),
    (["doctor", "--skip", ""], "an empty name"),
])
def test_bad_options_are_one_line_and_exit_2(argv, words):
    assert words in one_line(cli(*argv, timeout=60))


def test_build_env_auto_says_the_tools_hung_not_no_gpu(tmp_path):
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "rocminfo", hang=True)
    make_tool(bin_dir, "nvidia-smi", crash_signal="SEGV")
    line = one_line(cli("build-env", "--arch", "auto", env=env_with_path(bin_dir), timeout=120))
    assert "hung" in line and "crashed" in line and "no GPU found" not in line and "--arch gfx942" in line


LONG = "x" * 100_000  # one argument below the kernel's 128 KiB limit per argument


@pytest.mark.parametrize("argv", [
    ["doctor", "--only", LONG], ["doctor", "--skip", "train." + LONG], ["doctor", "--arch", LONG],
    ["plan", "--model", "llama-2-7b", "--attn", LONG], ["smoke-train", "--attn", LONG],
    ["doctor", "--bundle", LONG], ["recipes", "show", LONG], ["recipes", "write", LONG, "out"],
    ["lint", LONG], ["lint", "--gpus", LONG, "x.json"],
])
def test_a_huge_value_is_echoed_cut_not_whole(argv):
    proc = cli(*argv, timeout=60)
    assert proc.returncode in (2, 3) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert 0 < len(proc.stderr) < 2000 and len(proc.stdout) < 2000, (len(proc.stdout), len(proc.stderr))
