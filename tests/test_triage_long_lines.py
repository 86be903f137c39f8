"""A reader's time is linear in a long line: one line of tens of thousands of characters whose spaces sit where a
pattern looked for the end of its value. Lazy captures before `\\s*$` (`(.*?)\\s*$`, `(.+?)\\s*$`, `([^:]+?)\\s*:`) and
a lazy `.*?(\\S+)$` retried their tail from every position of such a run: quadratic, minutes for one line of a paste.
Nothing here is timed: each call returns (a quadratic pattern on these lines does not, in any useful time) and what
it returns is bounded by the line."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocmcheck.facts.parsers._text import split_key_value
from rocmcheck.triage.readers.paste import MAX_LINE_CHARS, Block, split
from rocmcheck.triage.readers.paste_read import read_block
from rocmcheck.triage.readers.system_info import parse_device_listing

LONG = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.data_too_large])
# (the block kind whose reader reads the line, the start of a line that reaches the pattern), from the shapes of
# real lines: a collect_env package row, a rocminfo key, rocm-smi's GPU[n] rows, a traceback frame, an env report
# item, a code fence with text on its line.
HEADS = [("collect_env", "[pip3] torch"), ("rocminfo", "  Marketing Name:"), ("rocminfo", "  Chip ID"),
         ("rocm_smi", "GPU[0]\t\t: Card series:"), ("rocm_smi", "GPU[0]\t\t:"),
         ("traceback", 'File "x.py", line 3, in f'), ("accelerate_env", "- `Accelerate` version: 1.0"),
         ("text", "``` bash")]


@LONG
@given(st.sampled_from(HEADS), st.integers(20_000, 60_000), st.sampled_from([" ", "\t", " \t"]))
def test_a_long_run_of_spaces_in_a_line_is_read_in_one_pass(head, n, space):
    kind, start = head
    line = f"{start} a{space * (n // len(space))}b"
    result = read_block(Block(kind=kind, text=f"{line}\n{line}", first_line=1, last_line=2))
    assert kind == "text" or result is not None
    blocks = split(f"{line}\nnext line\n")
    assert blocks.lines == 2
    assert all(len(text_line) <= MAX_LINE_CHARS for b in blocks for text_line in b.text.split("\n"))
    kv = split_key_value(line)
    assert kv is None or len(kv[0]) + len(kv[1]) < len(line)


@LONG
@given(st.integers(5_000, 16_000), st.sampled_from(["x", "renderD128", "-"]))
def test_a_device_listing_line_with_a_long_last_word_is_read_in_one_pass(n, unit):
    long_word = unit * (n // len(unit))
    listing = "\n".join([f"crw-rw---- 1 root video 226, {128 + i} Jan  1 12:00 {long_word} y" for i in range(8)]
                        + ["crw-rw---- 1 root render 226, 128 Jan  1 12:00 renderD128"])
    nodes = parse_device_listing(listing)
    assert [node.path for node in nodes] == ["/dev/dri/renderD128"]
