"""Pure parsers: tool output text -> data. Each is tested on verbatim recorded tool outputs (tests/test_parsers_*.py)."""
