"""Pure parsers: tool output text -> data. Tested on the verbatim outputs in ../shared/fixtures."""
