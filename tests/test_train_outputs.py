"""--out: refused up front when it cannot be used (a loop of links, a file on the way), written through the one
writer (a link planted at an output name is never written through), and a write that fails at the end is a
train.outputs verdict with a command that pastes, the report still shown. The runner's finish() is called on a
recorded report: no training here."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from rocmcheck.fixes import FixKind
from rocmcheck.result import passed
from rocmcheck.train.config import TrainConfig
from rocmcheck.train.outputs import out_dir_problem, write_outputs
from rocmcheck.train.report import RunReport
from rocmcheck.train.request import Mode, Request
from rocmcheck.train.runner import finish, write_failed_fix

REPORT = Path(__file__).parent / "fixtures" / "train" / "cpu-default-report.json"


def test_a_new_folder_or_an_empty_one_is_fine(tmp_path):
    assert out_dir_problem(tmp_path / "new" / "deeper", force=False) is None
    assert out_dir_problem(tmp_path, force=False) is None


@pytest.mark.parametrize("make, words", [
    (lambda t: os.symlink(t / "loop", t / "loop") or t / "loop", "symbolic link to nothing"),
    (lambda t: os.symlink(t / "loop", t / "loop") or t / "loop" / "run1", "Too many levels of symbolic links"),
    (lambda t: os.symlink(t / "gone", t / "dangling") or t / "dangling", "symbolic link to nothing"),
    (lambda t: (t / "f").write_text("x") and t / "f" / "run1", "is not a directory"),
    (lambda t: (t / "f").write_text("x") and t / "f", "exists and is not a directory"),
])
def test_an_out_that_cannot_be_a_folder_is_refused_up_front(tmp_path, make, words):
    problem = out_dir_problem(make(tmp_path), force=True)
    assert problem is not None and words in problem and "\n" not in problem


def test_a_folder_with_files_needs_force(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    assert "add --force" in out_dir_problem(tmp_path, force=False)
    assert out_dir_problem(tmp_path, force=True) is None


def test_force_never_writes_through_a_link_planted_at_an_output_name(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("a file of someone else's\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").symlink_to(outside)
    report = json.loads(REPORT.read_text())
    try:
        write_outputs(report, out, force=True)
    except (OSError, ValueError):  # refused by the writer: also fine, as long as nothing outside changed
        pass
    assert outside.read_text() == "a file of someone else's\n"
    assert not (out / "report.json").is_symlink() or os.readlink(out / "report.json") == str(outside)


def test_write_failure_fixes_paste_as_commands(tmp_path):
    odd = tmp_path / "my runs; rm -rf ~" / "o"
    full = write_failed_fix(odd, OSError(errno.ENOSPC, "No space left on device"))
    assert full.kind is FixKind.SHELL and full.text == f"df -h '{odd.parent}'"
    other = write_failed_fix(odd, PermissionError(errno.EACCES, "Permission denied"))
    assert other.kind is FixKind.SHELL and other.text == f"mkdir -p '{odd}' && test -w '{odd}'"


def request_for(out: Path, as_json: bool = True) -> Request:
    return Request(TrainConfig(device="cpu", out=out), Mode.TRAIN, as_json=as_json)


def test_a_write_that_fails_at_the_end_is_a_verdict_and_the_report_is_still_shown(tmp_path, capsys):
    os.symlink(tmp_path / "loop", tmp_path / "loop")  # only a run started before the loop appeared gets here
    report = RunReport([passed("trained", id="train.finite")], metrics=[{"step": 0, "loss": 1.0}])
    code = finish(request_for(tmp_path / "loop" / "run1"), report, 0.0)
    shown = json.loads(capsys.readouterr().out)
    assert code == 1 and shown["verdict"] == "fail"
    outputs = {r["id"]: r for r in shown["results"]}["train.outputs"]
    assert outputs["status"] == "fail" and outputs["fix"]["kind"] == "shell"
    assert outputs["fix"]["text"].startswith("mkdir -p ")
    assert {r["id"] for r in shown["results"]} == {"train.finite", "train.outputs"}


def test_a_plot_that_cannot_be_drawn_never_loses_the_report(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from rocmcheck.train import outputs

    def broken(report_dict):
        raise RuntimeError("matplotlib could not lay this out")

    monkeypatch.setattr(outputs, "loss_memory_figure", broken)
    report = RunReport.from_dict(json.loads(REPORT.read_text()))
    code = finish(request_for(tmp_path / "o"), report, 0.0)
    shown = json.loads(capsys.readouterr().out)
    assert code == 0 and shown["files"]["plot"].startswith("skipped: the plot could not be drawn (RuntimeError")
    assert json.loads((tmp_path / "o" / "report.json").read_text())["results"] == shown["results"]
