"""The one progress display (rocmcheck/report/progress.py): a live line on a terminal that redraws in place
(rich's cursor and erase codes reach the real stream below the sanitising wrapper, while the data on the line is
cleaned), plain lines in a pipe or CI log; and the monitor's status line built on it."""

from __future__ import annotations

import io
import time

import pytest

from rocmcheck.report import progress as progress_module
from rocmcheck.report.progress import CI_VARIABLES, LOG_LINES, Progress, StatusLine, stream_console
from rocmcheck.safe.text import SanitizingStream

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # a clipboard write hidden in data (a GPU name, a host name)


@pytest.fixture(autouse=True)
def redrawing_terminal(monkeypatch):
    """A terminal that can redraw, outside CI, whatever runs these tests (a test changes what it studies)."""
    monkeypatch.setenv("TERM", "xterm-256color")
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class Terminal(io.StringIO):
    """A stream that says it is a terminal, and keeps every byte written to it."""

    def isatty(self) -> bool:
        return True


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_status_line_redraws_in_place_on_a_terminal_behind_the_sanitising_stream():
    terminal = Terminal()
    status = StatusLine(SanitizingStream(terminal))  # what the CLI installs over sys.stderr
    status.show(0.0, f"[rocmcheck monitor 0s] GPU0 1.0G/192G {OSC52}")
    time.sleep(0.3)
    status.show(1.0, "[rocmcheck monitor 1s] GPU0 2.0G/192G")
    time.sleep(0.3)
    status.clear()
    written = terminal.getvalue()
    assert "\r\x1b[2K" in written  # back to the line's start and erase it: a redraw, not readings piled on one line
    assert "GPU0 1.0G/192G" in written and "GPU0 2.0G/192G" in written
    assert "\x1b]52" not in written and "ZWNo" not in written  # the clipboard write in the data is gone, whole
    assert written.count("\n") <= 1  # one line, redrawn (rich ends the live display with one newline)


def test_status_line_in_a_pipe_prints_a_plain_line_every_interval():
    pipe = Pipe()
    status = StatusLine(SanitizingStream(pipe), every=0.5)
    for i in range(5):  # five readings 0.1 s apart: the first is printed, the rest fall inside the interval
        status.show(i * 0.1, f"reading {i} {OSC52}")
        time.sleep(0.1)
    time.sleep(0.5)
    status.show(1.0, "reading 5")
    status.clear()
    lines = pipe.getvalue().splitlines()
    assert lines == ["reading 0 ", "reading 5"]
    assert "\x1b" not in pipe.getvalue()


def test_a_counted_stage_prints_a_few_plain_lines_for_a_run_of_any_length():
    pipe = Pipe()
    with Progress(stream_console(pipe), prefix="smoke-train ") as progress:
        progress.begin("training")
        for step in range(1, 121):
            progress.count(step, 120, f"loss {1 / step:.3f}")
    lines = pipe.getvalue().splitlines()
    counted = [line for line in lines if ": " in line and "/120" in line]
    assert len(counted) == LOG_LINES + 1  # steps 1, 12, 24, ... 120
    assert counted[0].startswith("smoke-train [") and counted[0].endswith("training: 1/120  loss 1.000")
    assert counted[-1].endswith("training: 120/120  loss 0.008")


def test_on_a_terminal_the_counter_is_on_the_live_line():
    terminal = Terminal()
    with Progress(stream_console(terminal)) as progress:
        progress.begin("training")
        progress.count(12, 120, "loss 2.310")
        time.sleep(0.3)
    written = terminal.getvalue()
    assert "training" in written and "12/120" in written and "loss 2.310" in written
    assert "\r\x1b[2K" in written or "\x1b[2K" in written


def test_stages_in_a_pipe_wait_for_plain_after_s():
    pipe = Pipe()
    with Progress(stream_console(pipe), plain_after_s=0.3, prefix="lint ") as progress:
        progress.begin("quick")  # over before 0.3 s: never printed
        progress.begin("slow")
        time.sleep(0.6)
    assert [line.split("] ", 1)[1] for line in pipe.getvalue().splitlines()] == ["slow ..."]


def test_a_counted_stage_in_a_pipe_shows_its_count_and_time_left_while_it_waits(monkeypatch):
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.3)
    pipe = Pipe()
    with Progress(stream_console(pipe), prefix="doctor ") as progress:
        progress.begin("smoke-train")
        progress.count(1, 50, "loss 7.300")
        time.sleep(0.2)
        progress.count(2, 50, "loss 6.100  400 tok/s")  # not a tenth of the way: printed only by the heartbeat
        time.sleep(1.0)  # a slow step: several heartbeats, each with the count and the time left
    lines = pipe.getvalue().splitlines()
    waited = [line for line in lines if "2/50" in line]
    assert waited and all(line.endswith(" left") and "loss 6.100  400 tok/s  ~" in line for line in waited)
    assert not any("still running" in line for line in lines)  # a counted stage says where it is instead


def test_a_stage_without_a_count_says_how_long_it_has_run_and_its_bound(monkeypatch):
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.3)
    pipe = Pipe()
    with Progress(stream_console(pipe), prefix="doctor ") as progress:
        progress.begin("collecting system facts", limit_s=60)
        time.sleep(1.0)
    lines = pipe.getvalue().splitlines()
    assert lines[0].endswith("collecting system facts ...") and len(lines) >= 2
    assert all(line.endswith(", at most 60 s)") and ": still running (" in line for line in lines[1:])


def test_term_dumb_gets_plain_lines_not_a_live_line_it_cannot_draw(monkeypatch):
    monkeypatch.setenv("TERM", "dumb")
    terminal = Terminal()
    with Progress(stream_console(terminal), prefix="doctor ") as progress:
        assert not progress.live_mode
        progress.begin("collecting system facts")
    assert "collecting system facts ..." in terminal.getvalue() and "\x1b" not in terminal.getvalue()


def test_clear_live_lines_erases_the_line_and_nothing_is_drawn_after_it():
    """What a stop signal's handler does before it leaves with os._exit (no `with` exit runs then)."""
    terminal = Terminal()
    progress = Progress(stream_console(terminal), live=True)
    progress.__enter__()
    progress.begin("training")
    progress.count(3, 120, "loss 2.310")
    time.sleep(0.3)
    assert "training" in terminal.getvalue()
    progress_module.clear_live_lines()
    end = len(terminal.getvalue())
    time.sleep(0.4)  # the redraw thread would have drawn the line again by now (8 times a second)
    written = terminal.getvalue()
    assert written.endswith("\r\x1b[2K\x1b[?25h") and len(written) == end  # erased, cursor shown, and quiet since
    assert not progress_module._LIVE


def test_after_clear_live_lines_a_plain_display_prints_nothing_more(monkeypatch):
    """In a pipe or under TERM=dumb there is no line to erase, but a heartbeat printed after the last word would be
    the terminal's last line."""
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.2)
    pipe = Pipe()
    progress = Progress(stream_console(pipe))
    progress.__enter__()
    progress.begin("collecting system facts")
    progress_module.clear_live_lines()
    progress.count(1, 10, "loss 1.0")
    time.sleep(0.6)
    assert pipe.getvalue().splitlines() == [pipe.getvalue().splitlines()[0]]  # the stage's own line, then nothing
