"""The smoke-train plot shows what the verdicts judge: drawn from the report of a real default CPU run (recorded:
fixtures/train/cpu-default-report.json, `rocmcheck smoke-train --device cpu --json --out DIR`'s report.json),
and checked through matplotlib's own objects."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from matplotlib.collections import PolyCollection  # noqa: E402

from rocmcheck.monitor.step_memory import MiB  # noqa: E402
from rocmcheck.train import reference  # noqa: E402
from rocmcheck.train.outputs import loss_memory_figure, plot_loss_memory  # noqa: E402

REPORT = Path(__file__).parent / "fixtures" / "train" / "cpu-default-report.json"


@pytest.fixture()
def report() -> dict:
    return json.loads(REPORT.read_text(encoding="utf-8"))


def _lines(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


def test_loss_panel_draws_the_reference_curve_and_its_band(report):
    fig = loss_memory_figure(report)
    ax_loss, ax_mem = fig.axes
    lines = _lines(ax_loss)
    ref_label = next(k for k in lines if k.startswith("reference curve (cpu"))
    assert list(lines[ref_label].get_ydata()) == report["info"]["reference_curve"]["loss"]
    assert any(k.startswith("this run, 10-step means") for k in lines)
    bands = [c for c in ax_loss.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1 and bands[0].get_label().startswith("tolerance band")
    # The band's edges are the reference window means +- the tolerance train.reference_curve uses.
    ys = bands[0].get_paths()[0].vertices[:, 1]
    first = reference.band(report["info"]["reference_curve"]["loss"])[0]
    assert min(ys) <= first[2] - first[3] + 1e-9 and max(ys) >= first[2] + first[3] - 1e-9
    assert "train.reference_curve: PASS" in ax_loss.get_title(loc="left")
    assert "window outside the band" not in lines  # this run passed


def test_memory_panel_starts_at_zero_with_the_post_step_line_strongest(report):
    fig = loss_memory_figure(report)
    ax_mem = fig.axes[1]
    lines = _lines(ax_mem)
    post = lines["after each step (train.memory_leak reads this)"]
    assert list(post.get_ydata()) == [m["mem_allocated"] / MiB for m in report["metrics"]]
    others = [line for label, line in lines.items() if line is not post]
    assert others and all(post.get_linewidth() > o.get_linewidth() and post.get_zorder() > o.get_zorder()
                          for o in others)
    assert ax_mem.get_ylim()[0] == 0
    assert ax_mem.get_ylim()[1] >= max(m["mem_peak"] for m in report["metrics"]) / MiB
    assert "train.memory_leak: PASS" in ax_mem.get_title(loc="left")


def test_title_names_device_model_and_overall_verdict(report):
    title = loss_memory_figure(report)._suptitle.get_text()
    assert "cpu" in title and "tiny-llama" in title
    assert "verdict WARN" in title  # the recorded run's throughput warned (a loaded CPU); all else passed
    failing = copy.deepcopy(report)
    failing["results"][6]["status"] = "fail"
    assert "verdict FAIL" in loss_memory_figure(failing)._suptitle.get_text()


def test_legends_sit_outside_the_axes(report):
    fig = loss_memory_figure(report)
    fig.canvas.draw()
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        box, area = legend.get_window_extent(), ax.get_window_extent()
        assert box.x0 >= area.x1  # right of the data, never over it


def test_a_failing_reference_window_is_marked(report):
    bad = copy.deepcopy(report)
    for m in bad["metrics"][40:50]:
        m["loss"] += 3.0
    lines = _lines(loss_memory_figure(bad).axes[0])
    marks = lines["window outside the band"]
    assert list(marks.get_xdata()) == [44.5]


def test_no_reference_says_why(report):
    other = copy.deepcopy(report)
    other["info"]["reference_curve"] = {"kind": "rocm", "why_not": "no reference curve recorded for device kind 'rocm'"}
    labels = [t.get_text() for t in loss_memory_figure(other).axes[0].get_legend().get_texts()]
    assert any(t.startswith("no reference curve:") for t in labels)


def test_png_written(report, tmp_path):
    path = plot_loss_memory(report, tmp_path / "loss_memory.png")
    assert path.endswith("loss_memory.png") and (tmp_path / "loss_memory.png").read_bytes()[:4] == b"\x89PNG"
    assert plot_loss_memory({"metrics": []}, tmp_path / "x.png").startswith("skipped")


def test_a_dollar_in_the_model_folder_is_literal_text_not_mathtext(report, tmp_path):
    odd = copy.deepcopy(report)
    odd["info"]["model"]["path"] = "/data/m$\\bogus$"  # mathtext would raise ParseFatalException on \bogus
    odd["info"]["reference_curve"]["recorded_on"]["device"] = "GPU $x^2$"
    fig = loss_memory_figure(odd)
    assert "m$\\bogus$" in fig._suptitle.get_text() and not fig._suptitle.get_parse_math()
    path = plot_loss_memory(odd, tmp_path / "loss_memory.png")
    assert path.endswith("loss_memory.png") and (tmp_path / "loss_memory.png").read_bytes()[:4] == b"\x89PNG"
    legend = [t for t in fig.axes[0].get_legend().get_texts() if "GPU $x^2$" in t.get_text()]
    assert legend and not legend[0].get_parse_math()
