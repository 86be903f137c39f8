"""triage never raises, on any text: arbitrary text, text made of the characters and words its readers and
signatures look for, every real paste mangled (lines cut, dropped, repeated, shuffled, spliced together across
kinds: every reader path the pasted facts are built through), mangled rocmcheck summaries, and bytes of any kind
through the input reader (BadInput or text, nothing else). Its outputs (results, causes, asks, text, Markdown,
JSON) are built for each."""

from __future__ import annotations

import json

import pytest
from conftest import PROJECT_FIXTURES_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machines import amd_machine

from rocmcheck.checks import run_checks, select_checks
from rocmcheck.checks.context import CheckContext
from rocmcheck.errors import BadInput
from rocmcheck.triage import triage
from rocmcheck.triage.answer import markdown, text_lines
from rocmcheck.triage.inputs import _text
from rocmcheck.triage.readers.summary import parse_summary
from rocmcheck.triage.summary import render_summary

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.data_too_large])
_PASTES = sorted(p for p in (PROJECT_FIXTURES_DIR / "pastes").rglob("*.txt") if not p.name.endswith(".source"))
TEXTS = [p.read_bytes().decode("utf-8") for p in _PASTES]
_CTX = CheckContext(amd_machine(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}))
SUMMARY = render_summary(_CTX.facts, _CTX, run_checks(select_checks(), _CTX))
WORDS = st.sampled_from(["HIP error: invalid device function", "undefined symbol: ", "/dev/kfd", "Permission denied",
                         "No such file or directory", "HSA_STATUS_ERROR_OUT_OF_RESOURCES", "export ", "HIP_", "=",
                         "ROCR_VISIBLE_DEVICES=1 ", "python -c \"", ">>> ", "docker run --device /dev/kfd ",
                         "Traceback (most recent call last):\n", '  File "/x/site-packages/flash_attn/a.py", line 1\n',
                         "PyTorch version: 2.4.1+rocm6.1\n", "== rocmcheck summary 1 (rocmcheck 0) ==\n", "gpu 0: ",
                         " | ", "FAIL a.b: c\n", "  fix: ", "== end of rocmcheck summary ==\n", "```\n", "> ",
                         "\n", " ", "\t", "\x1b[31m", "\x00", "WSL", "sudo rocminfo\n", "Agent 1\n", "Name: gfx942\n",
                         "[0]br-0123456789ab:1.2.3.4<0>\n", "NCCL WARN ", "out of memory", "\u00d7 ", "\ufffd"])
PIECES = st.lists(WORDS, max_size=60).map("".join)


def answer(texts: list[tuple[str, str]]) -> None:
    t = triage(texts)
    results = t.results()
    json.dumps([r.to_dict() for r in results])
    json.dumps(t.causes_payload())
    json.dumps(t.ask_payload())
    text_lines(t, show_all=True, verbose=True)
    markdown(t)


@FUZZ
@given(st.text(max_size=3000))
def test_any_text(text):
    answer([("p", text)])


@FUZZ
@given(PIECES)
def test_text_of_the_words_triage_looks_for(text):
    answer([("p", text)])


@FUZZ
@given(st.data())
def test_real_pastes_mangled_and_spliced(data):
    picked = data.draw(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=3))
    lines = [line for text in picked for line in text.splitlines()]
    ops = data.draw(st.lists(st.tuples(st.sampled_from(["cut", "drop", "dup", "swap", "splice", "chop"]),
                                       st.integers(0, 10**6), st.integers(0, 10**6)), max_size=8))
    for op, a, b in ops:
        if not lines:
            break
        i, j = a % len(lines), b % len(lines)
        if op == "cut":
            lines = lines[:i]
        elif op == "drop":
            del lines[i:i + 1 + j % 5]
        elif op == "dup":
            lines[i:i] = lines[i:i + 1 + j % 5] * 2
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "splice":
            lines.insert(i, data.draw(WORDS))
        elif op == "chop":
            lines[i] = lines[i][: j % (len(lines[i]) + 1)]
    answer([("a", "\n".join(lines)), ("b", data.draw(PIECES))])


@pytest.mark.parametrize("index", range(len(TEXTS)))
def test_every_real_paste_whole(index):
    answer([("p", TEXTS[index])])


@FUZZ
@given(st.data())
def test_mangled_summaries(data):
    lines = SUMMARY.splitlines()
    for _ in range(data.draw(st.integers(0, 6))):
        i = data.draw(st.integers(0, len(lines) - 1))
        cut = data.draw(st.integers(0, len(lines[i])))
        lines[i] = lines[i][:cut] + data.draw(st.sampled_from(["", " | ", "none", "x", ": ", "\x00", "9" * 30]))
    text = "\n".join(lines)
    parse_summary(text)
    answer([("s", text)])


@FUZZ
@given(st.binary(max_size=2000))
def test_any_bytes_are_text_or_one_bad_input(data):
    try:
        text = _text("paste", data)
    except BadInput as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(text, str) and text.strip()
