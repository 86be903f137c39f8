"""Hostile text: escape sequences and rich markup from a tool, a bundle or a config never reach the terminal as
control sequences and never crash a report; a console that cannot encode a character never raises."""

from __future__ import annotations

import json

import pytest
from fakes import env_with_path, make_tool
from hostile import cli

from rocmcheck.safe.text import clean, safe_console

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # writes "rm -rf ~" to the clipboard
OSC0 = "\x1b]0;owned\x1b\\"  # sets the window title
CSI = "\x1b[2J\x1b[1;1H\x1b[32m"  # clears the screen, moves the cursor, turns green
HOSTILE = f"MI300X{OSC52}{OSC0}{CSI}[/x][bold]\r\x00\x9b31m\u202e"


@pytest.mark.parametrize("text, expected", [
    (OSC52 + "a", "a"), (OSC0 + "b", "b"), (CSI + "c", "c"), ("d\rPASS", "dPASS"), ("e\x9b2Jf", "ef"),
    ("g\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "glink"), ("h\u202eevil", "hevil"), ("tab\tnl\n", "tab\tnl\n"),
    ("unterminated\x1b]52;c;abc", "unterminated"), ("[/x] stays", "[/x] stays"), ("ümlaut — dash", "ümlaut — dash"),
])
def test_clean(text, expected):
    assert clean(text) == expected


def test_safe_console_prints_markup_as_text_and_keeps_its_own_colours():
    import io

    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = safe_console(file=buf, force_terminal=True, width=100)
    table = Table(title=HOSTILE)
    table.add_column("x")
    table.add_row(HOSTILE, Text("pass", style="green"))
    console.print(table)
    console.print(HOSTILE)
    out = buf.getvalue()
    assert "[/x][bold]" in out and "]52;" not in out and "]0;" not in out and "\x1b[2J" not in out
    assert "\r" not in out and "\x00" not in out and "\u202e" not in out
    assert "\x1b[32m" in out or "\x1b[3" in out  # rich's own styling survives


def _hostile_machine(tmp_path):
    bin_dir = tmp_path / "bin"
    rocminfo = (f"ROCk module is loaded\nAgent 1\n  Name:                    gfx942{OSC52}\n"
                f"  Marketing Name:          AMD Instinct {HOSTILE}\n  Device Type:             GPU\n")
    make_tool(bin_dir, "rocminfo", stdout=rocminfo)
    make_tool(bin_dir, "hipconfig", stdout=f"HIP version: 6.2{OSC0}[/x]\n")
    return env_with_path(bin_dir)


def _assert_clean(text: str) -> None:
    for bad in ("\x1b]", "\x07", "\x1b[2J", "\x1b[1;1H", "\r", "\x00", "\x9b", "\u202e"):
        assert bad not in text, (bad, text[-500:])


def test_doctor_report_from_a_hostile_tool_is_clean_and_does_not_crash(tmp_path):
    env = _hostile_machine(tmp_path)
    proc = cli("doctor", "--no-gpu-probes", "--no-train", "--only", "gpu,rocm,host", "-v", env=env)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr and "MarkupError" not in proc.stdout
    assert "Verdict:" in proc.stdout
    _assert_clean(proc.stdout + proc.stderr)


def test_a_received_bundle_with_escape_sequences_prints_clean(tmp_path):
    env = _hostile_machine(tmp_path)
    bundle = tmp_path / "b.json"
    cli("doctor", "--no-gpu-probes", "--no-train", "--only", "gpu,host", "--save-bundle", str(bundle), env=env)
    doc = json.loads(bundle.read_text())
    doc["facts"]["os_info"]["name"] = f"Ubuntu{OSC52}[/x]"
    doc["facts"]["platform"]["kernel"] = f"6.8{CSI}"
    bundle.write_text(json.dumps(doc))
    proc = cli("doctor", "--bundle", str(bundle), "-v")
    assert proc.returncode in (0, 1) and "Ubuntu" in proc.stdout and "[/x]" in proc.stdout, proc.stdout[-3000:]
    _assert_clean(proc.stdout + proc.stderr)


def test_lint_messages_with_hostile_keys_print_clean(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_batch_size": 8, f"zero_optimisation{OSC52}": {"stage": 2}}))
    proc = cli("lint", str(path))
    assert "Traceback" not in proc.stderr and "zero_optimisation" in proc.stdout
    _assert_clean(proc.stdout + proc.stderr)


def test_an_ascii_console_gets_question_marks_not_a_traceback(tmp_path):
    env = _hostile_machine(tmp_path)
    env["PYTHONIOENCODING"] = "ascii"
    proc = cli("doctor", "--no-gpu-probes", "--no-train", "--only", "gpu,host", env=env)
    assert proc.returncode in (0, 1) and "UnicodeEncodeError" not in proc.stderr and "Verdict:" in proc.stdout
    proc = cli("plan", "--model", "llama-2-7b", "--gpu", "mi300x", env=env)
    assert proc.returncode in (0, 1) and "UnicodeEncodeError" not in proc.stderr, proc.stderr[-1000:]
    proc = cli("lint", str(tmp_path / "missing-\u00e9.json"), env=env)
    assert proc.returncode == 2 and "UnicodeEncodeError" not in proc.stderr  # a missing file: bad input
