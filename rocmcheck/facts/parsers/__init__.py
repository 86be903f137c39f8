"""Pure parsers: tool output text -> data. Each is tested on verbatim recorded tool outputs (tests/test_parsers_*.py).
None raises, whatever the text: a field it cannot read stays unknown."""
